"""Overview: what was run, runs that did not go well, headline findings, and at a glance."""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from typing import Any

import pandas as pd

from iosweep.analysis.summary import Insight, InsightsSeries
from iosweep.config import ConfigError, expand_sweep
from iosweep.report import fmt
from iosweep.report.data import RunView
from iosweep.report.sections import Context, verdict
from iosweep.report.sections.provenance import VERSION_KEYS, versions
from iosweep.report.words import access_sentences, checkpoint_sentence, plural

_SEVERITY = {"high": 0, "warn": 1, "info": 2}


def section(ctx: Context) -> dict[str, Any]:
    return {
        "verdicts": verdict.section(ctx),
        "what": what_was_run(ctx),
        "glance": glance(ctx),
        "findings": findings(ctx),
        "not_ok": not_ok(ctx),
        "problems": ctx.problems + ctx.sweep.problems,
    }


def _listed(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + "; ".join(f"{k}: {_listed(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list | tuple):
        return ", ".join(_listed(x) for x in v)
    return str(v)


def _values(runs: list[RunView], get) -> list:
    found = {v for v in (get(r) for r in runs) if v not in (None, "")}
    return sorted(
        found,
        key=lambda v: (not isinstance(v, int | float), v if isinstance(v, int | float) else str(v)),
    )


# SweepPoint fields as the report names them (the order of the config's dimensions)
_POINT_WORDS = {
    "framework": "frameworks",
    "workload": "workloads",
    "tracer": "tracers",
    "nodes": "nodes",
    "ppn": "processes per node",
    "epochs": "epochs",
    "steps": "steps per epoch (0: whole epochs)",
    "batch_size": "batch size",
    "loader_workers": "loader workers",
    "staging": "staging",
}


def configured_sweep(config: dict[str, Any]) -> str:
    """The sweep the config expands to: the points and, per dimension, the values they take.
    A value no point takes (a default of a dimension the workload does not use, a framework
    it has no command for) is not listed: the config's own lists, merged with the defaults,
    name values that never applied."""
    try:
        points = expand_sweep(config)
    except (ConfigError, KeyError, TypeError, ValueError) as e:
        return f"(the config does not expand: {e})"
    values: dict[str, set] = defaultdict(set)
    for p in points:
        for k, v in p.params().items():
            if v is not None and k not in ("rep", "ranks"):
                values[k].add(v)
    order = [*_POINT_WORDS, *sorted(set(values) - set(_POINT_WORDS))]
    said = [
        f"{_POINT_WORDS.get(k, k)}: {_listed(sorted(values[k], key=str))}"
        for k in order
        if values.get(k)
    ]
    repeats = config.get("repeats", 1)
    head = (
        f"{len(points) // max(repeats, 1)} points x {repeats} repeat{'s' if repeats != 1 else ''}"
    )
    return "; ".join([head, *said])


def what_was_run(ctx: Context) -> dict[str, Any]:
    runs = ctx.runs
    sweep_cfg = (ctx.config or {}).get("sweep") or {}
    rows = [
        ("frameworks", _values(runs, lambda r: r.framework)),
        ("tracers", _values(runs, lambda r: r.tracer)),
        ("nodes", _values(runs, lambda r: r.nodes)),
        ("processes per node", _values(runs, lambda r: r.ppn)),
        ("ranks", _values(runs, lambda r: r.ranks)),
        ("repeats", _values(runs, lambda r: r.rep + 1) and [max(r.rep for r in runs) + 1]),
    ]
    for key, label in (
        ("epochs", "epochs"),
        ("steps", "steps per epoch"),
        ("batch_size", "batch size"),
    ):
        rows.append((label, _values(runs, lambda r, k=key: r.param(k))))
    rows += _host_rows(runs)
    if sweep_cfg and not ((ctx.config or {}).get("ingest") or {}).get("enabled"):
        rows.append(("configured sweep", [configured_sweep(ctx.config or {})]))
    commands = []
    seen = set()
    for r in runs:
        if r.meta.command:
            c = shlex.join(str(a) for a in r.meta.command)
            if c not in seen:
                seen.add(c)
                commands.append({"run": r.label, "command": c})
    return {
        "rows": [(k, ", ".join(str(x) for x in v)) for k, v in rows if v],
        "runs": len(runs),
        "status": dict(Counter(r.status for r in runs)),
        "analysis": dict(Counter(r.analysis_status for r in runs)),
        "commands": commands[:6],
        "more_commands": max(0, len(commands) - 6),
        "versions": [
            v
            for v in versions(runs)
            if v["key"] in VERSION_KEYS or v["key"].startswith(("torch", "tensorflow"))
        ],
    }


def processes_per_core(r: RunView) -> float | None:
    """Ranks and their loader workers on a node, per core of the host."""
    cpus = (r.manifest.get("host_info") or {}).get("cpus")
    if not cpus or not r.ppn:
        return None
    workers = r.param("loader_workers") or 0
    return r.ppn * (1 + int(workers)) / cpus


def _host_rows(runs: list[RunView]) -> list[tuple[str, list]]:
    """What explains the numbers: cores, oversubscription, the data's file system and cache."""
    infos = [(r, r.manifest.get("host_info") or {}) for r in runs]
    cpus = _values(runs, lambda r: (r.manifest.get("host_info") or {}).get("cpus"))
    per_core = [p for r in runs if (p := processes_per_core(r)) is not None]
    rows: list[tuple[str, list]] = [("host cores", cpus)]
    if per_core:
        worst = max(per_core)
        rows.append(
            (
                "processes per core",
                [
                    f"up to {worst:.1f} (ranks x (1 + loader workers) per node / cores)"
                    + ("; oversubscribed: ranks and workers share cores" if worst > 1 else "")
                ],
            )
        )
    data = {
        (d.get("workload"), d.get("source"), d.get("files"), d.get("bytes"))
        for r in runs
        if (d := r.manifest.get("data") or {}) and d.get("files")
    }
    rows.append(
        (
            "datasets",
            [
                f"{w or '?'}: {src or '?'}, {n:,} files, {fmt.human_bytes(b)}"
                for w, src, n, b in sorted(data, key=str)
            ],
        )
    )
    fs = _values(runs, lambda r: (r.manifest.get("host_info") or {}).get("data_fs"))
    rows.append(("data file system", fs))
    cached = [float(c) for _, i in infos if (c := i.get("data_page_cache_share")) is not None]
    if cached:
        rows.append(
            (
                "data in the page cache before a run",
                [
                    f"{min(cached):.0%} to {max(cached):.0%} of a sample of the files (fincore): "
                    "storage reads may have been served from memory"
                ],
            )
        )
    return [(k, v) for k, v in rows if v]


def not_ok(ctx: Context) -> list[dict[str, Any]]:
    """Runs that did not finish, were not fully traced, or lost data (error-level issues).
    Warnings (e.g. an unattributed child process) stay in the run's own section."""
    out = []
    for r in ctx.runs:
        issues = r.summary.issues
        errors = [i for i in issues if i.severity == "error" or i.kind == "trace-incomplete"]
        # an untraced baseline (tracer: none) is as it should be
        fine = (
            r.status == "ok"
            and r.analysis_status in ("complete", "untraced")
            and not r.summary.incomplete
        )
        if fine and not errors:
            continue
        out.append(
            {
                "label": r.label,
                "run_id": r.run_id,
                "slug": r.slug,
                "status": r.status,
                "analysis_status": r.analysis_status,
                "reason": r.reason,
                "rerun": r.rerun if r.status in ("failed", "lost", "partial") else "",
                "issues": [
                    f"{i.kind}: {i.message}"
                    if i.kind == "trace-incomplete"
                    else f"{i.kind}: {i.source}: {i.message}"
                    for i in errors[:8]
                ],
                "more_issues": max(0, len(errors) - 8),
                "warnings": len(issues) - len(errors),
            }
        )
    return out


def numbers(ins: Insight) -> list[tuple[str, str]]:
    """An insight's numbers as (name, text) pairs, each in the unit the analysis gave it."""
    return [
        (k.replace("_", " "), fmt.with_unit(v, ins.units[k]))
        for k, v in ins.numbers.items()
        if not isinstance(v, dict)
    ]


def findings(ctx: Context) -> list[dict[str, Any]]:
    by_id: dict[str, list[tuple[RunView, Insight]]] = defaultdict(list)
    # Runs that ran: a failed or skipped point's "no I/O" says nothing its reason does not.
    ran = [r for r in ctx.runs if r.has_io or r.status in ("ok", "partial")]
    for r in ran:
        for ins in r.summary.insights:
            by_id[ins.id].append((r, ins))
    across = _across(ctx)
    out: list[dict[str, Any]] = []
    for iid, hits in by_id.items():
        run, ins = max(hits, key=lambda h: _largest_first(h[0]))
        fws = sorted({r.framework for r, _ in hits if r.framework})
        out.append(
            {
                "id": iid,
                "severity": ins.severity,
                "title": ins.title or iid,
                "message": ins.message,
                "example_run": run.label,
                "example_slug": run.slug,
                "numbers": numbers(ins),
                "recommendation": ins.recommendation,
                "runs": len({r.slug for r, _ in hits}),
                "of_runs": len(ran),
                "frameworks": ", ".join(fws),
                "across": across.get(iid, []),
            }
        )
    out.sort(key=lambda f: (_SEVERITY.get(f["severity"], 3), -f["runs"], f["id"]))
    return out


def _largest_first(r: RunView) -> tuple[int, int, int]:
    return (r.ranks or 0, r.nodes or 0, -r.rep)


def series_name(key: dict[str, Any], all_keys: list[dict[str, Any]]) -> str:
    """A series by the parameters that tell it from the others (framework first)."""
    keys = [k for k in key if k == "framework" or len({str(s.get(k)) for s in all_keys}) > 1]
    words = [
        _value(key[k]) if k in ("framework", "tracer") else f"{k}={_value(key[k])}"
        for k in keys
        if k not in ("framework", "tracer") or key[k]
    ]
    return " ".join(words) or "all runs"


def whole_int(v: Any) -> Any:
    """2.0 -> 2 (pandas turns an int column with gaps into floats)."""
    return int(v) if isinstance(v, float) and float(v).is_integer() else v


def _value(v: Any) -> str:
    """A parameter's value in a series name: a run without it (logs from elsewhere) says
    "unset", not "None" or "nan"."""
    if v is None or (isinstance(v, float) and v != v):
        return "unset"
    return str(whole_int(v))


def _across(ctx: Context) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    all_series: list[InsightsSeries] = ctx.sweep.insights_across.series
    keys = [s.key for s in all_series]
    for series in all_series:
        name = series_name(series.key, keys)
        for iid, ch in series.insights.items():
            st = ch.status
            where = (
                ch.appears_at
                if st == "appears"
                else ch.disappears_at
                if st == "disappears"
                else None
            )
            if st != "never":
                at = ""
                if where and where.ranks is not None:
                    at = f" at {plural(whole_int(where.ranks), 'rank')}"
                    if where.nodes is not None:
                        at += f" on {plural(whole_int(where.nodes), 'node')}"
                out[iid].append(f"{name}: {st}{at}")
    return out


def glance(ctx: Context) -> list[dict[str, Any]]:
    """Per framework: its largest run's access pattern, checkpoints, and how bytes scale."""
    out = []
    by_fw: dict[str, list[RunView]] = defaultdict(list)
    for r in ctx.runs:
        if r.has_io:
            by_fw[r.framework].append(r)
    for fw, runs in sorted(by_fw.items()):
        big = max(runs, key=_largest_first)
        ck = checkpoint_sentence(big.summary)
        # The glance leaves out classes that move next to nothing (temp files of the runtime).
        facts = access_sentences(big.summary, min_share=0.001, skip=("checkpoint",) if ck else ())
        if ck:
            facts.append(ck)
        facts += _trend_sentences(ctx, fw)
        out.append(
            {
                "framework": fw or "Applications",
                "run": big.label,
                "slug": big.slug,
                "facts": facts,
            }
        )
    return out


def _trend_sentences(ctx: Context, fw: str) -> list[str]:
    df = ctx.sweep.table
    if df.empty or "framework" not in df or "ranks" not in df:
        return []
    g = df[(df["framework"] == fw)]
    if "analysis_status" in g:
        g = g[g["analysis_status"].isin(["complete", "partial"])]
    if "nodes" in g and g["nodes"].nunique() > 1:  # compare along ppn on the commonest node count
        g = g[g["nodes"] == g["nodes"].mode().iloc[0]]
    out = []
    for m, what in (
        ("bytes_read_per_rank", "Bytes read per rank"),
        ("bytes_read", "Bytes read in total"),
        ("io_time_max", "I/O time of the slowest rank"),
        ("run_time", "Run time"),
    ):
        if m not in g:
            continue
        v = pd.to_numeric(g[m], errors="coerce").groupby(g["ranks"]).mean().dropna()
        if len(v) < 2:
            continue
        r0, r1 = whole_int(v.index[0]), whole_int(v.index[-1])
        ratio = v.iloc[-1] / v.iloc[0] if v.iloc[0] else float("nan")
        trend = _trend(ctx, fw, m)
        out.append(
            f"{what} from {r0} to {r1} ranks: {fmt.metric(m, v.iloc[0])} → {fmt.metric(m, v.iloc[-1])} "
            f"(\u00d7{ratio:.2f}{', ' + trend if trend else ''})"
        )
    return out


def _trend(ctx: Context, fw: str, metric: str) -> str:
    for s in ctx.sweep.scaling.series:
        if s.key.get("framework") == fw:
            m = s.metrics.get(metric)
            return (m.trend if m else None) or ""
    return ""
