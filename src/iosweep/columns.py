"""Arrow columns as numpy arrays, without a Python loop per row: the conversions the trace
readers, the analysis and its sample share."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def codes(col: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """(int64 codes, -1 for null; the distinct values) of a string or dictionary column."""
    c, values = arrow_codes(col)
    return c, values.to_pylist()


def arrow_codes(col: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """:func:`codes` with the distinct values left an Arrow array (many values: no Python
    object each)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    c = pc.fill_null(arr.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return c, arr.dictionary


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an array, as ``np.unique``, by a sort: numpy 2's unique
    of integers without its ``return_*`` options hashes them, which took 2.2 s for 2 M
    distinct int64 values (a sort: 0.06 s)."""
    a = np.asarray(values).ravel()
    if a.dtype.kind not in "iub" or len(a) < 2:
        return np.unique(a)  # (floats: sorted there too, NaNs made one)
    a = np.sort(a)
    first = np.empty(len(a), bool)
    first[0] = True
    np.not_equal(a[1:], a[:-1], out=first[1:])
    return a[first]


def numbers(col: pa.Array | pa.ChunkedArray, dtype: Any, fill: Any) -> np.ndarray:
    """A numeric column as ``dtype``, nulls as ``fill``."""
    if col.null_count:
        col = pc.fill_null(col, fill)
    return col.to_numpy().astype(dtype, copy=False)


def ints_valid(col: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values with nulls as 0, validity mask)."""
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False)
    return pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64), valid
