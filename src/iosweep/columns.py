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


def numbers(col: pa.Array | pa.ChunkedArray, dtype: Any, fill: Any) -> np.ndarray:
    """A numeric column as ``dtype``, nulls as ``fill``."""
    if col.null_count:
        col = pc.fill_null(col, fill)
    return col.to_numpy().astype(dtype, copy=False)


def ints_valid(col: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values with nulls as 0, validity mask)."""
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False)
    return pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64), valid
