"""Epochs: each rank's epoch windows and steps from the manifest, and the epoch each traced
operation belongs to.

A rank's epoch runs from its whole-epoch record (``step = -1``: before the data loader is
asked for the first batch, to after the last step); an epoch without that record spans its
steps. An operation belongs to epoch ``e`` of its rank (the rank's forked loader workers
included) when it starts inside that window; anything else (loading before training, a
checkpoint between epochs, evaluation after) is ``-1``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

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
    st = steps_frame(rd)
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


def op_epochs(rd: RunData, windows: pd.DataFrame) -> np.ndarray:
    """int16 epoch of every operation (its rank's window it starts in), else OUTSIDE."""
    ops = rd.ops
    out = np.full(len(ops), OUTSIDE, np.int16)
    if windows.empty or not len(ops):
        return out
    order = rd.actor_time_order()  # ranks' ops, by (actor, time)
    actors = ops.actor[order]
    bounds = np.searchsorted(actors, np.unique(actors), side="left")
    for lo, hi in zip(bounds, [*bounds[1:], len(order)], strict=True):
        a = int(actors[lo])
        w = windows[windows["actor"] == a]
        if w.empty:
            continue
        ws, we = w["start"].to_numpy(np.float64), w["end"].to_numpy(np.float64)
        idx = order[lo:hi]
        t = ops.start[idx]
        k = np.searchsorted(ws, t, side="right") - 1
        inside = (k >= 0) & (t <= we[np.maximum(k, 0)])
        out[idx[inside]] = w["epoch"].to_numpy()[k[inside]]
    return out
