"""Read one Darshan log into a :class:`~iosweep.trace.logs.ProcessLog`, DXT segments in bulk.

PyDarshan's own DXT path (``DarshanReport.mod_read_all_dxt_records``) builds a Python dict
per segment, which is slow and large for millions of segments. Here each DXT record is
fetched through PyDarshan's cffi binding of libdarshan-util (``darshan_log_get_record``)
and its ``segment_info`` array goes to numpy/Arrow as one buffer: no Python per segment.

libdarshan-util trusts the file. On a damaged log it can trip an ``assert`` (abort) while
parsing name records, or scan past its buffer for the exe/mount text of the job record.
So before any byte goes to C, :func:`~iosweep.trace.darshan.check.check_log` validates the
log in Python: the header,
every region of its region map against the file size (overlap, truncation), and the small
job and name-record regions, which it decompresses with Python's zlib/bz2. A module region
cut off by truncation is never handed to C; it is reported as lost. The bulk module regions
are left to C, whose record reader bounds every read by what the compressed stream yields
and whose zlib stream checksums catch flipped bytes; its output is checked afterwards
(counts, ranks, times). :func:`read_darshan_log_isolated` reads a log in a child process
for callers that want the last guarantee too.
"""

from __future__ import annotations

import multiprocessing as mp
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from iosweep.trace.darshan.check import JOB_RECORD_SIZE, LogLayout, check_log
from iosweep.trace.logs import LogError, ProcessLog
from iosweep.trace.schema import COUNTERS, SEGMENTS, SIZE_BINS, Issue

#: numpy view of libdarshan-util's ``segment_info`` (darshan-dxt-log-format.h)
SEGMENT_DTYPE = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])
_DXT_MODULES = {"DXT_POSIX": "POSIX", "DXT_MPIIO": "MPIIO"}
# darshan-runtime names a log <user>_<exe>_id<jobid>-<pid>_<month>-<day>-<secs>-<hash>_<n>
_PID_IN_NAME = re.compile(r"_id(\d+)-(\d+)_")
# a DXT time this far outside the log's own run is garbage, not a late write (seconds)
_TIME_SLACK = 86400.0

# ----------------------------------------------------------------------------------------
# C side: PyDarshan's cffi binding of libdarshan-util
# ----------------------------------------------------------------------------------------


def backend():
    # imported lazily: loading libdarshan-util and its cdef costs a few hundred ms
    from darshan.backend import cffi_backend as cb

    if cb.ffi.sizeof("segment_info") != SEGMENT_DTYPE.itemsize:
        raise RuntimeError("libdarshan-util's segment_info differs from SEGMENT_DTYPE")
    return cb


class _RecordError(Exception):
    """darshan_log_get_record returned an error in the middle of a module region."""


