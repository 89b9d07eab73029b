"""I/O versus compute: per rank and epoch, the I/O time not hidden behind compute.

Compute is what the manifest's steps cover (rows with ``step >= 0``) plus DFTracer app events
that ``analysis.phases.compute`` names. I/O time is the union of the rank's
traced operations (all its processes, DataLoader workers included). ``exposed`` I/O is I/O time
inside the epoch with no compute running on that rank at the same time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis import intervals
from iosweep.analysis.data import RunData, events_matching
from iosweep.analysis.pipeline.epochs import rank_windows
from iosweep.analysis.sections import PartIn, PartOut, PartsIn, Section, register

COLUMNS = [
    "rank",
    "epoch",
    "start",
    "end",
    "duration",
    "io_time",
    "compute_time",
    "overlapped_io_time",
    "exposed_io_time",
    "exposed_share",
]


def compute_intervals(rd: RunData) -> dict[str, pd.DataFrame]:
    """The ranks' compute intervals (actor, start, end) by source: the steps, the trace's
    compute events."""
    out = {}
    st = rd.steps
    # Steps recovered from the trace's own compute events are those events: one source, not two.
    from_events = (rd.timing or {}).get("source") == "events"
    if not st.empty and (st["step"] >= 0).any() and not from_events:
        out["steps"] = st[st["step"] >= 0][["actor", "start", "end"]]
    ev = rd.app_events
    if not ev.empty and rd.settings.phases.get("compute"):
        hit = events_matching(ev, rd.settings.phases["compute"])
        e = ev[hit & (ev["actor"].to_numpy() >= 0)]
        if len(e):
            out["app_events"] = e[["actor", "start", "end"]]
    return out


def unavailable(has_ops: bool, params: dict[str, Any]) -> dict[str, Any]:
    """The overlap's summary where the run has no operations or no compute intervals."""
    why = (
        "no traced operations with times"
        if not has_ops
        else "no step timestamps or compute events"
        if params.get("framework")
        else "no compute phases recorded"
    )
    return {"available": False, "reason": why}


def overlap_rows(rd: RunData, compute: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per rank with I/O, per epoch and outside them (-1): its I/O time, compute time
    (``compute``: :func:`compute_intervals`), their overlap and the I/O left exposed
    (:data:`COLUMNS`); each rank's own."""
    comp_parts = list(compute.values())
    comp = (
        pd.concat(comp_parts, ignore_index=True).dropna()
        if comp_parts
        else pd.DataFrame({"actor": [], "start": [], "end": []})
    )

    ew = rank_windows(rd)  # per rank: the whole-epoch rows, else the span of its steps

    ga, ilo, ihi = rd.io_spans()
    gc, clo, chi = intervals.merge(
        comp["actor"].to_numpy(np.int64),
        comp["start"].to_numpy(np.float64),
        comp["end"].to_numpy(np.float64),
    )
    rows = []
    # merge() returns intervals sorted by group: each rank's are one slice.
    for a in np.unique(ga):
        a = int(a)
        i0, i1 = np.searchsorted(ga, [a, a + 1])
        c0, c1 = np.searchsorted(gc, [a, a + 1])
        io_lo, io_hi = ilo[i0:i1], ihi[i0:i1]
        c_lo, c_hi = clo[c0:c1], chi[c0:c1]
        x_lo, x_hi = intervals.intersect(io_lo, io_hi, c_lo, c_hi)
        w = ew[ew["actor"] == a].sort_values("epoch")
        io_total = float((io_hi - io_lo).sum())
        ov_total = float((x_hi - x_lo).sum())
        if len(w):
            wl, wh = w["start"].to_numpy(np.float64), w["end"].to_numpy(np.float64)
            io_in = intervals.measure_in(io_lo, io_hi, wl, wh)
            ov_in = intervals.measure_in(x_lo, x_hi, wl, wh)
            cp_in = intervals.measure_in(c_lo, c_hi, wl, wh)
            for i, ep in enumerate(w["epoch"].to_numpy()):
                dur = wh[i] - wl[i]
                rows.append(
                    [
                        a,
                        int(ep),
                        wl[i],
                        wh[i],
                        dur,
                        io_in[i],
                        cp_in[i],
                        ov_in[i],
                        io_in[i] - ov_in[i],
                        (io_in[i] - ov_in[i]) / dur if dur > 0 else 0.0,
                    ]
                )
            io_out, ov_out = io_total - io_in.sum(), ov_total - ov_in.sum()
        else:
            io_out, ov_out = io_total, ov_total
        # I/O outside every epoch (start-up loading, evaluation): epoch -1.
        rows.append(
            [
                a,
                -1,
                np.nan,
                np.nan,
                np.nan,
                max(io_out, 0.0),
                np.nan,
                max(ov_out, 0.0),
                max(io_out - ov_out, 0.0),
                np.nan,
            ]
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def overlap_summary(df: pd.DataFrame, sources: list[str]) -> dict[str, Any]:
    """The run's overlap from :func:`overlap_rows` of every rank."""
    ep = df[df["epoch"] >= 0]
    per_epoch = []
    for e, g in ep.groupby("epoch"):
        per_epoch.append(
            {
                "epoch": int(e),
                "duration_max": float(g["duration"].max()),
                "io_time_max": float(g["io_time"].max()),
                "exposed_io_time_max": float(g["exposed_io_time"].max()),
                "exposed_io_time_mean": float(g["exposed_io_time"].mean()),
                "exposed_share_max": float(g["exposed_share"].max()),
            }
        )
    outside = df[df["epoch"] < 0]
    tot_dur = ep.groupby("rank")["duration"].sum()
    tot_exp = ep.groupby("rank")["exposed_io_time"].sum()
    share = (
        (tot_exp / tot_dur.reindex(tot_exp.index)).replace([np.inf], np.nan)
        if len(ep)
        else pd.Series(dtype=float)
    )
    summary = {
        "available": True,
        "compute_source": "+".join(sources),
        "epochs": per_epoch,
        "exposed_io_time_in_epochs_max": float(tot_exp.max()) if len(tot_exp) else 0.0,
        "exposed_share_of_epochs_max": float(share.max())
        if len(share) and share.notna().any()
        else None,
        "io_time_outside_epochs_max": float(outside["io_time"].max()) if len(outside) else 0.0,
    }
    return summary


ROWS = "overlap.parquet"  # a part's overlap_rows
SOURCES = "overlap_sources.json"  # where its compute intervals came from


def _of_part(part: PartIn, out: PartOut) -> None:
    compute = compute_intervals(part.rd)
    out.put(ROWS, overlap_rows(part.rd, compute))
    out.put_json(SOURCES, list(compute))


def _of_run(parts: PartsIn) -> dict[str, Any]:
    seen = {s for found in parts.values(SOURCES) for s in found}
    sources = [s for s in ("steps", "app_events") if s in seen]
    has_ops = parts.tables.dxt_available
    if not sources or not has_ops:
        parts.table("overlap", pd.DataFrame(columns=COLUMNS))
        return unavailable(has_ops, parts.meta.params)
    rows = pd.concat(parts.frames(ROWS), ignore_index=True)
    rows = rows.sort_values("rank", kind="stable", ignore_index=True)
    parts.table("overlap", rows)
    return overlap_summary(rows, sources)


SECTION = register(Section("overlap", _of_part, _of_run))
