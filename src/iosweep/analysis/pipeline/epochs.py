"""Epochs: each rank's epoch windows and steps from the manifest, and the epoch each traced
operation belongs to.

A rank's epoch runs from its whole-epoch record (``step = -1``: before the data loader is
asked for the first batch, to after the last step); an epoch without that record spans its
steps. An operation belongs to epoch ``e`` of its rank (the rank's forked loader workers
included) when it starts inside that window; anything else (loading before training, a
checkpoint between epochs, evaluation after) is ``-1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis import intervals
from iosweep.analysis.data import RunData

OUTSIDE = -1
STEP_COLUMNS = ("actor", "epoch", "step", "start", "end", "wait_start", "wait_end", "samples")


def steps_frame(rd: RunData) -> pd.DataFrame:
    """The run's steps with every column of the data model (older stores lack the wait)."""
    st = rd.steps.copy()
    for c in STEP_COLUMNS:
        if c not in st:
            st[c] = np.nan
    return st[list(STEP_COLUMNS)]


def rank_windows(rd: RunData) -> pd.DataFrame:
    """Per (actor, epoch): start and end of the epoch on that rank."""
    return windows_of(steps_frame(rd))


def windows_of(st: pd.DataFrame) -> pd.DataFrame:
    """:func:`rank_windows` of the steps ``st`` (columns actor, epoch, step, start, end)."""
    if st.empty:
        return pd.DataFrame(columns=["actor", "epoch", "start", "end"])
    whole = st[st["step"] < 0][["actor", "epoch", "start", "end"]]
    have = set(zip(whole["actor"], whole["epoch"], strict=True))
    spans = (
        st[st["step"] >= 0]
        .groupby(["actor", "epoch"], as_index=False)
        .agg(start=("start", "min"), end=("end", "max"))
    )
    keep = [(a, e) not in have for a, e in zip(spans["actor"], spans["epoch"], strict=True)]
    out = pd.concat([whole, spans[keep]], ignore_index=True)
    return out.sort_values(["actor", "start"]).reset_index(drop=True)


def run_windows(windows: pd.DataFrame) -> pd.DataFrame:
    """Per epoch: from the first rank's start to the last rank's end (for the ranks that
    logged no steps of their own: often only rank 0 does)."""
    w = windows.groupby("epoch", as_index=False).agg(start=("start", "min"), end=("end", "max"))
    return w.sort_values("start").reset_index(drop=True)


def op_epochs(
    rd: RunData, windows: pd.DataFrame, whole_run: pd.DataFrame | None = None
) -> np.ndarray:
    """int16 epoch of every operation (the window of its rank, or of the run where the rank
    logged no steps, that it starts in), else OUTSIDE. ``whole_run``: the run's epochs
    (:func:`run_windows` of every rank's windows) where ``windows`` are some ranks' only."""
    ops = rd.ops
    out = np.full(len(ops), OUTSIDE, np.int16)
    if whole_run is None:
        whole_run = run_windows(windows) if not windows.empty else windows
    if whole_run.empty or not len(ops):
        return out
    order = rd.actor_time_order()  # ranks' ops, by (actor, time)
    actors = ops.actor[order]
    bounds = np.searchsorted(actors, np.unique(actors), side="left")
    for lo, hi in zip(bounds, [*bounds[1:], len(order)], strict=True):
        a = int(actors[lo])
        w = windows[windows["actor"] == a]
        if w.empty:
            w = whole_run
        ws, we = w["start"].to_numpy(np.float64), w["end"].to_numpy(np.float64)
        idx = order[lo:hi]
        t = ops.start[idx]
        k = np.searchsorted(ws, t, side="right") - 1
        inside = (k >= 0) & (t <= we[np.maximum(k, 0)])
        out[idx[inside]] = w["epoch"].to_numpy()[k[inside]]
    return out


PLACES = ("before training", "in epochs", "between epochs", "after training", "checkpoints")


def placement(rd: RunData, op_epoch: np.ndarray, windows: pd.DataFrame) -> dict[str, Any]:
    """Where the I/O happens relative to training: bytes, operations and I/O time (the union
    over all ranks) before the first epoch, inside epochs, between them (evaluation, ...)
    and after the last; checkpoint files' I/O on its own, whenever it happens (a clock
    skew of milliseconds must not move a checkpoint into an epoch); and the I/O time's share
    of the run."""
    whole_run = run_windows(windows) if not windows.empty else windows
    counts, spans = place_spans(rd, op_places(rd, op_epoch, windows, whole_run))
    return placement_of(counts, span_lengths(spans), not whole_run.empty, rd.run_time)


