"""A DLIO benchmark run's own account of itself, read beside its DFTracer traces.

DLIO (Argonne's deep-learning I/O benchmark, MLPerf Storage's engine) writes into its output
folder (hydra's run directory): ``summary.json`` (the run's metrics: ``train_au_percentage``
per epoch and its mean, throughput), ``<rank>_output.json`` (per rank and epoch: each step's
load and processing time, the nominal computation time, AU and throughput per block),
``per_epoch_stats.json`` (epoch and block times) and ``.hydra/config.yaml`` (the workload as
it ran). :func:`read_dlio_output` turns them into the record the store keeps as
``RunMeta.manifest["dlio"]``, with the run's parameters (framework, batch size, loader
workers = ``read_threads``, epochs, ranks) in ``params``, so that the analysis can set DLIO's
own AU beside the one it measures from the traces.

DLIO's AU (``dlio_benchmark/utils/statscounter.py``, ``compute_metrics_train``) is, per rank
and block, the *configured* computation time of every step but the first over the block's
wall time less the first step's processing time; the summary's per-epoch AU is the mean over
ranks. docs/analysis.md says how it differs from iosweep's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from iosweep.trace.schema import Issue

SUMMARY = "summary.json"
_RANK_OUTPUT = re.compile(r"^(\d+)_output\.json$")
_TRACE = re.compile(r"^trace-(\d+)-of-(\d+)\.pfw(\.gz)?$")


def is_dlio_output(folder: Path) -> bool:
    """A DLIO output folder: a summary.json with DLIO's metric block, or a hydra config of a
    DLIO workload beside DLIO-named traces."""
    s = folder / SUMMARY
    if s.is_file():
        try:
            d = json.loads(s.read_text())
        except (OSError, ValueError):
            return False
        return isinstance(d, dict) and isinstance(d.get("metric"), dict) and "num_accelerators" in d
    cfg = folder / ".hydra" / "config.yaml"
    return cfg.is_file() and any(_TRACE.match(p.name) for p in folder.iterdir())


def find_dlio_outputs(inputs: list[Path]) -> list[Path]:
    """DLIO output folders among ``inputs`` (themselves, or below them)."""
    found: list[Path] = []
    for root in inputs:
        if not root.is_dir():
            continue
        for d in [root, *(p.parent for p in root.rglob(SUMMARY))]:
            if d not in found and is_dlio_output(d):
                found.append(d)
    return sorted(found)


def _load(path: Path, issues: list[Issue], parse=json.loads) -> Any:
    try:
        return parse(path.read_text())
    except (OSError, ValueError, yaml.YAMLError) as e:
        issues.append(Issue(str(path), "unreadable", f"DLIO output not read: {e}", "warning"))
        return None


def _workload(folder: Path, issues: list[Issue]) -> dict[str, Any]:
    cfg = folder / ".hydra" / "config.yaml"
    if not cfg.is_file():
        return {}
    d = _load(cfg, issues, yaml.safe_load)
    return (d or {}).get("workload") or {} if isinstance(d, dict) else {}


def _rank_outputs(folder: Path, issues: list[Issue]) -> dict[str, dict[str, Any]]:
    """Per rank and epoch: DLIO's AU (%) and throughput per block, and its step counts."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(folder.glob("*_output.json")):
        m = _RANK_OUTPUT.match(f.name)
        d = _load(f, issues) if m else None
        if not isinstance(d, dict):
            continue
        epochs = {}
        for key, rec in d.items():
            if not (key.isdigit() and isinstance(rec, dict)):
                continue
            au, proc = rec.get("au") or {}, rec.get("proc") or {}
            epochs[key] = {
                "au_percentage": {b: v for b, v in au.items() if b.startswith("block")},
                "steps": sum(len(v) for b, v in proc.items() if b.startswith("block")),
                "computation_time": sum(
                    sum(v[1:])
                    for b, v in (rec.get("compute") or {}).items()
                    if b.startswith("block")
                ),
            }
        out[m.group(1) if m else f.stem] = epochs
    return out


def read_dlio_output(folder: Path) -> tuple[dict[str, Any], list[Issue]]:
    """(manifest-like record, issues) of a DLIO output folder: ``dlio`` (DLIO's metrics, its
    per-rank figures, its workload) and ``params`` (the run's parameters)."""
    issues: list[Issue] = []
    summary = _load(folder / SUMMARY, issues) if (folder / SUMMARY).is_file() else None
    summary = summary if isinstance(summary, dict) else {}
    workload = _workload(folder, issues)
    metric = summary.get("metric") or {}
    reader, train, dataset = (workload.get(k) or {} for k in ("reader", "train", "dataset"))
    ranks = summary.get("num_accelerators")
    traces = sorted({int(m.group(1)) for p in folder.iterdir() if (m := _TRACE.match(p.name))})
    if isinstance(ranks, int) and len(traces) < ranks:
        missing = sorted(set(range(ranks)) - set(traces))
        issues.append(
            Issue(
                str(folder),
                "missing-log",
                f"DLIO ran {ranks} ranks but left no trace of rank(s) {missing} "
                "(DFTRACER_ENABLE=1 unset, or the run was cut short)",
                "error",
            )
        )
    dlio = {
        "folder": str(folder),
        "au_percentage": metric.get("train_au_percentage"),
        "au_mean_percentage": metric.get("train_au_mean_percentage"),
        "au_expectation": metric.get("train_au_meet_expectation"),
        "throughput_samples_per_s": metric.get("train_throughput_mean_samples_per_second"),
        "io_mb_per_s": metric.get("train_io_mean_MB_per_second"),
        "computation_time": train.get("computation_time"),
        "ranks": _rank_outputs(folder, issues),
        "workload": workload,
        "hosts": summary.get("num_hosts"),
    }
    params = {
        "framework": workload.get("framework"),
        "workload": f"dlio:{workload.get('model', 'default')}" if workload else "dlio",
        "batch_size": reader.get("batch_size"),
        "loader_workers": reader.get("read_threads"),
        "epochs": train.get("epochs") or (len(dlio["au_percentage"] or []) or None),
        "ranks": ranks if isinstance(ranks, int) else (len(traces) or None),
        "dataset_format": dataset.get("format"),
    }
    return {"dlio": dlio, "params": {k: v for k, v in params.items() if v is not None}}, issues
