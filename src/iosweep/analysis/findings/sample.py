"""The operations the report plots: a deterministic sample of the analysed reads and writes.

Above ``max_points`` operations each (file class, direction) stratum keeps at least a fair
share (so rare operations such as rank 0's checkpoint writes stay visible among millions of
reads), and within a stratum operations are taken evenly spaced in (rank, time) order.
The result is the analysis table ``ops_sample.parquet``; the report only draws it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import WRITE

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


def op_strata(
    file_class: np.ndarray, op: np.ndarray, class_names: list[str], names: list[str]
) -> np.ndarray:
    """Each operation's stratum: its file's class in plotting order (``names``) x 2 + write."""
    cidx = {c: i for i, c in enumerate(names)}
    # class code per class of the analysis, renumbered in plotting order
    lut = np.array([cidx.get(c, -1) for c in class_names], np.int64)
    return lut[file_class] * 2 + (op == WRITE)


def sample_frame(
    ops: Any, idx: np.ndarray, strata: np.ndarray, paths: list[str], names: list[str]
) -> pd.DataFrame:
    """``ops_sample.parquet``'s rows: the operations ``idx`` of ``ops`` (columns actor, file,
    op, offset, length, start, end), files as codes into ``paths``."""
    used, file = np.unique(np.asarray(ops.file)[idx], return_inverse=True)
    return pd.DataFrame(
        {
            "rank": np.asarray(ops.actor)[idx].astype(np.int32),
            "path": pd.Categorical.from_codes(
                file.astype(np.int32), categories=np.asarray(paths, dtype=object)[used]
            ),
            "class": pd.Categorical.from_codes(strata[idx] // 2, categories=names),
            "write": (strata[idx] % 2).astype(bool),
            "offset": np.asarray(ops.offset)[idx],
            "length": np.asarray(ops.length)[idx],
            "start": np.asarray(ops.start)[idx],
            "end": np.asarray(ops.end)[idx],
        }
    )