class _Handle:
    """An open libdarshan-util log handle."""

    def __init__(self, path: Path):
        self.cb = backend()
        self.ffi, self.lib = self.cb.ffi, self.cb.libdutil
        self.path = path
        self.h = self.lib.darshan_log_open(str(path).encode())
        if self.h == self.ffi.NULL:
            raise LogError(path, "corrupt", "libdarshan-util cannot open the log")

    def close(self) -> None:
        if self.h is not None:
            self.lib.darshan_log_close(self.h)
            self.h = None

    def reopen(self) -> None:
        self.close()
        self.h = self.lib.darshan_log_open(str(self.path).encode())
        if self.h == self.ffi.NULL:
            self.h = None
            raise LogError(self.path, "corrupt", "libdarshan-util cannot reopen the log")

    def job(self) -> dict[str, Any]:
        ffi, lib = self.ffi, self.lib
        job = ffi.new("struct darshan_job *")
        if lib.darshan_log_get_job(self.h, job) < 0:
            raise LogError(self.path, "corrupt", "libdarshan-util cannot read the job record")
        exe = ffi.new("char[]", JOB_RECORD_SIZE)
        lib.darshan_log_get_exe(self.h, exe)
        meta = {}
        for line in ffi.string(job.metadata, 1024).decode("utf-8", "replace").splitlines():
            k, sep, v = line.partition("=")
            if sep:
                meta[k] = v
        mounts = []
        mnts = ffi.new("struct darshan_mnt_info **")
        cnt = ffi.new("int *")
        if lib.darshan_log_get_mounts(self.h, mnts, cnt) == 0 and cnt[0] > 0:
            mounts = [
                (
                    ffi.string(mnts[0][i].mnt_path).decode("utf-8", "replace"),
                    ffi.string(mnts[0][i].mnt_type).decode("utf-8", "replace"),
                )
                for i in range(cnt[0])
            ]
            lib.darshan_free(mnts[0])
        return {
            "uid": int(job.uid),
            "start": int(job.start_time_sec) + int(job.start_time_nsec) * 1e-9,
            "end": int(job.end_time_sec) + int(job.end_time_nsec) * 1e-9,
            "nprocs": int(job.nprocs),
            "jobid": int(job.jobid),
            "exe": ffi.string(exe).decode("utf-8", "replace").strip(),
            "metadata": meta,
            "mounts": mounts,
        }

    def modules(self) -> dict[str, dict[str, Any]]:
        """name -> {idx, len, ver, partial}, in libdarshan-util's module numbering."""
        ffi = self.ffi
        mods = ffi.new("struct darshan_mod_info **")
        cnt = ffi.new("int *")
        self.lib.darshan_log_get_modules(self.h, mods, cnt)
        out = {}
        for i in range(cnt[0]):
            m = mods[0][i]
            out[ffi.string(m.name).decode()] = {
                "idx": int(m.idx),
                "len": int(m.len),
                "ver": int(m.ver),
                "partial": bool(m.partial_flag),
            }
        if cnt[0]:
            self.lib.darshan_free(mods[0])
        return out

    def records(self, idx: int, ctype: str):
        """Yield each record of module ``idx`` as a ``ctype`` pointer, freed after use."""
        buf = self.ffi.new("void **")
        while True:
            buf[0] = self.ffi.NULL
            r = self.lib.darshan_log_get_record(self.h, idx, buf)
            if r == 0:
                return
            if r < 0:
                raise _RecordError
            try:
                yield self.ffi.cast(ctype, buf[0])
            finally:
                self.lib.darshan_free(buf[0])


