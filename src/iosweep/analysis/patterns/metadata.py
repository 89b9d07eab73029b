"""Metadata operations (opens, stats, seeks, fsyncs) per rank and per second, and their time.

Darshan gives them as counters; DFTracer records each call as an event (``app_events`` with
category POSIX/STDIO). Metadata time is Darshan's META_TIME (open, close, stat, seek, sync ...)
or, for DFTracer, the duration of every POSIX/STDIO call that is not a read or a write.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import RunData, category_matches
from iosweep.analysis.sections import PartIn, PartOut, PartsIn, Section, register

KINDS = {
    "opens": re.compile(r"^(f?open(at)?(64)?|fdopen|creat(64)?|mkstemp\w*)$"),
    "stats": re.compile(
        r"^_*(f|l|x|fx|lx)?stat(at|x|vfs)?(64)?$|^_*fxstatat(64)?$|^newfstatat$|^(f)?access(at)?$"
    ),
    "seeks": re.compile(r"^(l|f)seek(o)?(64)?$|^fsetpos(64)?$|^rewind$"),
    "fsyncs": re.compile(r"^f(data)?sync$|^fflush$|^sync$"),
}
_DATA = re.compile(
    r"^(p?read|p?write)v?(64)?$|^(f)(read|write)$|^(readv|writev)$|^fgets|^fputs|^fprintf"
)


def _event_calls(rd: RunData) -> tuple[np.ndarray, ...] | None:
    """The timed POSIX/STDIO metadata calls of ranks traced as events: (actor, file, kind,
    duration) per call (file -1: no path); None when there are none. Kept in ``rd.cache``:
    the file tables and the ranks' totals both count them."""
    if "metadata_calls" not in rd.cache:
        rd.cache["metadata_calls"] = _select_calls(rd)
    return rd.cache["metadata_calls"]


def _select_calls(rd: RunData) -> tuple[np.ndarray, ...] | None:
    ev = rd.app_events
    if ev.empty:
        return None
    # The kind of each distinct call name (an index into KINDS, "other" after them, -1 for
    # reads and writes), then per row by its category code: millions of events, no copies.
    names = ev["name"].cat.categories.astype(str)
    lut = np.array(
        [
            next(
                (i for i, rx in enumerate(KINDS.values()) if rx.search(n)),
                -1 if _DATA.search(n) else len(KINDS),
            )
            for n in names
        ]
        + [-1],  # missing names
        np.int64,
    )
    kind = lut[ev["name"].cat.codes.to_numpy()]
    actor = ev["actor"].to_numpy()
    dur = ev["end"].to_numpy() - ev["start"].to_numpy()
    # a call without both times is neither counted nor timed
    sel = category_matches(ev["cat"], "^(?:POSIX|STDIO)$") & (actor >= 0) & (kind >= 0)
    sel &= ~np.isnan(dur)
    if not sel.any():
        return None
    return actor[sel], ev["file"].to_numpy()[sel], kind[sel], dur[sel]


def _tally(key: np.ndarray, kind: np.ndarray, dur: np.ndarray) -> pd.DataFrame:
    """Counts of each metadata kind and their time per distinct ``key``."""
    keys, k = np.unique(key, return_inverse=True)
    nk = len(KINDS) + 1
    counts = np.bincount(k * nk + kind, minlength=len(keys) * nk).reshape(len(keys), nk)
    out = pd.DataFrame({c: counts[:, i].astype(np.int64) for i, c in enumerate(KINDS)}, keys)
    out["meta_time"] = np.bincount(k, weights=dur, minlength=len(keys))
    return out


def from_app_events(rd: RunData) -> pd.DataFrame | None:
    """Per actor counts and time of metadata calls traced as events; None when there are none."""
    calls = _event_calls(rd)
    if calls is None:
        return None
    actor, _, kind, dur = calls
    return _tally(actor, kind, dur)


def per_file_from_app_events(rd: RunData, nf: int) -> pd.DataFrame | None:
    """The same per (actor, file), indexed by ``(actor + 1) * nf + file`` (the file tables'
    key); calls without a path are left out. None when there are none."""
    calls = _event_calls(rd)
    if calls is None:
        return None
    actor, file, kind, dur = calls
    on_file = file >= 0
    if not on_file.any():
        return None
    key = (actor[on_file].astype(np.int64) + 1) * nf + file[on_file]
    return _tally(key, kind[on_file], dur[on_file])


def metadata_summary(
    ranks: pd.DataFrame, ev: pd.DataFrame | None, counted: bool, rt: float
) -> dict[str, Any]:
    """The run's metadata calls, from Darshan's counters (``counted``: the run has counter
    records) or else from its calls traced as events (``ev``: :func:`from_app_events`, whose
    figures replace the metadata columns of ``ranks``); ``rt``: the run's time."""
    source = "counters" if counted else "none"
    if ev is not None and not counted:
        source = "events"
        idx = ranks["rank"]
        for c in (*KINDS, "meta_time"):
            ranks[c] = ev[c].reindex(idx).fillna(0).to_numpy().astype(ranks[c].dtype)
    io = (ranks["read_time"] + ranks["write_time"] + ranks["meta_time"]).to_numpy()
    ranks["meta_share"] = np.divide(
        ranks["meta_time"].to_numpy(), io, out=np.zeros(len(ranks)), where=io > 0
    )
    for c in KINDS:
        ranks[f"{c}_per_s"] = ranks[c] / rt if rt > 0 else 0.0
    tot = {c: int(ranks[c].sum()) for c in KINDS}
    meta_time = float(ranks["meta_time"].sum())
    io_total = float(io.sum())
    return {
        "source": source,
        "totals": tot,
        "per_rank": {c: _stats(ranks[c]) for c in (*KINDS, "meta_time")},
        "per_second": {c: (tot[c] / rt if rt > 0 else None) for c in KINDS},
        "meta_time": meta_time,
        "max_rank_meta_time": float(ranks["meta_time"].max()) if len(ranks) else 0.0,
        "meta_time_share": meta_time / io_total if io_total > 0 else None,
    }


def _stats(v: pd.Series) -> dict[str, float] | None:
    if len(v) == 0:
        return None
    a = v.to_numpy(np.float64)
    return {"min": float(a.min()), "mean": float(a.mean()), "max": float(a.max())}


EVENTS = "metadata_events.parquet"  # a part's metadata calls traced as events, per rank


def _of_part(part: PartIn, out: PartOut) -> None:
    events = from_app_events(part.rd) if not len(part.rd.counters) else None
    if events is not None:
        out.put(EVENTS, events.rename_axis("rank").reset_index())


def _of_run(parts: PartsIn) -> dict[str, Any]:
    """The summary; the run's ranks table takes its metadata columns from the events where
    the run has no counters, and its rates per second (:func:`metadata_summary`)."""
    found = parts.frames(EVENTS)
    events = pd.concat(found).set_index("rank").sort_index() if found else None
    return metadata_summary(parts.tables.ranks, events, parts.counted, parts.run_time)


SECTION = register(Section("metadata", _of_part, _of_run))
