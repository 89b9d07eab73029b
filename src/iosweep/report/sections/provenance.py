"""Provenance: how the report and its runs were made, enough to run the sweep again."""

from __future__ import annotations

import datetime as dt
import platform
import shlex
import socket
from collections import defaultdict
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
import yaml

import iosweep
from iosweep.provenance import git_revision
from iosweep.report import fmt
from iosweep.report.data import RunView
from iosweep.report.sections import Context

VERSION_KEYS = {
    "iosweep",
    "iosweep_git",
    "horovod",
    "torch",
    "tensorflow",
    "tracer",
    "mpi",
    "python",
    "darshan",
    "dftracer",
}


def _lib_versions() -> dict[str, str]:
    import matplotlib
    import pyarrow

    return {
        "python": platform.python_version(),
        "pandas": pd.__version__,
        "pyarrow": pyarrow.__version__,
        "matplotlib": matplotlib.__version__,
        "jinja2": jinja2.__version__,
    }


def versions(runs: list[RunView]) -> list[dict[str, str]]:
    """Every version the runs recorded; one row per key where all runs agree."""
    vals: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        for k, v in r.meta.versions.items():
            vals[k][str(v)].append(r.label)
        for k, v in (r.manifest.get("versions") or {}).items():
            if k not in r.meta.versions:
                vals[k][str(v)].append(r.label)
    out = []
    for k in sorted(vals):
        vs = vals[k]
        if len(vs) == 1:
            labels = next(iter(vs.values()))
            out.append(
                {
                    "key": k,
                    "value": next(iter(vs)),
                    "runs": "all" if len(labels) == len(runs) else ", ".join(labels),
                }
            )
        else:
            for v, rs in vs.items():
                out.append({"key": k, "value": v, "runs": ", ".join(rs)})
    return out


def _run_row(r: RunView) -> dict[str, Any]:
    man = r.manifest
    cmd = r.meta.command or man.get("command") or []
    start, end = man.get("start_time"), man.get("end_time")
    timed = isinstance(start, int | float) and isinstance(end, int | float)
    duration = end - start if timed else None  # type: ignore[operator]
    return {
        "label": r.label,
        "run_id": r.run_id,
        "status": r.status,
        "started": fmt.iso_time(start) if start else fmt.iso_time(r.meta.clock_zero),
        "duration": fmt.seconds(duration),
        "host": str(man.get("host") or ", ".join(sorted({x.host for x in r.meta.ranks}))),
        "launcher": str(man.get("launcher") or ""),
        "slurm_job": str(man.get("slurm_job_id") or ""),
        "command": shlex.join(str(a) for a in cmd) if cmd else "",
        "timing": _timing_cell(r),
        "store": r.store,
        "analysis": str(r.analysis_dir),
    }


def _timing_cell(r: RunView) -> str:
    """How the run's steps were timed, and what the hooks cost."""
    t = r.summary.pipeline.timing
    if t.source == "hooks":
        cost = f", {fmt.seconds(t.overhead_s)} over {t.batches:,} batches" if t.batches else ""
        return f"iosweep's hooks{cost}" + (" (wait estimated)" if t.wait == "estimated" else "")
    return {"script": "the training script", "none": "not timed"}.get(t.source, "")


def _workload_texts(runs: list[RunView]) -> dict[str, list[str]]:
    """What each run ran: its workload's command template and settings, grouped by text."""
    groups: dict[str, list[str]] = {}
    for r in runs:
        wl = r.manifest.get("workload")
        if not isinstance(wl, dict) or not wl.get("name"):
            continue
        whose = "iosweep's own" if wl.get("builtin") else "yours"
        lines = [
            f"workload: {wl['name']} ({whose})",
            f"command: {wl.get('template', '')}",
            f"launch: {wl.get('launch', '')}",
            f"timing: {wl.get('timing', '')}",
        ]
        for key in ("workdir", "python"):
            if wl.get(key):
                lines.append(f"{key}: {wl[key]}")
        if wl.get("env"):
            lines.append("environment: " + ", ".join(map(str, wl["env"])))
        groups.setdefault("\n".join(lines), []).append(r.label)
    return groups


def _tracer_texts(runs: list[RunView]) -> dict[str, list[str]]:
    """The tracer settings (and Darshan config file) of each run, grouped by text."""
    tracers: dict[str, list[str]] = {}
    for r in runs:
        tr = r.manifest.get("tracer")
        if isinstance(tr, dict) and tr.get("name"):
            text = yaml.safe_dump(tr, sort_keys=True, default_flow_style=False).strip()
            cf = tr.get("config_file")
            if cf and Path(cf).is_file() and Path(cf).stat().st_size < 8192:
                text += f"\n--- {cf}\n" + Path(cf).read_text(errors="replace").strip()
            tracers.setdefault(text, []).append(r.label)
    return tracers


def _grouped(groups: dict[str, list[str]], n_runs: int) -> list[dict[str, str]]:
    return [
        {"runs": ", ".join(v) if len(v) < n_runs else "all runs", "text": k}
        for k, v in groups.items()
    ]


def section(ctx: Context) -> dict[str, Any]:
    runs = ctx.runs
    analysis_settings: dict[str, list[str]] = {}
    for r in runs:
        key = yaml.safe_dump(r.summary.settings, sort_keys=True).strip()
        analysis_settings.setdefault(key, []).append(r.label)
    config = ctx.config
    return {
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "host": socket.gethostname(),
        "iosweep": iosweep.__version__,
        "git": git_revision() or "not a git checkout",
        "libs": _lib_versions(),
        "config": yaml.safe_dump(config, sort_keys=False, default_flow_style=False).strip()
        if config
        else "",
        "runs": [_run_row(r) for r in runs],
        "versions": versions(runs),
        "tracers": _grouped(_tracer_texts(runs), len(runs)),
        "workloads": _grouped(_workload_texts(runs), len(runs)),
        "analysis_settings": _grouped(analysis_settings, len(runs)),
        "report_settings": yaml.safe_dump(ctx.settings.to_dict(), sort_keys=False).strip(),
        "sweep_source": ctx.sweep.source,
        "platform": platform.platform(),
    }
