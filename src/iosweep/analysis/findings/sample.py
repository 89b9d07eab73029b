"""The operations the report plots: a deterministic sample of the analysed reads and writes.

Above ``max_points`` operations each (file class, direction) stratum keeps at least a fair
share (so rare operations such as rank 0's checkpoint writes stay visible among millions of
reads), and within a stratum operations are taken evenly spaced in (rank, time) order.
The result is the analysis table ``ops_sample.parquet``; the report only draws it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from iosweep.analysis.data import WRITE, RunData
from iosweep.sampling import pick

#: the columns of ``ops_sample.parquet``
COLUMNS = ("rank", "path", "class", "write", "offset", "length", "start", "end")


@dataclass
class OpsSampleInfo:
    """What the sample stands for: ``total`` analysed operations, of which the table holds
    ``shown``; ``excluded`` operations were on files the analysis left out; ``other_layers``:
    reads and writes of modules not analysed (MPI-IO: the layer above POSIX), by module."""

    total: int
    shown: int
    excluded: int
    class_order: list[str]
    other_layers: dict[str, int]


def class_order(names: set[str]) -> list[str]:
    """Classes in a stable reading order: dataset first, checkpoint next, the rest by name."""
    return sorted(names, key=lambda c: ({"dataset": 0, "data": 0, "checkpoint": 1}.get(c, 2), c))


def sample_ops(
    rd: RunData, classes: set[str], max_points: int
) -> tuple[pd.DataFrame, OpsSampleInfo]:
    """The analysed reads and writes (``rd.ops``: tracer artefacts already removed), sampled
    to at most ``max_points`` rows; ``classes``: those of the files table, in legend order."""
    names = class_order(classes)
    ops = rd.ops
    cidx = {c: i for i, c in enumerate(names)}
    # class code per path: the analysis's class, renumbered in plotting order
    path_cls = np.array([cidx.get(c, -1) for c in rd.class_names], np.int64)[rd.file_class]
    cls = path_cls[ops.file] if len(ops) else np.empty(0, np.int64)
    is_write = ops.op == WRITE
    idx = pick(ops.actor, ops.start, cls * 2 + is_write, max_points)
    used, file = np.unique(ops.file[idx], return_inverse=True)
    df = pd.DataFrame(
        {
            "rank": ops.actor[idx].astype(np.int32),
            "path": pd.Categorical.from_codes(
                file.astype(np.int32), categories=np.asarray(rd.paths, dtype=object)[used]
            ),
            "class": pd.Categorical.from_codes(cls[idx], categories=names),
            "write": is_write[idx],
            "offset": ops.offset[idx],
            "length": ops.length[idx],
            "start": ops.start[idx],
            "end": ops.end[idx],
        }
    )
    return df, OpsSampleInfo(len(ops), len(idx), rd.excluded_io_ops, names, rd.other_layer_ops)
