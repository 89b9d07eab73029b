"""DXT segments in bulk: each record's ``segment_info`` array goes to numpy and Arrow as one
buffer (no Python per segment), checked for impossible offsets and times."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from iosweep.trace.darshan.libutil import SEGMENT_DTYPE, LogHandle, NameDict, RecordError
from iosweep.trace.logs import LogError
from iosweep.trace.schema import SEGMENTS

# a DXT time this far outside the log's own run is garbage, not a late write (seconds)
_TIME_SLACK = 86400.0

DXT_MODULES = {"DXT_POSIX": "POSIX", "DXT_MPIIO": "MPIIO"}


def _check_segments(seg: np.ndarray, duration: float) -> str:
    """Why a segment array cannot be real data ('' if it looks sane)."""
    start, end = seg["start"], seg["end"]
    if not (np.isfinite(start).all() and np.isfinite(end).all()):
        return "non-finite timestamps"
    if (seg["length"] < 0).any() or (seg["offset"] < -1).any():
        return "negative offsets or lengths"
    lo, hi = float(min(start.min(), end.min())), float(max(start.max(), end.max()))
    if lo < -_TIME_SLACK or hi > duration + _TIME_SLACK:
        return f"timestamps outside the run ({lo:.4g} .. {hi:.4g} s)"
    return ""


@dataclass
class DxtPart:
    """The segments of one DXT file record, copied out of C (the constant columns come later)."""

    module: str
    rank: int
    host: str
    rid: int
    writes: int
    offset: np.ndarray
    length: np.ndarray
    start: np.ndarray
    end: np.ndarray


def read_dxt(h: LogHandle, module: str, idx: int, duration: float) -> list[DxtPart]:
    ffi = h.ffi
    head = ffi.sizeof("struct dxt_file_record")
    parts: list[DxtPart] = []
    try:
        for rec in h.records(idx, "struct dxt_file_record *"):
            wc, rc = int(rec.write_count), int(rec.read_count)
            rank, rid = int(rec.base_rec.rank), int(rec.base_rec.id)
            if wc < 0 or rc < 0 or not -1 <= rank < 1 << 24:
                raise LogError(
                    h.path,
                    "corrupt",
                    f"{module} record {rid} is damaged (rank {rank}, {wc} writes, {rc} reads)",
                )
            n = wc + rc
            if n == 0:
                continue
            # the segments follow the record header in the same malloc'd block: view them,
            # then copy each field once into its own contiguous array (the final column)
            seg = np.frombuffer(
                ffi.buffer(ffi.cast("char *", rec) + head, n * SEGMENT_DTYPE.itemsize),
                dtype=SEGMENT_DTYPE,
            )
            parts.append(
                DxtPart(
                    module=DXT_MODULES[module],
                    rank=rank,
                    host=ffi.string(rec.hostname, 64).decode("utf-8", "replace"),
                    rid=rid,
                    writes=wc,
                    offset=seg["offset"].copy(),
                    length=seg["length"].copy(),
                    start=seg["start"].copy(),
                    end=seg["end"].copy(),
                )
            )
    except RecordError:
        raise LogError(
            h.path,
            "corrupt",
            f"the {module} data are damaged (libdarshan-util failed after {len(parts)} records)",
        ) from None
    if (bad := _first_damaged(parts, duration)) is not None:
        part, why = bad
        raise LogError(h.path, "corrupt", f"{module} record {part.rid} is damaged: {why}")
    return parts


def _first_damaged(parts: list[DxtPart], duration: float) -> tuple[DxtPart, str] | None:
    """The first record whose segments cannot be real data, and why (:func:`_check_segments`),
    checked over all of a module's segments at once: once per record, the check took a
    quarter of the time to read an ImageNet-scale run's logs (2.56 M records of 4 segments)."""
    if not parts:
        return None
    start = np.concatenate([p.start for p in parts])
    end = np.concatenate([p.end for p in parts])
    bad = ~(np.isfinite(start) & np.isfinite(end))
    bad |= np.concatenate([p.length for p in parts]) < 0
    bad |= np.concatenate([p.offset for p in parts]) < -1
    with np.errstate(invalid="ignore"):
        bad |= (np.minimum(start, end) < -_TIME_SLACK) | (
            np.maximum(start, end) > duration + _TIME_SLACK
        )
    if not bad.any():
        return None
    at = int(np.searchsorted(np.cumsum([len(p.start) for p in parts]), np.argmax(bad), "right"))
    p = parts[at]
    seg = np.zeros(len(p.start), SEGMENT_DTYPE)
    seg["offset"], seg["length"], seg["start"], seg["end"] = p.offset, p.length, p.start, p.end
    return p, _check_segments(seg, duration)


