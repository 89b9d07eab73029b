"""Workflow configuration: validation against the JSON schema (with defaults) and sweep expansion."""

from __future__ import annotations

import copy
import functools
import itertools
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from iosweep.workloads import DIMENSIONS, Workload, WorkloadError, all_workloads, check_workloads

# The schema lives with the workflow (Snakemake convention); the package reads the same file.
SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A config value that is not allowed; the message names the key."""


@functools.cache
def _schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA_FILE.read_text())


def load_schema() -> dict[str, Any]:
    """The config schema: the one definition of every key (type, range, default, meaning)."""
    return copy.deepcopy(_schema())


def section_schema(section: str) -> dict[str, Any]:
    """The schema of one top-level section (``analysis``, ``report``), with the definitions
    its references need."""
    schema = _schema()
    return {"definitions": schema["definitions"], **schema["properties"][section]}


def _default_of(sub: dict[str, Any]) -> Any:
    """A key's default; for a mapping whose own default is empty, its keys' defaults."""
    d = copy.deepcopy(sub["default"])
    if d == {} and sub.get("properties"):
        d = {k: _default_of(v) for k, v in sub["properties"].items() if "default" in v}
    return d


def section_defaults(section: str) -> dict[str, Any]:
    """Every key of a section with its default."""
    return {k: _default_of(v) for k, v in _schema()["properties"][section]["properties"].items()}


class SettingsError(ConfigError):
    """A bad value of an analysis or report setting."""


class UnknownSettingError(SettingsError, KeyError):
    """A setting no section knows."""

    def __str__(self) -> str:  # KeyError's own quotes the message
        return str(self.args[0])


class SettingTypeError(SettingsError, TypeError):
    """A setting of the wrong type."""


def _setting_path(error: jsonschema.ValidationError) -> str:
    """``file_classes[0].pattern``: the key path as a Python reader writes it."""
    out = ""
    for p in error.absolute_path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def check_section(section: str, values: dict[str, Any]) -> None:
    """Validate one section's mapping against the schema; SettingsError naming the key."""
    validator = jsonschema.Draft202012Validator(
        section_schema(section), format_checker=jsonschema.FormatChecker()
    )
    errors = sorted(validator.iter_errors(values), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    e = errors[0]
    if e.validator == "additionalProperties":
        known = sorted(e.schema.get("properties", {})) if isinstance(e.schema, dict) else []
        extra = sorted(set(e.instance) - set(known))
        where = _setting_path(e)
        names = ", ".join(repr(f"{where}.{k}" if where else k) for k in extra)
        raise UnknownSettingError(f"unknown {section} setting {names}; known: {', '.join(known)}")
    msg = f"{section} setting {_setting_path(e)!r}: {e.message}"
    raise (SettingTypeError if e.validator == "type" else SettingsError)(msg)


def _fill_defaults(validator_cls):
    """A validator that also writes each property's ``default`` into the instance."""
    validate_props = validator_cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_cls, {"properties": set_defaults})


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "<top level>"


def _description(error: jsonschema.ValidationError) -> str:
    sub = error.schema if isinstance(error.schema, dict) else {}
    return str(sub.get("description", error.message))