def op_places(
    rd: RunData, op_epoch: np.ndarray, windows: pd.DataFrame, whole_run: pd.DataFrame
) -> np.ndarray:
    """Each operation's place (an index into :data:`PLACES`): ``windows`` those of the ranks
    of ``rd`` (:func:`rank_windows`), ``whole_run`` the run's epochs (:func:`run_windows`),
    whose span is a rank's that logged no steps."""
    ops = rd.ops
    place = np.full(len(ops), 2, np.int8)  # between epochs, unless shown otherwise
    place[op_epoch >= 0] = 1
    if not whole_run.empty and len(ops):
        first = windows.groupby("actor")["start"].min()
        last = windows.groupby("actor")["end"].max()
        # a rank that logged no steps (and the unattributed, last): the run's training span
        size = int(max(ops.actor.max(initial=0), first.index.max() if len(first) else 0)) + 2
        lut_first = np.full(size, whole_run["start"].min())
        lut_last = np.full(size, whole_run["end"].max())
        # (a part's ranks may have no windows: an empty frame of objects)
        lut_first[first.index.to_numpy(np.int64)] = first.to_numpy(np.float64)
        lut_last[last.index.to_numpy(np.int64)] = last.to_numpy(np.float64)
        a = np.where(ops.actor >= 0, ops.actor, size - 1)
        out = op_epoch < 0
        place[out & (ops.start < lut_first[a])] = 0
        place[out & (ops.start > lut_last[a])] = 3
    elif len(ops):
        place[:] = 0  # no epochs known: everything is "before training" only nominally
    if "checkpoint" in rd.class_names and len(ops):
        place[rd.file_class[ops.file] == rd.class_names.index("checkpoint")] = 4
    return place


def place_spans(rd: RunData, place: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per place: operations and bytes read and written (``counts``, indexed by place), and
    the operations' union in time (``spans``: place, lo, hi, in (place, lo) order)."""
    ops = rd.ops
    is_r = ops.op == 0
    counts = pd.DataFrame(
        {
            "ops": np.bincount(place, minlength=len(PLACES)),
            "bytes_read": np.bincount(place[is_r], ops.length[is_r], len(PLACES)).astype(np.int64),
            "bytes_written": np.bincount(place[~is_r], ops.length[~is_r], len(PLACES)).astype(
                np.int64
            ),
        }
    )
    g, lo, hi = intervals.merge(place.astype(np.int64), ops.start, ops.end)
    return counts, pd.DataFrame({"place": g, "lo": lo, "hi": hi})


def union_lengths(place: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The length of the union in time of the spans of each place (index place + 1) and of
    all of them (index 0), that taken from the places' unions: the same intervals, and half
    the rows to sort that the operations' own would be."""
    g, mlo, mhi = intervals.merge(place.astype(np.int64, copy=False), lo, hi)
    _, alo, ahi = intervals.merge(np.zeros(len(g), np.int64), mlo, mhi)
    per = mhi - mlo
    lengths = [(ahi - alo).sum(), *(per[g == i].sum() for i in range(len(PLACES)))]
    return np.array(lengths, np.float64)


def span_lengths(spans: pd.DataFrame) -> np.ndarray:
    """The length of the union in time of :func:`place_spans`' spans per place (index place
    + 1; index 0: every operation's)."""
    return union_lengths(
        spans["place"].to_numpy(np.int64), spans["lo"].to_numpy(), spans["hi"].to_numpy()
    )


def placement_of(
    counts: pd.DataFrame, lengths: np.ndarray, known: bool, run_time: float
) -> dict[str, Any]:
    """:func:`placement` from :func:`place_spans` (of every rank: the counts added up, the
    spans' union lengths per place, :func:`span_lengths`); ``known``: the run's epochs are
    known."""
    res: dict[str, Any] = {"known": known, "places": {}}
    for i, name in enumerate(PLACES):
        res["places"][name] = {
            "ops": int(counts["ops"].iloc[i]),
            "bytes_read": int(counts["bytes_read"].iloc[i]),
            "bytes_written": int(counts["bytes_written"].iloc[i]),
            "io_time": float(lengths[i + 1]),
        }
    busy = float(lengths[0])
    res["io_time"] = busy
    res["io_share_of_run"] = busy / run_time if run_time > 0 else None
    return res
