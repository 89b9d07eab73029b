"""Which file a DFTracer event names: its file hash to a path (the trace's ``FH`` records) and
to the file's id, worked out once for all of a trace's distinct hashes, in Arrow and numpy
(one Python call per hash took ~4% of a 10 M-event ingest)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_HEX_DIGITS = 16  # DFTracer writes a file hash as 16 hex digits
_NOT_HEX = 255
_NIBBLE = np.full(256, _NOT_HEX, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _NIBBLE[_c] = _i
for _i, _c in enumerate(b"ABCDEF", 10):
    _NIBBLE[_c] = _i
_SHIFTS = np.arange(4 * (_HEX_DIGITS - 1), -1, -4, dtype=np.uint64)


def hash_to_u64(h: str | None) -> int | None:
    """A file's id: DFTracer's hash, or (a path, as pydftracer 1.0.x names files) 64 bits of
    its BLAKE2b, the same in every process's trace."""
    if not h:
        return None
    try:
        v = int(h, 16)
    except ValueError:
        return int.from_bytes(hashlib.blake2b(h.encode(), digest_size=8).digest(), "little")
    return v if v < 2**64 else None


def _sixteen_hex(hashes: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values, which) of the hashes that are exactly 16 hex digits, read by numpy."""
    n = len(hashes)
    values, which = np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=bool)
    sixteen = pc.fill_null(pc.binary_length(hashes), 0).to_numpy() == _HEX_DIGITS
    if not sixteen.any():
        return values, which
    rows = np.flatnonzero(sixteen)
    sub = pc.cast(hashes.take(pa.array(rows)), pa.large_binary())
    first, last = sub.offset, sub.offset + len(sub)
    offsets = np.frombuffer(sub.buffers()[1], dtype=np.int64)
    data = np.frombuffer(sub.buffers()[2], dtype=np.uint8)[offsets[first] : offsets[last]]
    nibbles = _NIBBLE[data].reshape(-1, _HEX_DIGITS)
    good = (nibbles != _NOT_HEX).all(axis=1)
    values[rows[good]] = (nibbles[good].astype(np.uint64) << _SHIFTS).sum(axis=1, dtype=np.uint64)
    which[rows[good]] = True
    return values, which


def hash_ids(hashes: pa.Array) -> pa.Array:
    """:func:`hash_to_u64` of each hash (uint64, null for none): 16 hex digits by numpy, any
    other text (a path, a shorter hash) by the same rule one at a time."""
    values, which = _sixteen_hex(hashes)
    rest = np.flatnonzero(~which & pc.is_valid(hashes).to_numpy(zero_copy_only=False))
    for i, h in zip(rest.tolist(), hashes.take(pa.array(rest)).to_pylist(), strict=True):
        v = hash_to_u64(h)
        if v is not None:
            values[i], which[i] = v, True
    return pa.array(values, type=pa.uint64(), mask=~which)


@dataclass
class FilePaths:
    """The paths a trace names its file hashes by: its ``FH`` records (the last record of a
    hash holds), then, as pydftracer 1.0.x names files by path, each path named by itself."""

    hashes: pa.Array
    paths: pa.Array

    @classmethod
    def of(cls, fh_rows: pa.Table, named: pa.Array) -> FilePaths:
        """From the ``FH`` records (``a_value`` the hash, ``a_name`` the path), in the trace's
        order, and the distinct paths events name directly."""
        last_first = fh_rows.take(pa.array(np.arange(fh_rows.num_rows - 1, -1, -1)))
        hashes = last_first.column("a_value").combine_chunks().cast(pa.string())
        paths = last_first.column("a_name").combine_chunks().cast(pa.string())
        named = named.cast(pa.string())
        return cls(pa.concat_arrays([hashes, named]), pa.concat_arrays([paths, named]))

    def found(self, hashes: pa.Array) -> pa.Array:
        """Where each hash's path is in :attr:`paths` (null: no record names it)."""
        return pc.index_in(hashes, value_set=self.hashes)


__all__ = ["FilePaths", "hash_ids", "hash_to_u64"]