def _explain(error: jsonschema.ValidationError, schema: dict[str, Any]) -> str:
    where = _key_path(error)
    sub = error.schema if isinstance(error.schema, dict) else {}
    if "x-error" in sub:  # the schema's own words for a value that is known not to work
        return f"config key {where!r}: {error.instance!r} is not allowed: {sub['x-error']}"
    if error.validator == "additionalProperties":
        sub = error.schema if isinstance(error.schema, dict) else {}
        allowed = sorted(sub.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))  # type: ignore[arg-type]
        prefix = f"{where}." if error.absolute_path else ""
        return (
            f"unknown config key {', '.join(repr(prefix + k) for k in extra)}; "
            f"allowed here: {', '.join(allowed)}"
        )
    if error.validator == "enum":
        return f"config key {where!r}: {error.instance!r} is not one of {error.validator_value}"
    if error.validator == "pattern":
        return (
            f"config key {where!r}: {error.instance!r} contains characters that are not allowed "
            f"(must match {error.validator_value})"
        )
    if error.validator == "type":
        return f"config key {where!r}: {error.instance!r} is not of type {error.validator_value}"
    if error.validator in ("anyOf", "oneOf"):
        return f"config key {where!r}: {error.instance!r} is not allowed ({_description(error)})"
    return f"config key {where!r}: {error.message}"


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Validate ``config`` in place, filling defaults; raise ConfigError naming every bad key."""
    schema = load_schema()
    validator = _fill_defaults(jsonschema.Draft202012Validator)(
        schema, format_checker=jsonschema.FormatChecker()
    )
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(_explain(e, schema) for e in errors))
    check_workload_config(config)
    return config


def load_config(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: the config must be a mapping of keys to values")
    return validate_config(config)


# Sweep dimensions: (config list name, point field, directory key), in run-id order. A
# dimension appears in a run's directory name when the sweep has more than one value of it;
# frameworks, nodes and procs_per_node always do. A workload's own parameters follow, then
# the repeat.
_DIMENSIONS = [
    ("frameworks", "framework", "framework"),
    ("workloads", "workload", "workload"),
    ("tracers", "tracer", "tracer"),
    ("nodes", "nodes", "nodes"),
    ("procs_per_node", "ppn", "ppn"),
    ("epochs", "epochs", "epochs"),
    ("steps_per_epoch", "steps", "steps"),
    ("batch_size", "batch_size", "batch"),
    ("loader_workers", "loader_workers", "workers"),
    ("staging", "staging", "staging"),
]
_ALWAYS = {"frameworks", "nodes", "procs_per_node"}


@dataclass(frozen=True)
class SweepPoint:
    """One run of the sweep: a point and a repeat. A training dimension the workload's command
    does not use is None (unset): the run does not depend on it."""

    framework: str
    tracer: str
    nodes: int
    ppn: int
    epochs: int | None
    steps: int | None  # per rank and epoch; 0 = the whole epoch
    batch_size: int | None
    rep: int
    run_id: str  # relative directory, e.g. framework~pytorch/nodes~1/ppn~4/rep~0
    workload: str = "mnist"
    loader_workers: int | None = 0
    staging: str = "none"
    extra: tuple[tuple[str, Any], ...] = ()  # the workload's own parameters, (name, value)

    @property
    def ranks(self) -> int:
        return self.nodes * self.ppn

    def params(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("run_id")
        d.pop("extra")
        d["ranks"] = self.ranks
        return {**d, **dict(self.extra)}


def sweep_blocks(config: dict[str, Any]) -> list[dict[str, list[Any]]]:
    """The sweep's blocks of points: the main one, then each ``include`` block completed with
    the main block's values of the dimensions it does not name."""
    sweep = config["sweep"]
    main = {name: sweep[name] for name, *_ in _DIMENSIONS}
    return [main, *({**main, **extra} for extra in sweep.get("include") or [])]


def _point_fields(block: dict[str, list[Any]], workloads: dict[str, Workload]):
    """Every point of one block as (fields, the workload's parameters): each workload under
    its own framework(s), its unused training dimensions unset."""
    for values in itertools.product(*(block[name] for name, *_ in _DIMENSIONS)):
        fields = {f: v for (_, f, _), v in zip(_DIMENSIONS, values, strict=True)}
        w = workloads[fields["workload"]]
        if fields["framework"] not in w.commands:
            if len(w.commands) > 1:
                continue  # a workload runs under the frameworks it has commands for
            fields["framework"] = w.frameworks[0]
        used = w.uses(fields["framework"])
        for placeholder, (_, f) in DIMENSIONS.items():
            if placeholder not in used:
                fields[f] = None
        names = list(w.params)
        for combo in itertools.product(*(w.params[n] for n in names)):
            yield fields, tuple(zip(names, combo, strict=True))


