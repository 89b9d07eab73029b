"""Is training waiting for its data, how much, and why: the input-pipeline analysis.

From the manifest's steps, per rank and epoch: the compute (the steps' own time), the data
wait (the time the rank waited for each batch: timed by the training script where it did,
else the gap since the previous step; the first step's wait and the first step itself,
which hold start-up and warm-up, are reported apart), samples/s, and the accelerator
utilisation ``AU = compute / epoch time`` with the first step excluded, in the manner of
MLPerf Storage (this is not an MLPerf Storage submission).

Then what the wait is made of, from the rank's whole process tree (the rank, its forked
loader workers, its threads): the time during the wait when at least one storage read was
in flight (the union of the read intervals), metadata calls (opens, stats, seeks, closes:
their intervals from DFTracer's events, or Darshan's per-file metadata time of the files
opened in the epoch, which cannot be placed in time), and the rest: decoding, augmentation,
collation, host-to-device copies. ``no_read_share`` is the share of the wait with no read in
flight at all: the signature of a loader that is CPU-bound.

The run's verdict, from these totals, is :mod:`.verdict`'s.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis import intervals
from iosweep.analysis.data import READ, RunData, category_matches
from iosweep.analysis.patterns.metadata import KINDS
from iosweep.analysis.pipeline import account, unoverlapped
from iosweep.analysis.pipeline.dlio import dlio_beside
from iosweep.analysis.pipeline.epochs import steps_frame
from iosweep.analysis.pipeline.host import blind_storage, host_bound, host_summary
from iosweep.analysis.pipeline.rates import rate_model
from iosweep.analysis.pipeline.verdict import estimated, untraced, verdict
from iosweep.analysis.sections import PartIn, PartOut, PartsIn, Section, register
from iosweep.analysis.settings import AnalysisSettings

AU_LABEL = "MLPerf-Storage-style AU (compute / epoch time, first step excluded; not a submission)"

COLUMNS = [
    "rank",
    "epoch",
    "start",
    "end",
    "epoch_time",
    "steps",
    "samples",
    "first_wait",
    "first_step",
    "steady",
    "compute",
    "checkpoint",
    "wait",
    "tail",
    "au",
    "samples_per_s",
    "read_in_wait",
    "own_read_in_wait",
    "meta_in_wait",
    "meta_time",
    "other_in_wait",
    "no_read_share",
    "reads",
    "bytes_read",
    "read_time",
    "data_files_opened",
]

_META_NAMES = re.compile(
    "|".join(rx.pattern for rx in KINDS.values()) + r"|^f?close$|^opendir$|^readdir|^getdents"
)


@dataclass
class RankEpoch:
    """One rank's steps in one epoch, with its wait windows (steps >= 1)."""

    rank: int
    epoch: int
    start: float
    end: float
    steps: pd.DataFrame  # sorted by step
    wait_lo: np.ndarray  # the waits of steps >= 1
    wait_hi: np.ndarray


def rank_epochs(rd: RunData) -> list[RankEpoch]:
    st = steps_frame(rd)
    out = []
    for (a, e), g in st.groupby(["actor", "epoch"], sort=True):
        steps = g[g["step"] >= 0].sort_values("step")
        if steps.empty:
            continue
        whole = g[g["step"] < 0]
        start = float(whole["start"].min()) if len(whole) else float(steps["start"].min())
        end = float(whole["end"].max()) if len(whole) else float(steps["end"].max())
        s, en = steps["start"].to_numpy(np.float64), steps["end"].to_numpy(np.float64)
        timed = steps["wait_start"].notna().to_numpy() & steps["wait_end"].notna().to_numpy()
        prev_end = np.concatenate([[start], en[:-1]])
        wlo = np.where(timed, steps["wait_start"].to_numpy(np.float64), prev_end)
        whi = np.where(timed, steps["wait_end"].to_numpy(np.float64), s)
        steps = steps.assign(wait_lo=wlo, wait_hi=np.maximum(whi, wlo))
        out.append(RankEpoch(int(a), int(e), start, end, steps, wlo[1:], np.maximum(whi, wlo)[1:]))
    return out


