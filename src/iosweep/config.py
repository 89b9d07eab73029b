"""Workflow configuration: validation against the JSON schema (with defaults) and sweep expansion."""

from __future__ import annotations

import copy
import itertools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

# The schema lives with the workflow (Snakemake convention); the package reads the same file.
SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A config value that is not allowed; the message names the key."""


def load_schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA_FILE.read_text())


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
    validator = _fill_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(_explain(e, schema) for e in errors))
    # The analysis section is owned by AnalysisSettings, which rejects unknown keys itself.
    try:
        from iosweep.analysis import AnalysisSettings
    except ImportError:  # analysis not installed in this environment (e.g. the TF training env)
        return config
    try:
        AnalysisSettings.from_dict(config.get("analysis", {}))
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"invalid config: analysis: {e}") from e
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


# Sweep dimensions: config list name -> (point field, directory key). Dimensions always
# shown in a run's path come first; the others appear only when swept (more than one value).
_DIMENSIONS = [
    ("frameworks", "framework", "framework", True),
    ("tracers", "tracer", "tracer", False),
    ("nodes", "nodes", "nodes", True),
    ("procs_per_node", "ppn", "ppn", True),
    ("epochs", "epochs", "epochs", False),
    ("steps_per_epoch", "steps", "steps", False),
    ("batch_size", "batch_size", "batch", False),
]


@dataclass(frozen=True)
class SweepPoint:
    """One run of the sweep: a point and a repeat."""

    framework: str
    tracer: str
    nodes: int
    ppn: int
    epochs: int
    steps: int
    batch_size: int
    rep: int
    run_id: str  # relative directory, e.g. framework~pytorch/nodes~1/ppn~4/rep~0

    @property
    def ranks(self) -> int:
        return self.nodes * self.ppn

    def params(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("run_id")
        d["ranks"] = self.ranks
        return d


def expand_sweep(config: dict[str, Any]) -> list[SweepPoint]:
    """All sweep points x repeats, in a stable order (smallest scale first)."""
    sweep = config["sweep"]
    lists = [sweep[name] for name, *_ in _DIMENSIONS]
    points = []
    for values in itertools.product(*lists):
        for rep in range(config["repeats"]):
            fields = {field: v for (_, field, _, _), v in zip(_DIMENSIONS, values, strict=True)}
            parts = [
                f"{key}~{v}"
                for (name, _, key, always), v in zip(_DIMENSIONS, values, strict=True)
                if always or len(sweep[name]) > 1
            ]
            parts.append(f"rep~{rep}")
            points.append(SweepPoint(**fields, rep=rep, run_id="/".join(parts)))
    return points


def point_by_run_id(config: dict[str, Any], run_id: str) -> SweepPoint:
    for p in expand_sweep(config):
        if p.run_id == run_id:
            return p
    raise ConfigError(f"run {run_id!r} is not a point of the configured sweep")
