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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from iosweep.trace.schema import Issue, RankInfo

SUMMARY = "summary.json"
EPOCH_STATS = "per_epoch_stats.json"
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


def _utc(stamp: Any) -> float | None:
    """Seconds since the epoch of DLIO's timestamps (``utcnow()``: ISO, UTC, no zone)."""
    try:
        return datetime.fromisoformat(str(stamp)).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _blocks(times: Any) -> dict[int, list[float]]:
    """Block number -> its steps' times (``{"block1": [...]}``), in block order."""
    if not isinstance(times, dict):
        return {}
    out = {int(b[5:]): v for b, v in times.items() if re.fullmatch(r"block\d+", b)}
    return {b: v for b, v in sorted(out.items()) if isinstance(v, list)}


def _epoch_steps(rank: int, epoch: int, rec: dict, stats: dict, samples: int | None) -> list:
    """One rank's steps of one epoch: each block laid from its start (per_epoch_stats), step k
    waiting ``load[k]`` from its t0 and computing to ``proc[k]`` (DLIO times both from the
    same t0, which the next step takes at this one's end); the epoch's own row last."""
    out: list[dict[str, Any]] = []
    load, proc = _blocks(rec.get("load")), _blocks(rec.get("proc"))
    for block, procs in proc.items():
        t = _utc((stats.get(f"block{block}") or {}).get("start"))
        loads = load.get(block) or []
        if t is None or len(loads) != len(procs):
            continue
        for ld, pr in zip(loads, procs, strict=True):
            step = {"rank": rank, "epoch": epoch, "step": len(out), "start": t + ld}
            out.append(step | {"end": t + pr, "wait_start": t, "wait_end": t + ld})
            if samples:
                out[-1]["samples"] = samples
            t += pr
    start, end = _utc(stats.get("start")), _utc(stats.get("end"))
    if out and start is not None and end is not None:
        out.append({"rank": rank, "epoch": epoch, "step": -1, "start": start, "end": end})
    return out


def dlio_steps(folder: Path, issues: list[Issue], samples: int | None) -> list[dict[str, Any]]:
    """Every rank's steps from DLIO's own per-step times (``<rank>_output.json``) on DLIO's
    clock (``per_epoch_stats.json``, written by rank 0: every rank's blocks laid from its
    starts), epochs numbered as DLIO numbers them; [] where either is missing."""
    stats = _load(folder / EPOCH_STATS, issues) if (folder / EPOCH_STATS).is_file() else None
    if not isinstance(stats, dict):
        return []
    out: list[dict[str, Any]] = []
    for f in sorted(folder.glob("*_output.json")):
        m = _RANK_OUTPUT.match(f.name)
        d = _load(f, issues) if m else None
        if not (m and isinstance(d, dict)):
            continue
        for key, rec in d.items():
            if key.isdigit() and isinstance(rec, dict) and isinstance(stats.get(key), dict):
                out += _epoch_steps(int(m.group(1)), int(key), rec, stats[key], samples)
    return out


def untraced_ranks(rec: dict[str, Any]) -> list[RankInfo]:
    """The ranks of an untraced DLIO run (:func:`read_dlio_output`'s ``ranks``): their pids
    are not known (-1)."""
    return [
        RankInfo(int(r["rank"]), -1, int(r.get("size") or -1), -1, str(r.get("host") or ""))
        for r in rec.get("ranks") or []
    ]


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
    steps = [] if traces else dlio_steps(folder, issues, reader.get("batch_size"))
    if steps:
        issues.append(
            Issue(
                str(folder),
                "no-traces",
                f"DLIO ran {ranks} ranks without DFTracer (no trace-R-of-N.pfw): its own "
                "per-step load and processing times are the run's steps; the I/O itself (files, "
                "reads, sizes) was not traced, so no I/O figure is drawn",
                "warning",
            )
        )
    elif isinstance(ranks, int) and len(traces) < ranks:
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
    said, ran = train.get("epochs"), len(metric.get("train_au_percentage") or [])
    if isinstance(said, int) and ran and said != ran:
        issues.append(
            Issue(
                str(folder / ".hydra" / "config.yaml"),
                "mismatch",
                f"the workload's config says {said} epochs, but DLIO's summary holds {ran}: the "
                "config is not the one this run used (epochs are taken from the summary)",
                "warning",
            )
        )
    per_rank = _rank_outputs(folder, issues)
    dlio = {
        "folder": str(folder),
        "au_percentage": metric.get("train_au_percentage"),
        "au_mean_percentage": metric.get("train_au_mean_percentage"),
        "au_expectation": metric.get("train_au_meet_expectation"),
        "throughput_samples_per_s": metric.get("train_throughput_mean_samples_per_second"),
        "io_mb_per_s": metric.get("train_io_mean_MB_per_second"),
        "computation_time": train.get("computation_time"),
        "ranks": per_rank,
        "workload": workload,
        "hosts": summary.get("num_hosts"),
    }
    params = {
        "framework": workload.get("framework"),
        "workload": f"dlio:{workload.get('model', 'default')}" if workload else "dlio",
        "batch_size": reader.get("batch_size"),
        "loader_workers": reader.get("read_threads"),
        "epochs": ran or train.get("epochs"),
        "ranks": ranks if isinstance(ranks, int) else (len(traces) or None),
        "dataset_format": dataset.get("format"),
    }
    rec: dict[str, Any] = {
        "dlio": dlio,
        "params": {k: v for k, v in params.items() if v is not None},
    }
    if steps:
        hosts = {
            r: (_load(folder / f"{r}_output.json", []) or {}).get("hostname") for r in per_rank
        }
        rec |= {
            # untraced: no rank left a log to look for; its pid is not known (-1)
            "tracer": "none",
            "ranks": [
                {"rank": int(r), "pid": -1, "host": str(h or ""), "size": ranks}
                for r, h in sorted(hosts.items(), key=lambda x: int(x[0]))
                if r.isdigit()
            ],
            "steps": steps,
            "start_time": min(s["start"] for s in steps if s["step"] < 0),
            "timing": {
                "source": "dlio",
                "wait": "measured",
                "method": "DLIO's own per-step times (<rank>_output.json: each step's load, the "
                "wait for its batch, and its processing from the same start), laid from each "
                "block's start in per_epoch_stats.json",
            },
        }
    return rec, issues
