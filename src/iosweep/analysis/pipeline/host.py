"""Whether the host's cores held the ranks back, and what the ranks' processes did that no
tracer saw: CPU time of each rank's process and of every process below it (loader workers),
the time the rank's main thread waited for a core, the host's CPU use, page faults and bytes
read, over each rank's training window. From the run's sampler records (the manifest's
``procs``, written by :mod:`iosweep.run.procstat`); a trace from elsewhere has none, and its
figures are "not measured", never zero.

Counters are cumulative, sampled every ``interval_s``: a window's figure is the difference of
the series interpolated at its bounds (a process's last interval before it ends is missed).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.pipeline.verdict import checkpoint_held, lever
from iosweep.units import human_bytes

HOST_BUSY_SHARE = 0.9  # of the usable cores: above it, the host had no core to spare
# of the time the job's threads were runnable, the share they waited for a core: above it,
# they were short of cores (a thread is runnable when running or waiting on a run queue)
CORE_WAIT_SHARE = 0.25
MAPPED_MIN = 1 << 20  # a data file mapped smaller than this is not a dataset's
STORAGE_MIN = 16 << 20  # bytes from storage outside the trace that make a wait storage's
UNTRACED_MIN = 4 << 20  # read-call bytes past the traced ones that say the tracer missed reads
# the cumulative series a rank's window figures are differences of
WINDOW_SERIES = (
    "rank_cpu",
    "cpu",
    "rank_runq",
    "runq",
    "host_busy",
    "majflt",
    "minflt",
    "rchar",
    "read_bytes",
)
NOT_MEASURED = (
    "not measured: the run has no record of its processes (a trace from elsewhere, or a run "
    "made before iosweep sampled them)"
)


def _deltas(series: dict[str, list], keys: tuple[str, ...], lo: float, hi: float) -> dict:
    """Each cumulative series' growth from ``lo`` to ``hi`` (interpolated at both); None for
    a series with a gap."""
    t = np.asarray(series.get("t") or [], dtype=float)
    out: dict[str, float | None] = {}
    for key in keys:
        v = series.get(key) or []
        if len(t) < 2 or len(v) != len(t) or any(x is None for x in v):
            out[key] = None
            continue
        y = np.interp([lo, hi], t, np.asarray(v, dtype=float))
        out[key] = float(y[1] - y[0])
    return out


def _windows(t: pd.DataFrame, clock_zero: float) -> dict[int, tuple[float, float]]:
    """Each rank's training window, Unix seconds: its first epoch's start to its last's end."""
    if t.empty:
        return {}
    g = t.groupby("rank")
    lo, hi = g["start"].min(), g["end"].max()
    return {
        int(r): (float(a) + clock_zero, float(b) + clock_zero)
        for r, a, b in zip(lo.index, lo, hi, strict=True)
    }


def _rank_figures(rank: int, rec: dict[str, Any], window: tuple[float, float]) -> dict[str, Any]:
    s = rec["series"]
    lo, hi = max(window[0], s["t"][0]), min(window[1], s["t"][-1])
    span = hi - lo
    d = _deltas(s, WINDOW_SERIES, lo, hi)
    usable = (rec.get("cores") or {}).get("usable")

    def per(x: float | None) -> float | None:
        return x / span if x is not None and span > 0 else None

    other = d["cpu"] - d["rank_cpu"] if d["cpu"] is not None and d["rank_cpu"] is not None else None
    runnable = d["cpu"] + d["runq"] if d["cpu"] is not None and d["runq"] is not None else None
    io = bool(rec.get("io_readable"))
    return {
        "rank": rank,
        "host": rec.get("host", ""),
        "window_s": span,
        "covered_share": span / (window[1] - window[0]) if window[1] > window[0] else None,
        "cores_usable": usable,
        "rank_cores": per(d["rank_cpu"]),
        "other_cores": per(other),
        "rank_runq_share": per(d["rank_runq"]),
        "core_wait_share": d["runq"] / runnable if runnable and d["runq"] is not None else None,
        "host_busy_cores": per(d["host_busy"]),
        "processes": int(rec.get("processes_seen") or 0),
        "majflt": d["majflt"],
        "minflt": d["minflt"],
        "rchar": d["rchar"] if io else None,
        "read_bytes": d["read_bytes"] if io else None,
        "overhead_cpu_s": rec.get("overhead_cpu_s"),
        "interval_s": rec.get("interval_s"),
    }