class _Consts:
    """Constant columns as slices of one shared buffer per (type, value).

    Most columns of a DXT record batch hold one value (rank, host, pid, file, module, log).
    Materialising each would cost as much memory as the segments themselves; slices of a
    shared array cost nothing per batch.
    """

    def __init__(self) -> None:
        self._arrays: dict[tuple, pa.Array] = {}

    def __call__(self, value: Any, n: int, type_: pa.DataType) -> pa.Array:
        key = (str(type_), value)
        a = self._arrays.get(key)
        if a is None or len(a) < n:
            if value is None:
                a = pa.nulls(n, type_)
            else:
                a = pa.array(np.full(n, value, type_.to_pandas_dtype()))
            self._arrays[key] = a
        return a.slice(0, n)


def segments_table(
    parts: list[DxtPart], names: dict[int, str], source: str, pid_of_rank: dict[int, int]
) -> pa.Table:
    """SEGMENTS from the DXT parts (consumed: each part is dropped once it is in a batch).

    A large record becomes one record batch whose numeric columns are the part's arrays
    (zero-copy) and whose constant columns share buffers (see :class:`_Consts`); small
    records are grouped so a log of many files does not make many tiny batches. All
    batches share the log's dictionaries.
    """
    if not parts:
        return SEGMENTS.empty_table()
    hosts, paths, modules, ops, sources = NameDict(), NameDict(), NameDict(), NameDict(), NameDict()
    w, r, src = ops("write"), ops("read"), sources(source)
    keys = [
        (hosts(p.host), paths(names.get(p.rid, f"<unknown record {p.rid}>")), modules(p.module))
        for p in parts
    ]
    d_host, d_path, d_mod, d_op, d_src = (x.array() for x in (hosts, paths, modules, ops, sources))
    consts = _Consts()
    i32, i64 = pa.int32(), pa.int64()

    batches = []
    i = 0
    while i < len(parts):
        j, rows = i, 0
        while j < len(parts) and (rows == 0 or rows + len(parts[j].offset) <= 1 << 16):
            rows += len(parts[j].offset)
            j += 1
        group, gkeys = parts[i:j], keys[i:j]
        if len(group) == 1:
            p, (hi, pi, mi) = group[0], gkeys[0]
            n = rows
            if p.writes in (0, n):
                op = consts(w if p.writes else r, n, i32)
            else:
                op = np.full(n, r, np.int32)
                op[: p.writes] = w
            cols = [
                consts(p.rank, n, i32),
                consts(hi, n, i32),
                consts(pid_of_rank.get(p.rank), n, i64),
                consts(p.rid, n, pa.uint64()),
                consts(pi, n, i32),
                consts(mi, n, i32),
                op,
                p.offset,
                p.length,
                p.start,
                p.end,
            ]
        else:
            sizes = np.array([len(p.offset) for p in group])

            def rep(vals: list, dtype, sizes=sizes) -> np.ndarray:
                return np.repeat(np.asarray(vals, dtype), sizes)

            op = np.full(rows, r, np.int32)
            pos = 0
            for p, n in zip(group, sizes, strict=True):
                op[pos : pos + p.writes] = w
                pos += n
            pids = [pid_of_rank.get(p.rank) for p in group]
            cols = [
                rep([p.rank for p in group], np.int32),
                rep([k[0] for k in gkeys], np.int32),
                pa.array(
                    rep([q or 0 for q in pids], np.int64),
                    mask=rep([q is None for q in pids], bool) if None in pids else None,
                ),
                rep([p.rid for p in group], np.uint64),
                rep([k[1] for k in gkeys], np.int32),
                rep([k[2] for k in gkeys], np.int32),
                op,
                *(
                    np.concatenate([getattr(p, f) for p in group])
                    for f in SEGMENT_DTYPE.names or ()
                ),
            ]
        rank, hi, pid, rid, pi, mi, op, *seg = cols
        dict_col = pa.DictionaryArray.from_arrays
        batch = [
            pa.array(rank),  # no copy: an Arrow array stays itself, numpy is wrapped
            dict_col(hi, d_host),
            pid,
            consts(None, rows, i64),  # DXT does not record threads
            pa.array(rid),
            dict_col(pi, d_path),
            dict_col(mi, d_mod),
            dict_col(op, d_op),
            *(pa.array(x) for x in seg),
            dict_col(consts(src, rows, i32), d_src),
        ]
        batches.append(pa.RecordBatch.from_arrays(batch, schema=SEGMENTS))
        # let the copies go once they are in a batch
        parts[i:j] = [None] * (j - i)  # type: ignore[list-item]
        i = j
    return pa.Table.from_batches(batches, schema=SEGMENTS)
