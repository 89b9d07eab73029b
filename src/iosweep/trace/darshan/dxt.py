"""DXT segments in bulk: each record's ``segment_info`` array goes to numpy and Arrow as one
buffer (no Python per segment), checked for impossible offsets and times."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from iosweep.trace.darshan.bulk import DxtColumns
from iosweep.trace.darshan.check import NameTable
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


def read_dxt(h: LogHandle, module: str, idx: int) -> DxtColumns:
    """A DXT module's records through libdarshan-util, a call per record (for the regions
    :mod:`~iosweep.trace.darshan.bulk` does not read itself); :func:`check_dxt` checks both."""
    ffi = h.ffi
    head = ffi.sizeof("struct dxt_file_record")
    rids: list[int] = []
    ranks, hosts, writes, counts, segs = [], [], [], [], []
    host_idx: dict[str, int] = {}
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
            # the segments follow the record header in the same malloc'd block
            seg = np.frombuffer(
                ffi.buffer(ffi.cast("char *", rec) + head, n * SEGMENT_DTYPE.itemsize),
                dtype=SEGMENT_DTYPE,
            )
            host = ffi.string(rec.hostname, 64).decode("utf-8", "replace")
            rids.append(rid)
            ranks.append(rank)
            hosts.append(host_idx.setdefault(host, len(host_idx)))
            writes.append(wc)
            counts.append(n)
            segs.append(seg.copy())
    except RecordError:
        raise LogError(
            h.path,
            "corrupt",
            f"the {module} data are damaged (libdarshan-util failed after {len(rids)} records)",
        ) from None
    seg = np.concatenate(segs) if segs else np.zeros(0, SEGMENT_DTYPE)
    return DxtColumns(
        module=DXT_MODULES[module],
        rid=np.array(rids, np.uint64),
        rank=np.array(ranks, np.int64),
        host=np.array(hosts, np.int32),
        hosts=list(host_idx),
        writes=np.array(writes, np.int64),
        count=np.array(counts, np.int64),
        **{f: np.ascontiguousarray(seg[f]) for f in SEGMENT_DTYPE.names or ()},
    )


def check_dxt(path: Path, module: str, cols: DxtColumns, duration: float) -> None:
    """LogError naming the first record whose segments cannot be real data, and why
    (:func:`_check_segments`), checked over all of a module's segments at once: once per
    record, the check took a quarter of the time to read an ImageNet-scale run's logs (2.56 M
    records of 4 segments)."""
    start, end = cols.start, cols.end
    bad = ~(np.isfinite(start) & np.isfinite(end))
    bad |= cols.length < 0
    bad |= cols.offset < -1
    with np.errstate(invalid="ignore"):
        bad |= (np.minimum(start, end) < -_TIME_SLACK) | (
            np.maximum(start, end) > duration + _TIME_SLACK
        )
    if not bad.any():
        return
    at = int(np.searchsorted(np.cumsum(cols.count), np.argmax(bad), "right"))
    lo = int(cols.count[:at].sum())
    sl = slice(lo, lo + int(cols.count[at]))
    seg = np.zeros(sl.stop - sl.start, SEGMENT_DTYPE)
    for f in SEGMENT_DTYPE.names or ():
        seg[f] = getattr(cols, f)[sl]
    why = _check_segments(seg, duration)
    raise LogError(path, "corrupt", f"{module} record {int(cols.rid[at])} is damaged: {why}")


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


def _add_sorted(a: np.ndarray, at: np.ndarray, value: int) -> None:
    """``np.add.at(a, at, value)`` for ``at`` in ascending order (records' starts, where their
    writes end), 20x faster: each run of equal places added to once, times its length."""
    if not len(at):
        return
    first = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    a[at[first]] += (value * np.diff(np.r_[first, len(at)])).astype(a.dtype)


def segments_table(
    modules: list[DxtColumns], names: NameTable, source: str, pid_of_rank: dict[int, int]
) -> pa.Table:
    """SEGMENTS from each DXT module's columns: a record batch per module, whose columns
    constant over it (rank, host, pid, module, source in a per-process log) share one buffer
    (see :class:`_Consts`). All batches share the log's dictionaries."""
    modules = [m for m in modules if len(m.count)]
    if not modules:
        return SEGMENTS.empty_table()
    hosts, mods, ops, sources = NameDict(), NameDict(), NameDict(), NameDict()
    w, r, src = ops("write"), ops("read"), sources(source)
    host_at = [np.array([hosts(x) for x in m.hosts], np.int32) for m in modules]
    # the files of all modules, each named once
    rids, inverse = np.unique(np.concatenate([m.rid for m in modules]), return_inverse=True)
    d_path = names.lookup(rids, lambda rid: f"<unknown record {rid}>")
    bounds = np.cumsum([0] + [len(m.rid) for m in modules])
    file_at = [inverse[a:b].astype(np.int32) for a, b in itertools.pairwise(bounds)]
    mod_at = [mods(m.module) for m in modules]
    d_host, d_mod, d_op, d_src = (x.array() for x in (hosts, mods, ops, sources))
    consts = _Consts()
    i32, i64 = pa.int32(), pa.int64()
    batches = []
    for m, h_at, f_at, m_at in zip(modules, host_at, file_at, mod_at, strict=True):
        n = len(m.offset)

        def per_segment(v: np.ndarray, type_: pa.DataType, m=m, n=n) -> pa.Array:
            if len(v) and (v == v[0]).all():
                return consts(v[0].item(), n, type_)
            return pa.array(np.repeat(v, m.count).astype(type_.to_pandas_dtype()))

        # the writes of a record come before its reads: +1 where a record's writes begin, -1
        # where they end, summed (one byte a segment, not three arrays of eight)
        at = np.cumsum(m.count) - m.count
        edge = np.zeros(n + 1, np.int8)
        _add_sorted(edge, at, 1)
        _add_sorted(edge, at + m.writes, -1)
        op = np.where(np.cumsum(edge[:n], dtype=np.int8) > 0, w, r).astype(np.int32)
        ranks = np.unique(m.rank)
        pid = np.array([pid_of_rank.get(int(x), -1) for x in ranks], np.int64)[
            np.searchsorted(ranks, m.rank)
        ]
        pid_col = (  # -1: not known, null
            pa.array(np.repeat(pid, m.count), mask=np.repeat(pid < 0, m.count))
            if (pid < 0).any()
            else per_segment(pid, i64)
        )
        batch = [
            per_segment(m.rank, i32),
            pa.DictionaryArray.from_arrays(per_segment(h_at[m.host], i32), d_host),
            pid_col,
            consts(None, n, i64),  # DXT does not record threads
            pa.array(np.repeat(m.rid, m.count)),
            pa.DictionaryArray.from_arrays(per_segment(f_at, i32), d_path),
            pa.DictionaryArray.from_arrays(consts(m_at, n, i32), d_mod),
            pa.DictionaryArray.from_arrays(op, d_op),
            *(pa.array(getattr(m, f)) for f in SEGMENT_DTYPE.names or ()),
            pa.DictionaryArray.from_arrays(consts(src, n, i32), d_src),
        ]
        batches.append(pa.RecordBatch.from_arrays(batch, schema=SEGMENTS))
    return pa.Table.from_batches(batches, schema=SEGMENTS)