def host_summary(procs: dict[str, Any], clock_zero: float, t: pd.DataFrame) -> dict[str, Any]:
    """The run's host figures over its ranks' training windows (:class:`summary.Host`)."""
    recs = {int(r): v for r, v in (procs or {}).items() if isinstance(v, dict)}
    errors = {r: v["error"] for r, v in recs.items() if v.get("error")}
    good = {r: v for r, v in recs.items() if not v.get("error") and v.get("series", {}).get("t")}
    windows = _windows(t, clock_zero)
    ranks = [_rank_figures(r, good[r], windows[r]) for r in sorted(good) if r in windows]
    ranks = [f for f in ranks if f["window_s"] > 0]
    if not ranks and not recs:
        return {"available": False, "reason": NOT_MEASURED}
    if not ranks:
        why = "; ".join(f"rank {r}: {e}" for r, e in sorted(errors.items()))
        reason = "no rank's processes were sampled during its training steps"
        return {"available": False, "reason": reason + (f" ({why})" if why else "")}
    nodes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in ranks:
        nodes[f["host"]].append(f)
    per_node = []
    for host, fs in sorted(nodes.items()):
        cores = min((f["cores_usable"] for f in fs if f["cores_usable"]), default=None)
        node_busy = _mean([f["host_busy_cores"] for f in fs])
        used = sum((f["rank_cores"] or 0) + (f["other_cores"] or 0) for f in fs)
        per_node.append(
            {
                "host": host,
                "ranks": len(fs),
                "cores_usable": cores,
                # a share, at most all of the usable cores: the host's busy CPU time and the
                # wall clock are read a moment apart (100.1% of 2 cores was the sampling's)
                "busy_share": min(node_busy / cores, 1.0)
                if node_busy is not None and cores
                else None,
                "job_cores": used,
            }
        )
    busy = [float(n["busy_share"]) for n in per_node if n["busy_share"] is not None]
    mapped: dict[str, int] = {}
    for rec in good.values():
        for path, size in (rec.get("mapped_files") or {}).items():
            if size >= MAPPED_MIN:
                mapped[path] = max(mapped.get(path, 0), int(size))
    return {
        "available": True,
        "reason": "",
        "missing_ranks": sorted(set(recs) - {f["rank"] for f in ranks}),
        "errors": {str(r): e for r, e in sorted(errors.items())},
        "ranks": ranks,
        "nodes": per_node,
        "busy_share": max(busy) if busy else None,
        "rank_cores": _mean([f["rank_cores"] for f in ranks]),
        "other_cores": _mean([f["other_cores"] for f in ranks]),
        "rank_runq_share": _mean([f["rank_runq_share"] for f in ranks]),
        "core_wait_share": _mean([f["core_wait_share"] for f in ranks]),
        "majflt": _sum([f["majflt"] for f in ranks]),
        "rchar": _sum([f["rchar"] for f in ranks]),
        "read_bytes": _sum([f["read_bytes"] for f in ranks]),
        "overhead_cpu_s": _sum([f["overhead_cpu_s"] for f in ranks]),
        "mapped_files": dict(sorted(mapped.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def _mean(xs: list[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return float(np.mean(v)) if v else None


def _sum(xs: list[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return float(sum(v)) if v else None


def busiest_node(host: dict[str, Any]) -> dict[str, Any]:
    """The node whose usable cores were the busiest (the run's ``busy_share`` is its); an
    empty mapping where the host was not measured."""
    return max(host.get("nodes") or [{}], key=lambda n: n.get("busy_share") or 0)


# the share of a busy host's cores used outside the job at and above which other work, not
# the job (unless its own processes outnumber the cores), leaves its threads waiting for one
OUTSIDE_SHARE = 0.5


def host_bound(v: dict[str, Any], host: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    """Where the host had no core to spare during training and the job's threads waited for
    one: a verdict of preprocessing, of each epoch's start, of the loop or of time nothing
    else explains becomes host-CPU-bound (more loader workers cannot help; the loop is not
    slow by itself, it waits for a core; a verdict of waiting keeps its words); a
    compute-bound run stays so (its data keep up) and says its compute is slowed by sharing
    cores. Storage and start-up verdicts stand (their cause is elsewhere)."""
    kinds = (
        "compute-bound",
        "input-bound-preprocessing",
        "input-bound-phase-start",
        "loop-bound",
        "unexplained",
    )
    if v["kind"] not in kinds or not host.get("available") or checkpoint_held(v):
        return v  # (a loop held back by its checkpoints: measured, whatever the cores)
    busy, short = host.get("busy_share"), host.get("core_wait_share")
    if busy is None or busy < HOST_BUSY_SHARE or short is None or short < CORE_WAIT_SHARE:
        return v
    node = busiest_node(host)
    cores = node["cores_usable"]
    w = ctx.get("loader_workers")
    rank_c, other_c, runq = host["rank_cores"], host["other_cores"], host["rank_runq_share"]
    figures = (
        f"the host's {cores:g} usable cores were {busy:.0%} busy during training, "
        f"{node['ranks']} rank(s) on it using {node['job_cores']:.2f} cores "
        f"({_cores(rank_c)} a rank in its own process, {_cores(other_c)} a rank in loader "
        f"workers and other processes below it); their threads waited for a core "
        f"{_share(short)} of the time they could run (a rank's main thread {_share(runq)} of "
        "the time)"
    )
    levers = [
        lever(f"fewer processes per core: {node['ranks']} rank(s) share {cores:g} cores")
        if w == 0  # no loader workers to have fewer of
        else lever(
            f"fewer processes per core: {node['ranks']} rank(s)"
            + (
                f" x (1 + {w} loader workers)"
                if isinstance(w, int)
                else " and their loader workers"
            )
            + f" share {cores:g} cores; loader workers beyond the cores the ranks leave free only "
            "add waiting",
            "loader_workers",
            "fewer",
        ),
        lever("more cores per rank: fewer ranks per node, or a node with more cores"),
        lever(
            "cheaper preprocessing: samples stored pre-decoded or pre-resized, or decoded on the "
            "accelerator (e.g. DALI)"
        ),
    ]
    # cores the job did not use though the host was busy: other work held them
    outside = max(busy * (cores or 0) - (node.get("job_cores") or 0.0), 0.0)
    crowded = bool(cores) and outside >= OUTSIDE_SHARE * cores
    # the job's own processes past the cores (ranks and their loader workers): its own lever
    # comes first, whatever else ran beside it
    own_past = node["ranks"] * (1 + (w if isinstance(w, int) else 0)) > (cores or 0)
    if crowded:
        figures += f"; {outside:.2f} of its cores went to processes outside the job"
        levers.insert(
            1 if own_past else 0,
            lever(
                "a host to itself: other work took most of its cores (stop it, or ask the "
                "scheduler for whole nodes: SLURM --exclusive)"
            ),
        )
    numbers = v["numbers"] | {
        "host_busy_share": busy,
        "host_cores_usable": float(cores or 0),
        "rank_runq_share": runq,
        "core_wait_share": short,
    }
    if v["kind"] == "compute-bound":
        text = v["text"] + f"; but {figures}: the compute itself is slowed by sharing cores"
        return v | {"text": text, "levers": levers[:2], "numbers": numbers}
    want = (
        "the host's other work leaves the job too little CPU"
        if crowded and not own_past
        else "the ranks and their workers want more CPU than the host gives"
    )
    text = v["text"].split(";")[0].split(", but")[0] + f"; {figures}: {want}"
    trace_kind = v.get("trace_kind") or v["kind"]
    # the title answers the user's question first: a job whose loop waits for its data says
    # so; the host's cores are the cause, and shape the levers
    waits = trace_kind in ("input-bound-preprocessing", "input-bound-phase-start")
    if trace_kind == "input-bound-preprocessing" and w == 0:
        levers.insert(
            0,
            lever(
                "loader workers (DataLoader num_workers > 0, tf.data num_parallel_calls) so "
                "batches are prepared while the step computes; on a host with no core to spare "
                "the gain is what a sweep of loader_workers measures",
                "loader_workers",
                "more",
            ),
        )
    return v | {
        "trace_kind": trace_kind,
        "kind": "host-cpu-bound",
        "title": f"{v['title']}, on a host with no core to spare"
        if waits
        else "Held back by the host's CPU",
        "text": text,
        "levers": levers,
        "numbers": numbers,
    }


def _cores(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f} cores"


def _share(x: float | None) -> str:
    return "?" if x is None else f"{x:.0%}"


def blind_reads(host: dict[str, Any], traced: int, data_opens: int | None = None) -> str:
    """How the ranks' processes read data the trace does not hold ('' when nothing says so):
    files memory-mapped, or read calls (the kernel's count) well past the traced bytes while
    the ranks opened dataset files (``data_opens``, in the epochs): the kernel's count of read
    calls also counts sockets and pipes (the collectives, the launcher), so without a dataset
    file open in training it says nothing of the dataset (MNIST, read whole before training:
    0.3-3.1 MB a rank of collectives was taken for missed reads)."""
    if not host.get("available"):
        return ""
    mapped = host.get("mapped_files") or {}
    if mapped:
        path = next(iter(mapped))
        more = f" and {len(mapped) - 1} more" if len(mapped) > 1 else ""
        return (
            f"memory-mapped ({path}{more}, {human_bytes(sum(mapped.values()))} on disk): a read by "
            "page fault calls no read function (np.load(mmap_mode=...), Arrow / Hugging Face "
            "datasets, LMDB)"
        )
    rchar = host.get("rchar")
    if not data_opens:
        return ""
    if rchar is not None and rchar - traced >= UNTRACED_MIN and traced < 0.5 * rchar:
        return (
            f"read through calls the tracer does not intercept ({human_bytes(rchar)} through read "
            f"calls by the kernel's count, /proc/PID/io, against {human_bytes(traced)} traced): "
            "numpy's np.load and other C stdio reads through a duplicated descriptor under "
            "DFTracer, or a library with its own I/O path"
        )
    return ""


def blind_storage(
    v: dict[str, Any], host: dict[str, Any], traced: int, data_opens: int | None = None
) -> dict[str, Any]:
    """A wait called preprocessing because no traced read was in flight is storage's where the
    data were read outside the trace and much of them came from storage in training."""
    how = blind_reads(host, traced, data_opens)
    outside = host.get("read_bytes") if host.get("available") else None
    if v["kind"] != "input-bound-preprocessing" or not how or outside is None:
        return v
    if outside < STORAGE_MIN or outside < 2 * traced:
        return v
    majflt = host.get("majflt")
    faults = f", {majflt:,.0f} major page faults" if majflt is not None else ""
    text = v["text"].split(";")[0] + (
        f"; the data were {how}, so the trace cannot place their reads in the wait: the ranks' "
        f"processes read {human_bytes(outside)} from storage during training{faults} (the "
        "kernel's counts): the wait is storage's, not preprocessing's"
    )
    levers = [
        lever(
            "stage the data to node-local storage or memory (sweep.staging: node-local)",
            "staging",
            "on",
        ),
        lever(
            "read in larger, sequential pieces (whole samples or shards; madvise(MADV_SEQUENTIAL) "
            "or a read call instead of page faults on a memory map)"
        ),
        lever("more loader workers, to keep more reads in flight", "loader_workers", "more"),
    ]
    numbers = v["numbers"] | {"storage_bytes_outside_trace": float(outside)}
    return v | {
        "trace_kind": v["kind"],
        "kind": "input-bound-storage",
        "title": "Input-bound by storage",
        "text": text,
        "levers": levers,
        "numbers": numbers,
    }
