"""The operations the report plots: a deterministic sample of a store's reads and writes.

Above ``max_points`` operations each (file class, direction) stratum keeps at least a fair
share (so rare operations such as rank 0's checkpoint writes stay visible among millions of
reads), and within a stratum operations are taken evenly spaced in (rank, time) order.
The result is the analysis table ``ops_sample.parquet``; the report only draws it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from iosweep.columns import codes, numbers
from iosweep.sampling import pick

#: the columns of ``ops_sample.parquet``
COLUMNS = ("rank", "path", "class", "write", "offset", "length", "start", "end")


@dataclass
class OpsSampleInfo:
    """What the sample stands for: ``total`` analysed operations, of which the table holds
    ``shown``; ``excluded`` operations were on files the analysis left out."""

    total: int
    shown: int
    excluded: int
    class_order: list[str]


def class_order(names: set[str]) -> list[str]:
    """Classes in a stable reading order: dataset first, checkpoint next, the rest by name."""
    return sorted(names, key=lambda c: ({"dataset": 0, "checkpoint": 1}.get(c, 2), c))


def sample_ops(
    store: Path, file_classes: dict[str, str], max_points: int
) -> tuple[pd.DataFrame, OpsSampleInfo]:
    """Reads and writes of ``store``'s segments on the analysed files (``file_classes``:
    path -> class, the files table), sampled to at most ``max_points`` rows."""
    names = class_order(set(file_classes.values()))
    empty = pd.DataFrame({c: [] for c in COLUMNS})
    f = Path(store) / "segments.parquet"
    if not f.exists():
        return empty, OpsSampleInfo(0, 0, 0, names)
    t = pq.read_table(f, columns=["rank", "path", "op", "offset", "length", "start", "end"])
    if t.num_rows == 0:
        return empty, OpsSampleInfo(0, 0, 0, names)
    file, path_values = codes(t.column("path"))
    paths = [str(p) for p in path_values]
    opc, ops = codes(t.column("op"))
    is_write = np.isin(opc, [i for i, o in enumerate(ops) if o == "write"])
    is_rw = np.isin(opc, [i for i, o in enumerate(ops) if o in ("read", "write")])
    cidx = {c: i for i, c in enumerate(names)}
    path_cls = np.array([cidx.get(file_classes.get(p, ""), -1) for p in paths] + [-1], np.int64)
    cls = path_cls[file]  # file -1 (null path) takes the appended -1
    keep = is_rw & (cls >= 0)
    idx = np.flatnonzero(keep)
    rank = numbers(t.column("rank"), np.int64, -1)
    start = numbers(t.column("start"), np.float64, np.nan)
    idx = idx[pick(rank[idx], start[idx], cls[idx] * 2 + is_write[idx], max_points)]
    sub = t.take(pa.array(idx))
    df = pd.DataFrame(
        {
            "rank": rank[idx].astype(np.int32),
            "path": pd.Categorical.from_codes(file[idx], categories=paths),
            "class": pd.Categorical.from_codes(cls[idx], categories=names),
            "write": is_write[idx],
            "offset": numbers(sub.column("offset"), np.int64, -1),
            "length": numbers(sub.column("length"), np.int64, 0),
            "start": start[idx],
            "end": numbers(sub.column("end"), np.float64, np.nan),
        }
    )
    info = OpsSampleInfo(int(keep.sum()), len(idx), int((~keep).sum()), names)
    return df, info