def _merged(group: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> dict[int, tuple]:
    """Per group: its intervals merged (sorted, disjoint)."""
    g, mlo, mhi = intervals.merge(group.astype(np.int64), lo, hi)
    bounds = np.flatnonzero(np.diff(g)) + 1 if len(g) else np.empty(0, int)
    out = {}
    for s, e in zip(np.r_[0, bounds], np.r_[bounds, len(g)], strict=True):
        if e > s:
            out[int(g[s])] = (mlo[s:e], mhi[s:e])
    return out


def _read_spans(rd: RunData) -> dict[int, tuple]:
    ops = rd.ops
    o = rd.actor_time_order()  # already by (rank, time): the merge need not sort
    o = o[ops.op[o] == READ]
    return _merged(ops.actor[o], ops.start[o], ops.end[o])


def _own_read_spans(rd: RunData) -> dict[int, tuple]:
    """Per rank: its reads made by the training loop's own process (none in its loader
    workers): where these fill the wait, the reads are synchronous in the loop."""
    ops = rd.ops
    if ops.pid is None:
        return {}
    loop = np.full(int(ops.actor.max(initial=-1)) + 2, -2, np.int64)
    for rank, (pid, _) in account.loop_threads(rd).items():
        if 0 <= rank < len(loop) - 1:
            loop[rank] = pid
    o = rd.actor_time_order()
    o = o[(ops.op[o] == READ) & (ops.actor[o] >= 0)]
    o = o[ops.pid[o] == loop[ops.actor[o]]]
    return _merged(ops.actor[o], ops.start[o], ops.end[o])


def _file_calls(ev: pd.DataFrame, names: str, search: bool = False) -> np.ndarray:
    """Which traced events are POSIX or STDIO calls named by ``names``, in a rank's
    processes. Decided per distinct category and name, then per row by code: millions of
    events."""
    m = category_matches(ev["cat"], "^(POSIX|STDIO)$")
    m &= category_matches(ev["name"], names, search=search)
    return m & (ev["actor"].to_numpy() >= 0)


def _meta_spans(rd: RunData) -> dict[int, tuple]:
    """Per rank: the union of its metadata calls traced as events (DFTracer), if any."""
    ev = rd.app_events
    if ev.empty:
        return {}
    e = ev[_file_calls(ev, _META_NAMES.pattern, search=True)]
    if e.empty:
        return {}
    return _merged(
        e["actor"].to_numpy(), e["start"].to_numpy(np.float64), e["end"].to_numpy(np.float64)
    )


def _measure(spans: tuple | None, lo: np.ndarray, hi: np.ndarray) -> float:
    """Length of the (disjoint, sorted) ``spans`` inside the windows [lo, hi)."""
    if spans is None or not len(lo):
        return 0.0
    return float(intervals.measure_in(spans[0], spans[1], lo, hi).sum())


def _union(a: tuple | None, b: tuple | None) -> tuple | None:
    if a is None or b is None:
        return a if b is None else b
    g = np.zeros(len(a[0]) + len(b[0]), np.int64)
    _, lo, hi = intervals.merge(g, np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return lo, hi


def _data_opens(rd: RunData) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Per rank: the times its processes opened a dataset file (traced opens), and each
    file's first open (counter records): where a rank opened no dataset file in an epoch,
    read-call bytes the kernel counted then were not the dataset's (sockets, pipes)."""
    if "dataset" not in rd.class_names:
        return {}, {}
    data = rd.class_names.index("dataset")
    out: list[dict[int, np.ndarray]] = [{}, {}]

    def is_data(f: np.ndarray) -> np.ndarray:
        # (a path code outside the run's paths, or none: not a dataset file)
        known = (f >= 0) & (f < len(rd.file_class))
        return known & (rd.file_class[np.where(known, f, 0)] == data) if known.any() else known

    ev = rd.app_events
    if not ev.empty:
        m = _file_calls(ev, KINDS["opens"].pattern) & is_data(ev["file"].to_numpy())
        for a, g in ev[m].groupby("actor"):
            out[0][int(a)] = np.sort(g["start"].to_numpy(np.float64))
    c = rd.counters
    if not c.empty and "open_start" in c:
        f = c["file"].to_numpy()
        m = is_data(f) & (c["actor"].to_numpy() >= 0)
        for a, g in c[m].groupby("actor"):
            out[1][int(a)] = np.sort(g["open_start"].dropna().to_numpy(np.float64))
    return out[0], out[1]


def _opened_in(times: np.ndarray | None, lo: float, hi: float) -> int:
    if times is None:
        return 0
    return int(np.searchsorted(times, hi, "right") - np.searchsorted(times, lo, "left"))


def _counter_meta(rd: RunData, re_: RankEpoch) -> float:
    """Darshan's metadata time of the files the rank's processes opened in the epoch."""
    c = rd.counters
    if c.empty:
        return 0.0
    m = (c["actor"] == re_.rank) & (c["open_start"] >= re_.start) & (c["open_start"] <= re_.end)
    return float(c.loc[m, "meta_time"].sum())


def _reads_per_rank_epoch(
    rd: RunData, op_epoch: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Reads, bytes read and seconds inside reads (all the rank's processes added up) per
    (rank, epoch), indexed rank * n + epoch + 1; and n."""
    ops = rd.ops
    m = (ops.op == READ) & (ops.actor >= 0)
    # one slot per epoch the steps know (an epoch may hold no operation at all), plus -1
    n = int(max(op_epoch.max(initial=-1), rd.steps["epoch"].max() if len(rd.steps) else -1)) + 2
    key = ops.actor[m].astype(np.int64) * n + op_epoch[m] + 1
    busy = np.bincount(key, weights=(ops.end - ops.start)[m])
    return np.bincount(key), np.bincount(key, weights=ops.length[m]), busy, n


def rank_epoch_table(rd: RunData, op_epoch: np.ndarray) -> pd.DataFrame:
    """One row per (rank, epoch): the columns of :data:`COLUMNS`."""
    reads = _read_spans(rd)
    own = _own_read_spans(rd)
    metas = _meta_spans(rd)
    traced_opens, first_opens = _data_opens(rd)
    batch = rd.meta.params.get("batch_size")
    counts, volume, busy, n_ep = _reads_per_rank_epoch(rd, op_epoch)
    saves = account.checkpoint_spans(rd)
    rows = []
    for re_ in rank_epochs(rd):
        st = re_.steps
        comp = (st["end"] - st["start"]).to_numpy(np.float64)
        # a synchronous checkpoint inside a step is not its compute (the accelerator idles)
        lo, hi = saves.get(re_.rank, (np.empty(0), np.empty(0)))
        ckpt = intervals.measure_in(
            lo, hi, st["start"].to_numpy(np.float64), st["end"].to_numpy(np.float64)
        )
        comp = comp - ckpt
        wait = (st["wait_hi"] - st["wait_lo"]).to_numpy(np.float64)
        samples = (
            float(st["samples"].sum())
            if st["samples"].notna().all()
            else (len(st) * float(batch) if isinstance(batch, int | float) else np.nan)
        )
        end0 = float(st["end"].iloc[0])
        rest = re_.end - end0
        read_w = _measure(reads.get(re_.rank), re_.wait_lo, re_.wait_hi)
        both = _measure(_union(reads.get(re_.rank), metas.get(re_.rank)), re_.wait_lo, re_.wait_hi)
        waited = float(wait[1:].sum())
        meta_events = both - read_w
        meta_ctr = 0.0 if re_.rank in metas else _counter_meta(rd, re_)
        meta = meta_events if re_.rank in metas else min(meta_ctr, max(waited - read_w, 0.0))
        k = re_.rank * n_ep + re_.epoch + 1
        rows.append(
            {
                "rank": re_.rank,
                "epoch": re_.epoch,
                "start": re_.start,
                "end": re_.end,
                "epoch_time": re_.end - re_.start,
                "steps": len(st),
                "samples": samples,
                "first_wait": float(wait[0]),
                "first_step": float(comp[0]),
                # AU's denominator: from the first step's end (its wait, its step and what came
                # before the first batch was asked for, an iterator's build, left out)
                "steady": max(rest, 0.0),
                "compute": float(comp[1:].sum()),
                "checkpoint": float(ckpt[1:].sum()),
                "wait": waited,
                "tail": max(re_.end - float(st["end"].iloc[-1]), 0.0),
                "au": float(comp[1:].sum()) / rest if len(st) > 1 and rest > 0 else np.nan,
                "samples_per_s": samples / (re_.end - re_.start) if re_.end > re_.start else np.nan,
                "read_in_wait": read_w,
                "own_read_in_wait": _measure(own.get(re_.rank), re_.wait_lo, re_.wait_hi),
                "meta_in_wait": meta,
                "meta_time": meta_events if re_.rank in metas else meta_ctr,
                "other_in_wait": max(waited - read_w - meta, 0.0),
                "no_read_share": (waited - read_w) / waited if waited > 0 else np.nan,
                "reads": int(counts[k]) if k < len(counts) else 0,
                "bytes_read": int(volume[k]) if k < len(volume) else 0,
                "read_time": float(busy[k]) if k < len(busy) else 0.0,
                "data_files_opened": _opened_in(traced_opens.get(re_.rank), re_.start, re_.end)
                + _opened_in(first_opens.get(re_.rank), re_.start, re_.end),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


# --- the run: totals over ranks and epochs, and the verdict ---------------------------------


def _epochs(t: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for e, g in t.groupby("epoch", sort=True):
        span = float(g["end"].max() - g["start"].min())
        out.append(
            {
                "epoch": int(e),
                "epoch_time": span,
                "compute_mean": float(g["compute"].mean()),
                "wait_mean": float(g["wait"].mean()),
                "wait_max": float(g["wait"].max()),
                "first_wait_max": float(g["first_wait"].max()),
                "first_step_max": float(g["first_step"].max()),
                "au_mean": _nan_none(g["au"].mean()),
                "au_min": _nan_none(g["au"].min()),
                "samples": _nan_none(g["samples"].sum(min_count=1)),
                "samples_per_s": _nan_none(
                    g["samples"].sum(min_count=1) / span if span > 0 else np.nan
                ),
                "bytes_read": int(g["bytes_read"].sum()),
            }
        )
    return out


def _share(part: float, whole: float) -> float | None:
    return float(part) / whole if whole > 0 else None


def _nan_none(v: Any) -> float | None:
    v = float(v)
    return None if not np.isfinite(v) else v


def totals(t: pd.DataFrame, run_start: float, run_end: float) -> dict[str, Any]:
    """The run's figures over every rank and epoch."""
    waited = float(t["wait"].sum())
    span = t.groupby("epoch").apply(
        lambda g: g["end"].max() - g["start"].min(), include_groups=False
    )
    training = float(span.sum())
    samples = t["samples"].sum(min_count=1)
    steady = (
        t["steady"] if "steady" in t else t["epoch_time"] - t["first_wait"] - t["first_step"]
    )  # AU's denominator
    excl = steady.sum()
    per_rank = steady.groupby(t["rank"]).sum().mean()
    wait_per_rank = float(t.groupby("rank")["wait"].sum().mean())
    # the samples of the steps after each epoch's first (batches alike within an epoch)
    steady_samples = (
        (t["samples"] * (t["steps"] - 1) / t["steps"].clip(lower=1))
        .groupby(t["rank"])
        .sum(min_count=1)
        .mean()
    )
    return {
        "ranks": int(t["rank"].nunique()),
        "epochs": int(t["epoch"].nunique()),
        "au": _nan_none(t["compute"].sum() / excl) if excl > 0 else None,
        "compute_per_rank": float(t.groupby("rank")["compute"].sum().mean()),
        "compute_share": _share(
            (t["compute"] + t["first_step"]).sum(), float(t["epoch_time"].sum())
        ),  # every step's compute over the epoch time, the first (warm-up) included
        "read_time_per_rank": float(t.groupby("rank")["read_time"].sum().mean()),
        "wait_per_rank": wait_per_rank,
        "epoch_time_per_rank": float(t.groupby("rank")["epoch_time"].sum().mean()),
        # the time a rank does not compute, first step left out (AU's denominator less compute)
        "idle_per_rank": max(float((steady - t["compute"]).groupby(t["rank"]).sum().mean()), 0.0),
        # of which in synchronous checkpoints inside the steps (first steps left out)
        "checkpoint_per_rank": float(t.groupby("rank")["checkpoint"].sum().mean())
        if "checkpoint" in t
        else None,
        "steady_time_per_rank": max(float(per_rank), 0.0),
        "steady_steps_per_rank": float(
            (t["steps"] - 1).clip(lower=0).groupby(t["rank"]).sum().mean()
        ),
        "steady_samples_per_rank": _nan_none(steady_samples),
        "wait_share": _share(wait_per_rank, float(per_rank)),
        "first_wait_max": float(t["first_wait"].max()),
        "first_step_max": float(t["first_step"].max()),
        "samples": _nan_none(samples),
        "samples_per_s": _nan_none(samples / training) if training > 0 else None,
        "startup": max(float(t["start"].min()) - run_start, 0.0),
        "training_time": training,
        "run_time": max(run_end - run_start, 0.0),
        "read_in_wait_share": _share(t["read_in_wait"].sum(), waited),
        # of the reads' time in the wait: made by the loop's own process (synchronous reads)
        "own_read_in_wait_share": _share(t["own_read_in_wait"].sum(), t["read_in_wait"].sum())
        if "own_read_in_wait" in t
        else None,
        "meta_in_wait_share": _share(t["meta_in_wait"].sum(), waited),
        "other_in_wait_share": _share(t["other_in_wait"].sum(), waited),
        "no_read_share": _share((t["wait"] - t["read_in_wait"]).sum(), waited),
        "bytes_read_in_epochs": int(t["bytes_read"].sum()),
        # dataset files opened in the epochs (traced opens, counters' first opens); None:
        # an older table
        "data_opens_in_epochs": int(t["data_files_opened"].sum())
        if "data_files_opened" in t
        else None,
        "read_bandwidth_per_rank": _nan_none(t["bytes_read"].sum() / t["epoch_time"].sum())
        if t["epoch_time"].sum() > 0
        else None,
    }


def timing_of(rd: RunData) -> dict[str, Any]:
    """How the run's steps were timed, from its manifest, or the annotations they came from
    (:mod:`.phases`): :class:`summary.Timing`'s fields."""
    t = rd.timing or (rd.meta.manifest or {}).get("timing") or {}
    if not isinstance(t, dict):
        return {}
    other = [
        f"{o.get('kind')} at {o.get('site')} ({o.get('batches')} batches)"
        for o in t.get("other_loops") or []
        if isinstance(o, dict)
    ]
    return {
        "source": t.get("source")
        if t.get("source") in ("script", "hooks", "events", "none")
        else "",
        "wait": t.get("wait") if t.get("wait") in ("measured", "estimated") else "",
        "method": str(t.get("method") or ""),
        "loop": str(t.get("loop") or ""),
        "training_thread": str(t.get("training_thread") or ""),
        "overhead_s": t.get("overhead_s"),
        "batches": t.get("batches_timed"),
        "other_loops": other,
        "problems": [str(p) for p in t.get("problems") or []],
    }


# What a job without step records can do to get a verdict (README: "Your own training job").
NO_STEPS_HINT = (
    "to get one, iterate a PyTorch DataLoader, a tf.data dataset or Keras fit in the training "
    "loop (iosweep's hooks time those), run the job through iosweep (a `workloads:` entry), "
    "or annotate compute and data loading in a DFTracer trace"
)
# The same for a trace iosweep did not run: the two lines DFTracer's documentation teaches.
ANNOTATE_HINT = (
    "to get a verdict, annotate the training loop for DFTracer, as its documentation shows: "
    '`for batch in dft_fn("IO").iter(loader):` around the loop and `@dft_fn("computation").log` '
    "on the model's forward (`from dftracer.python import dft_fn`); or run the job through "
    "iosweep (a `workloads:` entry), which times it without any change"
)


def _no_steps_reason(rd: RunData) -> str:
    why = str(((rd.meta.manifest or {}).get("timing") or {}).get("why_none") or "")
    if why:
        return f"{why}; so only the I/O is analysed, not whether training waited for it ({NO_STEPS_HINT})"
    dftracer = "dftracer" in {p.tracer for p in rd.meta.processes}
    if rd.meta.params.get("framework"):
        return (
            "no step timestamps: the run has no manifest with steps (logs from elsewhere), so "
            "only the I/O is analysed, not whether training waited for it"
            + (f"; {ANNOTATE_HINT}" if dftracer else "")
        )
    return (
        "the logs record no compute phases (an application's logs from elsewhere), so "
        "only the I/O is analysed, not whether the computation waited for it"
        + (f"; {ANNOTATE_HINT}" if dftracer else "")
    )


@dataclass
class PipelineFacts:
    """What the pipeline's summary needs of a run besides its (rank, epoch) rows."""

    timing: dict[str, Any]  # timing_of
    has_steps: bool  # training steps recorded (step >= 0)
    timed: bool  # the waits timed by the script (not gaps between steps)
    run_start: float
    run_end: float
    io_span: tuple[float, float] | None  # the first operation's start, the last one's end
    no_steps_reason: str
    procs: dict[str, Any] = field(default_factory=dict)  # the manifest's sampler records
    clock_zero: float = 0.0
    untraced: bool = False  # no tracer watched the run (tracer none): its I/O is unknown


def pipeline_facts(rd: RunData) -> PipelineFacts:
    has_steps = not rd.steps.empty and bool((rd.steps["step"] >= 0).any())
    ops = rd.ops
    return PipelineFacts(
        timing_of(rd),
        has_steps,
        has_steps and bool(steps_frame(rd)["wait_start"].notna().any()),
        rd.run_start,
        rd.run_end,
        (float(np.min(ops.start)), float(np.max(ops.end))) if len(ops) else None,
        "" if has_steps else _no_steps_reason(rd),
        (rd.meta.manifest or {}).get("procs") or {},
        rd.meta.clock_zero,
        rd.meta.tracer == "none" and not len(ops),
    )


def pipeline_context(
    params: dict[str, Any], file_size_median: float | None, sizes: dict[str, Any]
) -> dict[str, Any]:
    """What the verdict's levers depend on: loader workers, staging, the data's sizes (the
    dataset's median file size, and the sizes' summary)."""
    read = (sizes["by_class"].get("dataset") or {}).get("read") or {}
    return {
        "loader_workers": params.get("loader_workers"),
        "staging": params.get("staging"),
        "file_size_median": file_size_median,
        "read_size_median": read.get("median"),
    }


# the totals an untraced run cannot know: what was read, and what reads did in the wait
UNTRACED_UNKNOWN = (
    "read_in_wait_share",
    "own_read_in_wait_share",
    "meta_in_wait_share",
    "other_in_wait_share",
    "no_read_share",
    "bytes_read_in_epochs",
    "data_opens_in_epochs",
    "read_bandwidth_per_rank",
)


def pipeline_summary(
    t: pd.DataFrame,
    facts: PipelineFacts,
    context: dict[str, Any],
    s: AnalysisSettings,
    account_rows: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """The pipeline's summary from the (rank, epoch) rows of every rank (:data:`COLUMNS`)
    and their time account (:data:`account.COLUMNS`)."""
    if not facts.has_steps:
        return {"available": False, "reason": facts.no_steps_reason, "timing": facts.timing}
    tot = totals(t, facts.run_start, facts.run_end)
    if facts.untraced:  # what the reads did in the wait is not known, not zero
        tot |= dict.fromkeys(UNTRACED_UNKNOWN)
    acc = account.summary(
        account_rows if account_rows is not None else pd.DataFrame(columns=account.COLUMNS)
    )
    context = {**context, "account": acc}
    timing = facts.timing
    source = (
        "estimated" if timing.get("wait") == "estimated" else "timed" if facts.timed else "gaps"
    )
    v = verdict(tot, context, s, wait_is_lower_bound=source == "estimated")
    host = host_summary(facts.procs, facts.clock_zero, t)
    # storage read outside the trace first: a wait it explains is not the host CPU's
    blind = blind_storage(v, host, tot["bytes_read_in_epochs"] or 0, tot["data_opens_in_epochs"])
    v = host_bound(blind, host, context)
    if facts.untraced:
        v = untraced(v, host)
    if source == "estimated":
        v = estimated(v, timing["method"])
    return {
        "available": True,
        "reason": "",
        "au_label": AU_LABEL,
        "wait_source": source,
        "timing": timing,
        "totals": tot,
        "account": acc,
        "epochs": _epochs(t),
        "verdict": v,
        "coverage": _coverage(facts.io_span, t),
        "host": host,
        "rates": rate_model(tot, host, context.get("loader_workers"), s),
    }


def _coverage(io_span: tuple[float, float] | None, t: pd.DataFrame) -> str:
    """A warning when the step log does not fall within the traced time span."""
    if io_span is None:
        return ""
    lo, hi = io_span
    s_lo, s_hi = float(t["start"].min()), float(t["end"].max())
    slack = 0.1 * max(hi - lo, 1.0) + 5.0
    if s_hi < lo - slack or s_lo > hi + slack:
        return (
            f"the step log ({s_lo:.1f}-{s_hi:.1f} s) lies outside the traced I/O ({lo:.1f}-{hi:.1f} s): "
            "another run's manifest, or clocks that disagree; the wait analysis may be wrong"
        )
    return ""


ROWS, FACTS = "pipeline.parquet", "pipeline.json"  # a part's (rank, epoch) rows, its facts
ACCOUNT = "account.parquet"  # a part's time account rows (account.COLUMNS)


def _of_part(part: PartIn, out: PartOut) -> None:
    out.put(ROWS, rank_epoch_table(part.rd, part.op_epoch))
    out.put(ACCOUNT, account.account_rows(part.rd, rank_epochs(part.rd)))
    out.put_json(FACTS, asdict(pipeline_facts(part.rd)))
    unoverlapped.put_part(part, out)


def _run_facts(parts: PartsIn) -> PipelineFacts:
    """The run's facts from its parts' (the timing and the reason come from the run's
    manifest and meta: the first part's)."""
    pf = [
        PipelineFacts(**{**v, "io_span": v["io_span"] and tuple(v["io_span"])})
        for v in parts.values(FACTS)
    ]
    spans = [f.io_span for f in pf if f.io_span is not None]
    return replace(
        pf[0],
        has_steps=any(f.has_steps for f in pf),
        timed=any(f.timed for f in pf),
        run_start=parts.start,
        run_end=parts.end,
        io_span=(min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None,
    )


def _of_run(parts: PartsIn) -> dict[str, Any]:
    """The summary, with DFAnalyzer's figures and DLIO's own AU beside it; the tables
    ``pipeline`` and ``unoverlapped``."""
    rows = parts.frames(ROWS)
    t = pd.concat([r for r in rows if len(r)] or rows[:1], ignore_index=True)
    t = t.sort_values(["rank", "epoch"], ignore_index=True)
    files = parts.tables.files
    dataset = files.loc[files["class"] == "dataset", "size"]
    median = float(np.median(dataset)) if len(dataset) else None
    context = pipeline_context(parts.meta.params, median, parts.made["sizes"])
    frames = parts.frames(ACCOUNT)
    rows = pd.concat([f for f in frames if len(f)] or frames[:1], ignore_index=True)
    summary = pipeline_summary(t, _run_facts(parts), context, parts.settings, rows)
    summary["unoverlapped"] = unoverlapped.of_parts(parts)
    summary["dlio"] = dlio_beside(parts.meta, t, summary)
    parts.table("pipeline", t)
    parts.table("account", rows.sort_values(["rank", "kind", "where"], ignore_index=True))
    return summary


SECTION = register(Section("pipeline", _of_part, _of_run, after=("sizes",)))