def _check_unused_dimensions(
    blocks: list[dict[str, list[Any]]], workloads: dict[str, Workload]
) -> None:
    """A dimension the sweep varies for a workload whose command does not use it is an error."""
    for w in workloads.values():
        for fw in w.commands:
            mine = [
                b
                for b in blocks
                if w.name in b["workloads"] and (fw in b["frameworks"] or len(w.commands) == 1)
            ]
            used = w.uses(fw)
            checks = [(name, ph) for ph, (name, _) in DIMENSIONS.items() if ph not in used]
            if "data" not in used:
                checks.append(("staging", "data"))
            for name, ph in checks:
                seen = sorted({v for b in mine for v in b[name]}, key=str)
                if len(seen) > 1:
                    raise ConfigError(
                        f"config key 'sweep.{name}' varies over {seen} for workload {w.name!r}"
                        f" ({fw}), whose command does not use {{{ph}}}: those points would be "
                        f"one run under several names; use {{{ph}}} in "
                        f"{w.key('command')!r}, or vary {name} in an include block without "
                        "this workload"
                    )
            if w.launch == "single":
                scale = sorted(
                    {n * p for b in mine for n in b["nodes"] for p in b["procs_per_node"]}
                )
                if scale and scale != [1]:
                    raise ConfigError(
                        f"config key {w.key('launch')!r} is single (one process), but the sweep "
                        f"gives workload {w.name!r} {scale} ranks (sweep.nodes x "
                        "sweep.procs_per_node): use launch mpi or torchrun, or one rank"
                    )


def expand_sweep(config: dict[str, Any]) -> list[SweepPoint]:
    """All sweep points x repeats, in a stable order (block by block, smallest scale first
    within a block); a point that two blocks share is listed once."""
    workloads = all_workloads(config)
    found = [pf for block in sweep_blocks(config) for pf in _point_fields(block, workloads)]
    distinct: dict[str, set[Any]] = {}
    for fields, extra in found:
        for _, f, _ in _DIMENSIONS:
            distinct.setdefault(f, set()).add(fields[f])
        for k, v in extra:
            distinct.setdefault(k, set()).add(v)
    # a dimension named in run ids when it takes several values (unset counts for none)
    shown = {f for _, f, _ in _DIMENSIONS if len(distinct.get(f, set()) - {None}) > 1}
    shown |= {f for name, f, _ in _DIMENSIONS if name in _ALWAYS}
    points: dict[str, SweepPoint] = {}
    for fields, extra in found:
        parts = [
            f"{key}~{fields[f]}"
            for _, f, key in _DIMENSIONS
            if f in shown and fields[f] is not None
        ]
        parts += [f"{k}~{v}" for k, v in extra if len(distinct[k]) > 1]
        for rep in range(config["repeats"]):
            run_id = "/".join([*parts, f"rep~{rep}"])
            points.setdefault(run_id, SweepPoint(**fields, rep=rep, run_id=run_id, extra=extra))
    return list(points.values())


def point_by_run_id(config: dict[str, Any], run_id: str) -> SweepPoint:
    for p in expand_sweep(config):
        if p.run_id == run_id:
            return p
    raise ConfigError(f"run {run_id!r} is not a point of the configured sweep")


def check_workload_config(config: dict[str, Any]) -> None:
    """The workloads the sweep names exist, each can run as configured, and the sweep varies
    only dimensions their commands use; ConfigError naming the key otherwise."""
    try:
        workloads = all_workloads(config)
        check_workloads(workloads)
    except WorkloadError as e:
        raise ConfigError(str(e)) from None
    blocks = sweep_blocks(config)
    for i, block in enumerate(blocks):
        unknown = [n for n in block["workloads"] if n not in workloads]
        if unknown:
            where = "sweep.workloads" if i == 0 else f"sweep.include[{i - 1}].workloads"
            raise ConfigError(
                f"config key {where!r}: {', '.join(map(repr, unknown))} is not a workload; "
                f"known: {', '.join(sorted(workloads))} (your own go under the top-level "
                "`workloads:`)"
            )
    _check_unused_dimensions(blocks, workloads)


# ----------------------------------------------------------------------------------------
# config/README.md's key tables, generated from the schema
# ----------------------------------------------------------------------------------------

_KEYS_BLOCK = re.compile(r"<!-- keys: ([a-z_ ]+) -->\n.*?<!-- /keys -->", re.S)


