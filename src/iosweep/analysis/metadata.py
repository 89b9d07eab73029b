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

from iosweep.analysis.data import RunData, category_matches, category_values

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


def from_app_events(rd: RunData) -> pd.DataFrame | None:
    """Per actor counts and time of metadata calls traced as events; None when there are none."""
    ev = rd.app_events
    if ev.empty:
        return None
    ev = ev[category_matches(ev["cat"], "^(POSIX|STDIO)$") & (ev["actor"].to_numpy() >= 0)]
    if ev.empty:
        return None
    # the kind of each distinct call name, then per row by its category code
    kinds = [
        next((k for k, rx in KINDS.items() if rx.search(n)), "other" if not _DATA.search(n) else "")
        for n in ev["name"].cat.categories.astype(str)
    ]
    k = pd.Series(category_values(ev["name"], np.array(kinds, dtype=object), ""))
    meta = k != ""
    df = pd.DataFrame(
        {
            "actor": ev["actor"].to_numpy(),
            "kind": k.to_numpy(),
            "dur": (ev["end"] - ev["start"]).to_numpy(),
        }
    )[meta.to_numpy()]
    counts = df.pivot_table(
        index="actor", columns="kind", values="dur", aggfunc="count", fill_value=0
    )
    out = pd.DataFrame(index=counts.index)
    for kname in KINDS:
        out[kname] = counts.get(kname, 0)
    out["meta_time"] = df.groupby("actor")["dur"].sum()
    return out.fillna(0)


def analyze_metadata(rd: RunData, ranks: pd.DataFrame) -> dict[str, Any]:
    """Fills the metadata columns of ``ranks`` from app events where counters gave none."""
    source = "counters" if len(rd.counters) else "none"
    ev = from_app_events(rd)
    if ev is not None and not len(rd.counters):
        source = "events"
        idx = ranks["rank"]
        for c in (*KINDS, "meta_time"):
            ranks[c] = ev[c].reindex(idx).fillna(0).to_numpy().astype(ranks[c].dtype)
    rt = rd.run_time
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