class _Dict:
    """Values of one dictionary-encoded column, shared by every batch of a log."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        return self.values.setdefault(value, len(self.values))

    def array(self) -> pa.Array:
        return pa.array(list(self.values), pa.string())


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
class _DxtPart:
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


def _read_dxt(h: _Handle, module: str, idx: int, duration: float) -> list[_DxtPart]:
    ffi = h.ffi
    head = ffi.sizeof("struct dxt_file_record")
    parts: list[_DxtPart] = []
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
            bad = _check_segments(seg, duration)
            if bad:
                raise LogError(h.path, "corrupt", f"{module} record {rid} is damaged: {bad}")
            parts.append(
                _DxtPart(
                    module=_DXT_MODULES[module],
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
    except _RecordError:
        raise LogError(
            h.path,
            "corrupt",
            f"the {module} data are damaged (libdarshan-util failed after {len(parts)} records)",
        ) from None
    return parts


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


def _segments_table(
    parts: list[_DxtPart], names: dict[int, str], source: str, pid_of_rank: dict[int, int]
) -> pa.Table:
    """SEGMENTS from the DXT parts (consumed: each part is dropped once it is in a batch).

    A large record becomes one record batch whose numeric columns are the part's arrays
    (zero-copy) and whose constant columns share buffers (see :class:`_Consts`); small
    records are grouped so a log of many files does not make many tiny batches. All
    batches share the log's dictionaries.
    """
    if not parts:
        return SEGMENTS.empty_table()
    hosts, paths, modules, ops, sources = _Dict(), _Dict(), _Dict(), _Dict(), _Dict()
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


# COUNTERS columns from each module's counter names (libdarshan-util upgrades old records
# to the current layout, so the current names index records of every format version)
_POSIX_MAP = {
    "opens": ("POSIX_OPENS",),
    "stats": ("POSIX_STATS",),
    "seeks": ("POSIX_SEEKS",),
    "fsyncs": ("POSIX_FSYNCS", "POSIX_FDSYNCS"),
    "reads": ("POSIX_READS",),
    "writes": ("POSIX_WRITES",),
    "bytes_read": ("POSIX_BYTES_READ",),
    "bytes_written": ("POSIX_BYTES_WRITTEN",),
    "max_byte_read": ("POSIX_MAX_BYTE_READ",),
    "max_byte_written": ("POSIX_MAX_BYTE_WRITTEN",),
    "mem_not_aligned": ("POSIX_MEM_NOT_ALIGNED",),
    "file_not_aligned": ("POSIX_FILE_NOT_ALIGNED",),
    "file_alignment": ("POSIX_FILE_ALIGNMENT",),
    "seq_reads": ("POSIX_SEQ_READS",),
    "seq_writes": ("POSIX_SEQ_WRITES",),
    "consec_reads": ("POSIX_CONSEC_READS",),
    "consec_writes": ("POSIX_CONSEC_WRITES",),
    **{f"size_read_{b}": (f"POSIX_SIZE_READ_{b.upper()}",) for b in SIZE_BINS},
    **{f"size_write_{b}": (f"POSIX_SIZE_WRITE_{b.upper()}",) for b in SIZE_BINS},
}
_STDIO_MAP = {
    "opens": ("STDIO_OPENS", "STDIO_FDOPENS"),
    "seeks": ("STDIO_SEEKS",),
    "fsyncs": ("STDIO_FLUSHES",),
    "reads": ("STDIO_READS",),
    "writes": ("STDIO_WRITES",),
    "bytes_read": ("STDIO_BYTES_READ",),
    "bytes_written": ("STDIO_BYTES_WRITTEN",),
    "max_byte_read": ("STDIO_MAX_BYTE_READ",),
    "max_byte_written": ("STDIO_MAX_BYTE_WRITTEN",),
}
_MPIIO_MAP = {
    "opens": ("MPIIO_INDEP_OPENS", "MPIIO_COLL_OPENS"),
    "fsyncs": ("MPIIO_SYNCS",),
    "reads": ("MPIIO_INDEP_READS", "MPIIO_COLL_READS", "MPIIO_SPLIT_READS", "MPIIO_NB_READS"),
    "writes": (
        "MPIIO_INDEP_WRITES",
        "MPIIO_COLL_WRITES",
        "MPIIO_SPLIT_WRITES",
        "MPIIO_NB_WRITES",
    ),
    "collective_reads": ("MPIIO_COLL_READS",),
    "collective_writes": ("MPIIO_COLL_WRITES",),
    "nonblocking_reads": ("MPIIO_NB_READS",),
    "nonblocking_writes": ("MPIIO_NB_WRITES",),
    "bytes_read": ("MPIIO_BYTES_READ",),
    "bytes_written": ("MPIIO_BYTES_WRITTEN",),
    **{f"size_read_{b}": (f"MPIIO_SIZE_READ_AGG_{b.upper()}",) for b in SIZE_BINS},
    **{f"size_write_{b}": (f"MPIIO_SIZE_WRITE_AGG_{b.upper()}",) for b in SIZE_BINS},
}
# Layers other than POSIX / STDIO / MPI-IO. HDF5 and PnetCDF sit above MPI-IO or POSIX (their
# bytes are counted again below them); DFS is DAOS's file interface, a storage layer of its
# own where a job reaches DAOS without POSIX; the DAOS module's object calls lie under DFS.
_H5F_MAP: dict[str, tuple[str, ...]] = {"opens": ("H5F_OPENS",), "fsyncs": ("H5F_FLUSHES",)}
_H5D_MAP: dict[str, tuple[str, ...]] = {
    "opens": ("H5D_OPENS",),
    "fsyncs": ("H5D_FLUSHES",),
    "reads": ("H5D_READS",),
    "writes": ("H5D_WRITES",),
    "bytes_read": ("H5D_BYTES_READ",),
    "bytes_written": ("H5D_BYTES_WRITTEN",),
    **{f"size_read_{b}": (f"H5D_SIZE_READ_AGG_{b.upper()}",) for b in SIZE_BINS},
    **{f"size_write_{b}": (f"H5D_SIZE_WRITE_AGG_{b.upper()}",) for b in SIZE_BINS},
}
_PNETCDF_FILE_MAP = {
    "opens": ("PNETCDF_FILE_CREATES", "PNETCDF_FILE_OPENS"),
    "fsyncs": ("PNETCDF_FILE_SYNCS",),
    "bytes_read": ("PNETCDF_FILE_BYTES_READ",),
    "bytes_written": ("PNETCDF_FILE_BYTES_WRITTEN",),
}
_PNETCDF_VAR_MAP = {
    "opens": ("PNETCDF_VAR_OPENS",),
    "reads": ("PNETCDF_VAR_INDEP_READS", "PNETCDF_VAR_COLL_READS", "PNETCDF_VAR_NB_READS"),
    "writes": ("PNETCDF_VAR_INDEP_WRITES", "PNETCDF_VAR_COLL_WRITES", "PNETCDF_VAR_NB_WRITES"),
    "collective_reads": ("PNETCDF_VAR_COLL_READS",),
    "collective_writes": ("PNETCDF_VAR_COLL_WRITES",),
    "bytes_read": ("PNETCDF_VAR_BYTES_READ",),
    "bytes_written": ("PNETCDF_VAR_BYTES_WRITTEN",),
}
_DFS_MAP = {
    "opens": ("DFS_OPENS", "DFS_GLOBAL_OPENS"),
    "stats": ("DFS_STATS", "DFS_GET_SIZES"),
    # DFS_NB_READS / _WRITES count the non-blocking ones among these again
    "reads": ("DFS_READS", "DFS_READXS"),
    "writes": ("DFS_WRITES", "DFS_WRITEXS"),
    "bytes_read": ("DFS_BYTES_READ",),
    "bytes_written": ("DFS_BYTES_WRITTEN",),
    **{f"size_read_{b}": (f"DFS_SIZE_READ_{b.upper()}",) for b in SIZE_BINS},
    **{f"size_write_{b}": (f"DFS_SIZE_WRITE_{b.upper()}",) for b in SIZE_BINS},
}
_DAOS_MAP = {
    "opens": ("DAOS_OBJ_OPENS", "DAOS_ARRAY_OPENS", "DAOS_KV_OPENS"),
    "stats": ("DAOS_ARRAY_STATS", "DAOS_ARRAY_GET_SIZES"),
    "reads": ("DAOS_OBJ_FETCHES", "DAOS_ARRAY_READS", "DAOS_KV_GETS"),
    "writes": ("DAOS_OBJ_UPDATES", "DAOS_ARRAY_WRITES", "DAOS_KV_PUTS"),
    "bytes_read": ("DAOS_BYTES_READ",),
    "bytes_written": ("DAOS_BYTES_WRITTEN",),
    **{f"size_read_{b}": (f"DAOS_SIZE_READ_{b.upper()}",) for b in SIZE_BINS},
    **{f"size_write_{b}": (f"DAOS_SIZE_WRITE_{b.upper()}",) for b in SIZE_BINS},
}
# what Darshan keeps of each rank when it reduces a file shared by all ranks to one record
# (rank -1); iosweep keeps them for such records only
_SHARED_SUFFIXES = {
    "fastest_rank": "FASTEST_RANK",
    "fastest_rank_bytes": "FASTEST_RANK_BYTES",
    "slowest_rank": "SLOWEST_RANK",
    "slowest_rank_bytes": "SLOWEST_RANK_BYTES",
}
_FCOUNTERS = {
    "read_time": "F_READ_TIME",
    "write_time": "F_WRITE_TIME",
    "meta_time": "F_META_TIME",
    "open_start": "F_OPEN_START_TIMESTAMP",
    "close_end": "F_CLOSE_END_TIMESTAMP",
}
_SHARED_FSUFFIXES = {
    "fastest_rank_time": "F_FASTEST_RANK_TIME",
    "slowest_rank_time": "F_SLOWEST_RANK_TIME",
    "variance_rank_time": "F_VARIANCE_RANK_TIME",
    "variance_rank_bytes": "F_VARIANCE_RANK_BYTES",
}
_ID_COLUMNS = ("rank", "host", "pid", "file_id", "path", "module", "source")
# Darshan's module name -> (record type, column map, iosweep's module name, counter prefix)
_COUNTER_SPECS: dict[str, tuple[str, dict[str, tuple[str, ...]], str, str]] = {
    "POSIX": ("struct darshan_posix_file *", _POSIX_MAP, "POSIX", "POSIX"),
    "STDIO": ("struct darshan_stdio_file *", _STDIO_MAP, "STDIO", "STDIO"),
    "MPI-IO": ("struct darshan_mpiio_file *", _MPIIO_MAP, "MPIIO", "MPIIO"),
    "H5F": ("struct darshan_hdf5_file *", _H5F_MAP, "H5F", "H5F"),
    "H5D": ("struct darshan_hdf5_dataset *", _H5D_MAP, "H5D", "H5D"),
    "PNETCDF_FILE": (
        "struct darshan_pnetcdf_file *",
        _PNETCDF_FILE_MAP,
        "PNETCDF_FILE",
        "PNETCDF_FILE",
    ),
    "PNETCDF_VAR": ("struct darshan_pnetcdf_var *", _PNETCDF_VAR_MAP, "PNETCDF_VAR", "PNETCDF_VAR"),
    "DFS": ("struct darshan_dfs_file *", _DFS_MAP, "DFS", "DFS"),
    "DAOS": ("struct darshan_daos_object *", _DAOS_MAP, "DAOS", "DAOS"),
}


def _read_counters(h: _Handle, module: str, idx: int) -> dict[str, Any] | None:
    """Per-record counters of a module of :data:`_COUNTER_SPECS` as columns (None if the
    module has no records)."""
    ctype, cmap, name, prefix = _COUNTER_SPECS[module]
    cnames = {n: i for i, n in enumerate(h.cb.counter_names(module))}
    fnames = {n: i for i, n in enumerate(h.cb.fcounter_names(module))}
    ids, ranks, ints, floats = [], [], [], []
    try:
        for rec in h.records(idx, ctype):
            ids.append(int(rec.base_rec.id))
            ranks.append(int(rec.base_rec.rank))
            ints.append(np.frombuffer(h.ffi.buffer(rec.counters), np.int64).copy())
            floats.append(np.frombuffer(h.ffi.buffer(rec.fcounters), np.float64).copy())
    except _RecordError:
        raise LogError(
            h.path,
            "corrupt",
            f"the {module} data are damaged (libdarshan-util failed after {len(ids)} records)",
        ) from None
    if not ids:
        return None
    c, f = np.vstack(ints), np.vstack(floats)
    cols: dict[str, Any] = {  # ids as arrays, counters as masked arrays
        "file_id": np.array(ids, np.uint64),
        "rank": np.array(ranks, np.int64),
    }
    for col, srcs in cmap.items():
        vals = [c[:, cnames[s]] for s in srcs if s in cnames]
        # Darshan writes -1 for a counter an older runtime did not collect
        v = np.sum([np.where(x < 0, 0, x) for x in vals], axis=0)
        known = np.any([x >= 0 for x in vals[:1]], axis=0)
        cols[col] = np.ma.masked_array(v, mask=~known)
    for col, suffix in _FCOUNTERS.items():
        if f"{prefix}_{suffix}" not in fnames:  # H5F / PNETCDF_FILE: no read or write time
            continue
        v = f[:, fnames[f"{prefix}_{suffix}"]]
        cols[col] = np.ma.masked_array(v, mask=v < 0)
    shared = cols["rank"] < 0
    for table, names, suffixes in ((c, cnames, _SHARED_SUFFIXES), (f, fnames, _SHARED_FSUFFIXES)):
        for col, suffix in suffixes.items():
            if f"{prefix}_{suffix}" in names:
                v = table[:, names[f"{prefix}_{suffix}"]]
                cols[col] = np.ma.masked_array(v, mask=~shared | (v < 0))
    # never opened (only stat'ed, say) leaves the open timestamp at 0: unknown, not time 0
    if "open_start" in cols:
        cols["open_start"].mask |= cols["opens"].filled(0) == 0
    if "close_end" in cols:
        cols["close_end"].mask |= cols["close_end"].filled(0) <= 0
    for f in COUNTERS:  # what this module does not count (STDIO: stats, size bins) is null
        if f.name not in cols and f.name not in _ID_COLUMNS:
            dtype = np.float64 if pa.types.is_floating(f.type) else np.int64
            cols[f.name] = np.ma.masked_all(len(ids), dtype)
    cols["module"] = np.array([name] * len(ids), object)
    return cols


def _counters_table(
    parts: list[dict[str, np.ndarray]],
    names: dict[int, str],
    source: str,
    host_of_rank: dict[int, str],
    pid_of_rank: dict[int, int],
) -> pa.Table | None:
    if not parts:
        return None
    cols = {k: np.ma.concatenate([p[k] for p in parts]) for k in parts[0] if k != "module"}
    module = np.concatenate([p["module"] for p in parts])
    rank = cols.pop("rank").filled(-1).astype(np.int64)
    ids = cols.pop("file_id").filled(0).astype(np.uint64)
    out: dict[str, pa.Array] = {
        "rank": pa.array(rank.astype(np.int32)),
        "host": pa.array([host_of_rank.get(int(r)) for r in rank], pa.string()),
        "pid": pa.array([pid_of_rank.get(int(r)) for r in rank], pa.int64()),
        "file_id": pa.array(ids),
        # DFS names a file relative to its container, and may leave it empty
        "path": pa.array(
            [names.get(int(i)) or f"<unnamed record {int(i):x}>" for i in ids], pa.string()
        ),
        "module": pa.array(module.tolist(), pa.string()),
        "source": pa.array([source] * len(ids), pa.string()),
    }
    for k, v in cols.items():
        out[k] = pa.array(v.data, mask=np.ma.getmaskarray(v))
    for f in COUNTERS:
        if f.name not in out:
            out[f.name] = pa.nulls(len(ids), f.type)
    t = pa.table({f.name: out[f.name] for f in COUNTERS})
    return t.cast(COUNTERS)


def _check_region(h: _Handle, path: Path, module: str, idx: int) -> Issue | None:
    """Decode every record of a module iosweep does not analyse (LUSTRE, HEATMAP, APMPI ...):
    damage there must be found too, though the figures do not depend on it."""
    n = 0
    try:
        for _ in h.records(idx, "void *"):
            n += 1
    except _RecordError:
        h.reopen()  # see _read: the inflate stream stays broken after an error
        return _issue(
            path,
            "corrupt",
            f"the {module} data are damaged (libdarshan-util failed after {n} records); "
            "iosweep does not analyse that module, and the modules it reads are intact",
            "warning",
        )
    return None


def _read_lustre(h: _Handle, path: Path, idx: int) -> tuple[dict[str, Any] | None, Issue | None]:
    """LUSTRE records (each file's striping: no I/O) as counter rows of module LUSTRE with
    their first layout component's stripe size and count; damage is a warning, as in
    :func:`_check_region`."""
    ids, ranks, sizes, counts = [], [], [], []
    try:
        for rec in h.records(idx, "struct darshan_lustre_record *"):
            ids.append(int(rec.base_rec.id))
            ranks.append(int(rec.base_rec.rank))
            # LUSTRE_COMP_STRIPE_SIZE, LUSTRE_COMP_STRIPE_COUNT of the first component
            first = rec.comps[0].counters if rec.num_comps > 0 else None
            sizes.append(int(first[0]) if first is not None else -1)
            counts.append(int(first[1]) if first is not None else -1)
    except _RecordError:
        h.reopen()
        return None, _issue(
            path,
            "corrupt",
            f"the LUSTRE data are damaged (libdarshan-util failed after {len(ids)} records); "
            "iosweep reads only striping from it, and the modules it analyses are intact",
            "warning",
        )
    if not ids:
        return None, None
    cols: dict[str, Any] = {
        "file_id": np.array(ids, np.uint64),
        "rank": np.array(ranks, np.int64),
        "stripe_size": np.ma.masked_less(np.array(sizes, np.int64), 0),
        "stripe_count": np.ma.masked_less(np.array(counts, np.int64), 0),
    }
    for f in COUNTERS:
        if f.name not in cols and f.name not in _ID_COLUMNS:
            dtype = np.float64 if pa.types.is_floating(f.type) else np.int64
            cols[f.name] = np.ma.masked_all(len(ids), dtype)
    cols["module"] = np.array(["LUSTRE"] * len(ids), object)
    return cols, None


def _issue(path: Path, kind: str, message: str, severity: str = "error") -> Issue:
    return Issue(source=str(path), kind=kind, message=message, severity=severity)


def read_darshan_log(path: Path | str) -> ProcessLog:
    """Decode one Darshan log (any format version from 3.00 on) into a :class:`ProcessLog`.

    Segments carry times in seconds from the log's own start (``ProcessLog.start``); ``rank``
    is the rank the log records (0 for every non-MPI log), ``pid`` the process id where the
    log knows it. Raises :class:`LogError` when nothing usable can be read (kinds
    ``unreadable``, ``unsupported``, ``truncated``, ``corrupt``, ``empty``); damage confined
    to some modules keeps the rest and is reported in ``ProcessLog.issues`` (kinds
    ``truncated``, ``corrupt``, ``partial-dxt``, ``partial-counters``, ``no-dxt``) with the
    affected modules in ``ProcessLog.incomplete``.
    """
    path = Path(path)
    layout = check_log(path)
    if not any(k.startswith("slot") for k in layout.regions):
        raise LogError(path, "empty", "no I/O recorded: the log holds job metadata only")
    h = _Handle(path)
    try:
        return _read(path, layout, h)
    finally:
        h.close()


def _read(path: Path, layout: LogLayout, h: _Handle) -> ProcessLog:
    job = h.job()
    mods = h.modules()
    # libdarshan-util renumbers the slots of older formats (modules were added over time)
    # but keeps their order, so the i-th mapped header slot is the i-th module it lists
    slots = sorted(int(k[4:]) for k in layout.regions if k.startswith("slot"))
    by_idx = sorted(mods, key=lambda m: mods[m]["idx"])
    slot_name = dict(zip(slots, by_idx, strict=False)) if len(slots) == len(by_idx) else {}
    lost = [slot_name.get(s, f"slot {s}") for s in layout.lost_slots]
    issues: list[Issue] = []
    incomplete: list[str] = []
    if lost:
        if not slot_name:  # cannot tell which modules survived: trust none of them
            raise LogError(
                path,
                "truncated",
                f"file is {layout.size} bytes but its header maps {layout.mapped_end}",
            )
        issues.append(
            _issue(
                path,
                "truncated",
                f"file is {layout.size} bytes but its header maps {layout.mapped_end}: "
                f"the {', '.join(lost)} data are cut off",
            )
        )
        incomplete.extend(lost)

    duration = max(job["end"] - job["start"], 0.0)
    dxt_parts: list[_DxtPart] = []
    counter_parts: list[dict[str, Any]] = []
    read_ok: list[str] = []
    for name in by_idx:
        m = mods[name]
        if name in lost:
            continue
        if name == "LUSTRE":
            part, problem = _read_lustre(h, path, m["idx"])
            counter_parts.extend([part] if part is not None else [])
            issues.extend([problem] if problem is not None else [])
            continue
        if name not in _DXT_MODULES and name not in _COUNTER_SPECS:
            if (problem := _check_region(h, path, name, m["idx"])) is not None:
                issues.append(problem)
            continue
        try:
            if name in _DXT_MODULES:
                dxt_parts.extend(_read_dxt(h, name, m["idx"], duration))
            else:
                part = _read_counters(h, name, m["idx"])
                if part is not None:
                    counter_parts.append(part)
            read_ok.append(name)
        except LogError as e:
            issues.append(e.as_issue())
            incomplete.append(name)
            # libdarshan-util's inflate stream stays broken after an error; a fresh handle
            # lets the next module's region be read
            h.reopen()
            continue
        if m["partial"]:
            dxt = name in _DXT_MODULES
            issues.append(
                _issue(
                    path,
                    "partial-dxt" if dxt else "partial-counters",
                    f"the {name} module ran out of memory while tracing: "
                    + (
                        "the trace lacks the operations after that point"
                        if dxt
                        else "files opened after that point have no counters"
                    ),
                )
            )
            incomplete.append(name)
    if not read_ok and incomplete:
        # nothing usable: report the first problem as the log's error
        first = next(i for i in issues if i.kind in ("corrupt", "truncated"))
        raise LogError(path, first.kind, first.message)

    # reads or writes that DXT would have traced (a process that only stat'ed or opened
    # files, like a short-lived `uname`, has no DXT records even with tracing on)
    rw = {
        p["module"][0]: int(p["reads"].filled(0).sum() + p["writes"].filled(0).sum())
        for p in counter_parts
    }
    traced = rw.get("POSIX", 0) > 0 or "MPI-IO" in mods
    if (traced or rw.get("STDIO", 0) > 0) and not any(n in mods for n in _DXT_MODULES):
        why = (
            "DXT tracing was off (DXT_ENABLE_IO_TRACE=1 turns it on)"
            if traced
            else "its reads and writes are STDIO, which DXT does not trace"
        )
        issues.append(
            _issue(
                path,
                "no-dxt",
                f"no DXT trace in this log ({why}): counters only, no per-operation segments",
                "warning",
            )
        )

    nprocs = job["nprocs"]
    mpi = nprocs > 1
    pid = _pid_of(path, job["jobid"], mpi)
    host_of_rank: dict[int, str] = {}
    for p in dxt_parts:
        host_of_rank.setdefault(p.rank, p.host)
    # a per-process log is rank 0 of itself; in an MPI log only rank 0's pid may be known
    pid_of_rank = {0: pid} if pid >= 0 else {}
    source = path.name
    segments = _segments_table(dxt_parts, layout.names, source, pid_of_rank)
    counters = _counters_table(counter_parts, layout.names, source, host_of_rank, pid_of_rank)
    fork_parent = job["metadata"].get("fork_parent")
    return ProcessLog(
        source=path,
        tracer="darshan",
        pid=pid,
        exe=job["exe"],
        start=job["start"],
        end=job["end"],
        segments=segments,
        host=host_of_rank.get(0) or next(iter(host_of_rank.values()), None),
        jobid=job["jobid"],
        nprocs=nprocs,
        mpi=mpi,
        version=layout.version,
        counters=counters,
        incomplete=incomplete,
        issues=issues,
        ppid=int(fork_parent) if fork_parent and fork_parent.isdigit() else None,
        header={
            "uid": job["uid"],
            "lib_ver": job["metadata"].get("lib_ver", ""),
            "metadata": job["metadata"],
            "mounts": job["mounts"],
            "modules": {k: {"ver": v["ver"], "partial": v["partial"]} for k, v in mods.items()},
        },
    )


def _pid_of(path: Path, jobid: int, mpi: bool) -> int:
    """The pid from the log's file name (an MPI job's: rank 0's); without one, the job id of
    a non-MPI log (its pid when no scheduler set one), -1 (unknown) for an MPI job, whose job
    id is the scheduler's (names before Darshan 3.2 hold no pid)."""
    m = _PID_IN_NAME.search(path.name)
    if m:
        return int(m.group(2))
    return -1 if mpi else int(jobid)


def _child(path: str, conn) -> None:
    try:
        conn.send(("ok", read_darshan_log(path)))
    except LogError as e:
        conn.send(("err", (e.path, e.kind, e.message)))
    except Exception as e:  # report, do not hide: the parent turns it into a LogError
        conn.send(("exc", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def read_darshan_log_isolated(path: Path | str, timeout: float = 600.0) -> ProcessLog:
    """:func:`read_darshan_log` in a child process, so that even a crash in C is a LogError."""
    path = Path(path)
    ctx = mp.get_context("spawn")  # no fork: the parent may hold threads (Arrow's pools)
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(str(path), send), daemon=True)
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout):
            proc.kill()
            raise LogError(path, "unreadable", f"reading the log took more than {timeout:.0f} s")
        status, payload = recv.recv()
    except EOFError:
        proc.join()
        raise LogError(
            path,
            "corrupt",
            f"libdarshan-util crashed on this log (reader exit code {proc.exitcode})",
        ) from None
    finally:
        recv.close()
        proc.join(5)
    if status == "ok":
        return payload
    if status == "err":
        raise LogError(*payload)
    raise LogError(path, "corrupt", f"reading the log failed: {payload}")