def _resolve(sub: dict[str, Any]) -> dict[str, Any]:
    ref = sub.get("$ref")
    if not ref:
        return sub
    target = _schema()["definitions"][ref.rsplit("/", 1)[-1]]
    return {**target, **{k: v for k, v in sub.items() if k != "$ref"}, "_ref": ref}


def _range(sub: dict[str, Any]) -> str:
    lo, hi = sub.get("minimum"), sub.get("maximum")
    if "exclusiveMinimum" in sub:
        return f" > {sub['exclusiveMinimum']}"
    if lo is not None and hi is not None:
        return f" in [{lo}, {hi}]"
    return f" ≥ {lo}" if lo is not None else (f" ≤ {hi}" if hi is not None else "")


def _type_text(sub: dict[str, Any]) -> str:
    """The type of a key, for a reader: ``integer ≥ 1``, ``list of regex``, ``one of a, b``."""
    sub = _resolve(sub)
    if sub.get("_ref", "").endswith("/path"):
        return "path"
    if "enum" in sub:
        return "one of " + ", ".join(f"`{v}`" for v in sub["enum"])
    if "anyOf" in sub:
        return " or ".join(_type_text(s) for s in sub["anyOf"])
    t = sub.get("type")
    if t == "array":
        return "list of " + _type_text(sub.get("items", {}))
    if t == "object" and sub.get("required"):
        return "`{" + ", ".join(sub["required"]) + "}`"
    if t == "object":
        return "mapping"
    if t == "string" and sub.get("format") == "regex":
        return "regex"
    if t in ("integer", "number"):
        return str(t) + _range(sub)
    return str(t or "any")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _flow(v: Any) -> str:
    """A value as YAML flow text, unquoted: ``[^/proc, \\.py$]``, ``null``, ``true``."""
    if isinstance(v, list):
        return "[" + ", ".join(_flow(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_flow(x)}" for k, x in v.items()) + "}"
    if v is None or isinstance(v, bool):
        return {None: "null", True: "true", False: "false"}[v]
    return str(v)


def _default_text(sub: dict[str, Any], required: bool) -> str:
    if "x-doc-default" in sub:
        return _cell(sub["x-doc-default"])
    if "default" not in sub:
        return "(required)" if required else "(optional)"
    text = _flow(sub["default"])
    return f"`{_cell(text)}`"


def _rows(name: str, sub: dict[str, Any], required: bool = False) -> list[str]:
    sub = _resolve(sub)
    meaning = _cell(sub.get("description", ""))
    rows = [f"| `{name}` | {_type_text(sub)} | {_default_text(sub, required)} | {meaning} |"]
    for key, child in sub.get("properties", {}).items():
        rows += _rows(f"{name}.{key}", child, key in sub.get("required", []))
    extra = sub.get("additionalProperties")
    if isinstance(extra, dict) and extra.get("properties"):
        for key, child in extra["properties"].items():
            rows += _rows(f"{name}.<name>.{key}", child, key in extra.get("required", []))
    return rows


def key_table(sections: list[str]) -> str:
    """The markdown table of the top-level keys ``sections`` and everything under them."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name in sections:
        rows += _rows(name, _schema()["properties"][name])
    return "\n".join(rows)


def render_docs(text: str) -> str:
    """``text`` (config/README.md) with every ``<!-- keys: a b -->`` block regenerated."""

    def block(m: re.Match[str]) -> str:
        sections = m.group(1).split()
        return f"<!-- keys: {m.group(1)} -->\n{key_table(sections)}\n<!-- /keys -->"

    return _KEYS_BLOCK.sub(block, text)


def main(argv: list[str] | None = None) -> int:
    """``python -m iosweep.config --write-docs [README]``: regenerate the key tables."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m iosweep.config", description=main.__doc__)
    p.add_argument("--write-docs", action="store_true", required=True)
    p.add_argument("readme", nargs="?", type=Path, default=Path("config/README.md"))
    args = p.parse_args(argv)
    text = args.readme.read_text()
    args.readme.write_text(render_docs(text))
    print(f"{args.readme}: key tables regenerated from {SCHEMA_FILE.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
