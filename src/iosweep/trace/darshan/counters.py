"""Module counters as columns: Darshan's per-record counters of POSIX, STDIO, MPI-IO, HDF5,
PnetCDF, DFS and DAOS mapped onto the COUNTERS table, and LUSTRE records' striping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from iosweep.trace.darshan.check import NameTable
from iosweep.trace.darshan.libutil import LogHandle, RecordError, backend, log_issue
from iosweep.trace.darshan.plausible import impossible_values, rate_beyond_ceiling
from iosweep.trace.logs import LogError
from iosweep.trace.schema import ACCESS_SLOTS, COUNTERS, SIZE_BINS, Issue

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
    **{f"access{i}_size": (f"POSIX_ACCESS{i}_ACCESS",) for i in ACCESS_SLOTS},
    **{f"access{i}_count": (f"POSIX_ACCESS{i}_COUNT",) for i in ACCESS_SLOTS},
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
    **{f"access{i}_size": (f"MPIIO_ACCESS{i}_ACCESS",) for i in ACCESS_SLOTS},
    **{f"access{i}_count": (f"MPIIO_ACCESS{i}_COUNT",) for i in ACCESS_SLOTS},
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


# Darshan's module name -> (record type, column map, iosweep's module name, counter prefix)
COUNTER_SPECS: dict[str, tuple[str, dict[str, tuple[str, ...]], str, str]] = {
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


#: a counter module's records: (record ids, ranks, counters, fcounters), a row per record
CounterRecords = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Known:
    """A counter column: its values, and where they are unknown (``unknown``: None where
    every value is known, as in most columns). numpy's masked arrays did this at 12 us each,
    50 columns a log, 544 logs a run."""

    data: np.ndarray
    unknown: np.ndarray | None = None

    @classmethod
    def where(cls, data: np.ndarray, unknown: np.ndarray) -> Known:
        return cls(data, unknown if unknown.any() else None)

    def filled(self, value) -> np.ndarray:
        """The values, ``value`` where unknown."""
        return self.data if self.unknown is None else np.where(self.unknown, value, self.data)

    def also_unknown(self, where: np.ndarray) -> Known:
        return Known.where(self.data, where if self.unknown is None else self.unknown | where)


def counter_records(h: LogHandle, module: str, idx: int) -> CounterRecords:
    """A counter module's records through libdarshan-util, a call per record (the regions
    :mod:`~iosweep.trace.darshan.bulk` does not read itself: older formats it upgrades)."""
    ctype = COUNTER_SPECS[module][0]
    ids, ranks, ints, floats = [], [], [], []
    try:
        for rec in h.records(idx, ctype):
            ids.append(int(rec.base_rec.id))
            ranks.append(int(rec.base_rec.rank))
            ints.append(np.frombuffer(h.ffi.buffer(rec.counters), np.int64).copy())
            floats.append(np.frombuffer(h.ffi.buffer(rec.fcounters), np.float64).copy())
    except RecordError:
        raise LogError(
            h.path,
            "corrupt",
            f"the {module} data are damaged (libdarshan-util failed after {len(ids)} records)",
        ) from None
    nc, nf = counter_widths(module)
    return (
        np.array(ids, np.uint64),
        np.array(ranks, np.int64),
        np.vstack(ints) if ints else np.zeros((0, nc), np.int64),
        np.vstack(floats) if floats else np.zeros((0, nf), np.float64),
    )


def counter_widths(module: str) -> tuple[int, int]:
    """How many counters and fcounters a record of ``module`` holds (libdarshan-util's)."""
    cb = backend()
    return len(cb.counter_names(module)), len(cb.fcounter_names(module))


def read_counters(
    path: Path, module: str, records: CounterRecords, file_names: Mapping[int, str]
) -> tuple[dict[str, Any] | None, list[Issue]]:
    """Per-record counters of a module of :data:`COUNTER_SPECS` as columns (None if the
    module has no records), and the impossible values among them, read as unknown
    (:func:`~iosweep.trace.darshan.plausible.impossible_values`; ``file_names``: the log's
    file names by record id)."""
    _ctype, cmap, name, prefix = COUNTER_SPECS[module]
    cb = backend()
    cnames = {n: i for i, n in enumerate(cb.counter_names(module))}
    fnames = {n: i for i, n in enumerate(cb.fcounter_names(module))}
    ids, ranks, by_record, f_by_record = records
    if not len(ids):
        return None, []
    # a row a counter, of the counters used alone (the records' copy, once): a counter of
    # the records as they lie is a stride of a record's size, a cache line a value, for every
    # operation on it (4 ms a log). The columns are views of it, so it holds nothing unused
    used = [n for srcs in cmap.values() for n in srcs if n in cnames]
    used += [f"{prefix}_{x}" for x in _SHARED_SUFFIXES.values() if f"{prefix}_{x}" in cnames]
    at = sorted({cnames[n] for n in used})
    cnames = {n: row for row, n in enumerate(np.array(cb.counter_names(module))[at].tolist())}
    c = np.ascontiguousarray(by_record[:, at].T)
    fused = {**_FCOUNTERS, **_SHARED_FSUFFIXES}.values()
    f_at = sorted(fnames[n] for n in {f"{prefix}_{x}" for x in fused} if n in fnames)
    fnames = {n: row for row, n in enumerate(np.array(cb.fcounter_names(module))[f_at].tolist())}
    f = np.ascontiguousarray(f_by_record[:, f_at].T)
    raw: dict[str, np.ndarray] = {
        n: c[cnames[n]] for srcs in cmap.values() for n in srcs if n in cnames
    }
    raw |= {
        f"{prefix}_{x}": f[fnames[f"{prefix}_{x}"]]
        for x in _FCOUNTERS.values()
        if f"{prefix}_{x}" in fnames
    }
    # each counter looked at (1 ms a log) only where some value anywhere is impossible
    lo = c.min(axis=1)  # each counter's least value: which may be unknown, or impossible
    suspect = bool((lo < -1).any()) or _suspect(f)
    issues = impossible_values(path, module, raw, ids, ranks, file_names) if suspect else []
    issues += rate_beyond_ceiling(path, prefix, raw, ids, file_names)
    cols: dict[str, Any] = {  # ids as arrays, counters as Known columns
        "file_id": ids.astype(np.uint64),
        "rank": ranks.astype(np.int64),
    }
    # Darshan writes -1 for a counter an older runtime did not collect: known where the first
    # of a column's counters is (a counter that is nowhere negative taken as it is)
    for col, srcs in cmap.items():
        at = [cnames[s] for s in srcs if s in cnames]
        if not at:  # a counter this library's module does not have: unknown (null)
            continue
        v = c[at[0]] if lo[at[0]] >= 0 else np.maximum(c[at[0]], 0)
        for i in at[1:]:
            v = v + (c[i] if lo[i] >= 0 else np.maximum(c[i], 0))
        cols[col] = Known(v, c[at[0]] < 0 if lo[at[0]] < 0 else None)
    for col, suffix in _FCOUNTERS.items():
        if f"{prefix}_{suffix}" not in fnames:  # H5F / PNETCDF_FILE: no read or write time
            continue
        v = f[fnames[f"{prefix}_{suffix}"]]
        cols[col] = Known.where(v, (v < 0) | ~np.isfinite(v))
    shared = cols["rank"] < 0
    # (none shared, as in every per-process log: left out, null, as masked wholly)
    both = ((c, cnames, _SHARED_SUFFIXES), (f, fnames, _SHARED_FSUFFIXES))
    for table, names, suffixes in both if shared.any() else ():
        for col, suffix in suffixes.items():
            if f"{prefix}_{suffix}" in names:
                v = table[names[f"{prefix}_{suffix}"]]
                cols[col] = Known.where(v, ~shared | (v < 0))
    # never opened (only stat'ed, say) leaves the open timestamp at 0: unknown, not time 0
    if "open_start" in cols:
        cols["open_start"] = cols["open_start"].also_unknown(cols["opens"].filled(0) == 0)
    if "close_end" in cols:
        cols["close_end"] = cols["close_end"].also_unknown(cols["close_end"].filled(0) <= 0)
    # one module a part: its name for every row as a read-only view, not n references
    cols["module"] = np.broadcast_to(np.array(name, object), (len(ids),))
    return cols, issues


def _suspect(f: np.ndarray) -> bool:
    """Whether any fcounter is negative (but -1) or not finite: a reduction over the block,
    the elementwise look only where its extremes say maybe."""
    if not f.size:
        return False
    lo, hi = f.min(), f.max()  # (NaN, where there is one)
    if np.isfinite(lo) and np.isfinite(hi) and lo >= 0:
        return False
    return bool((((f < 0) & (f != -1)) | ~np.isfinite(f)).any())


def counters_table(
    parts: list[dict[str, Any]],
    names: NameTable,
    source: str,
    host_of_rank: dict[int, str],
    pid_of_rank: dict[int, int],
) -> pa.Table | None:
    """COUNTERS of the modules' parts (a table per module, put together)."""
    if not parts:
        return None
    # one dictionary a column across the modules' parts (an Arrow IPC file, where ingest
    # spills a log, allows no other)
    tables = [_part_table(p, names, source, host_of_rank, pid_of_rank) for p in parts]
    return pa.concat_tables(tables).unify_dictionaries()


def _part_table(
    part: dict[str, Any],
    names: NameTable,
    source: str,
    host_of_rank: dict[int, str],
    pid_of_rank: dict[int, int],
) -> pa.Table:
    rank = np.asarray(part["rank"]).astype(np.int64)
    ids = np.asarray(part["file_id"]).astype(np.uint64)
    n = len(ids)
    uranks, rank_at = np.unique(rank, return_inverse=True)
    uids, id_at = np.unique(ids, return_inverse=True)
    out: dict[str, pa.Array] = {
        "rank": pa.array(rank.astype(np.int32)),
        "host": _coded([host_of_rank.get(int(r)) for r in uranks], rank_at),
        "pid": _take([pid_of_rank.get(int(r)) for r in uranks], pa.int64(), rank_at),
        "file_id": pa.array(ids),
        # DFS names a file relative to its container, and may leave it empty
        "path": pa.DictionaryArray.from_arrays(
            pa.array(id_at.astype(np.int32)),
            names.lookup(uids, lambda rid: f"<unnamed record {rid:x}>"),
        ),
        "module": _coded([str(part["module"][0])], np.zeros(n, np.int32)),
        "source": _coded([source], np.zeros(n, np.int32)),
    }
    for f in COUNTERS:
        if f.name in out:
            continue
        v = part.get(f.name)
        if v is None:  # what this module does not count (STDIO: stats, size bins) is null
            out[f.name] = pa.nulls(n, f.type)
        else:
            # (a mask with nothing masked, as most counters have, costs 5x the column)
            out[f.name] = pa.array(v.data, f.type, mask=v.unknown)
    return pa.Table.from_arrays([out[f.name] for f in COUNTERS], schema=COUNTERS)


def _coded(values: list[str | None], at: np.ndarray) -> pa.DictionaryArray:
    """``values[at]`` as a dictionary column holding the values used (None: null): built
    as the store keeps it, not cast there (a hash of every row)."""
    indices = pa.array(at.astype(np.int32, copy=False))
    if None not in values and len(set(values)) == len(values):  # (a value a rank, or one)
        return pa.DictionaryArray.from_arrays(indices, pa.array(values, pa.string()))
    return pa.array(values, pa.string()).dictionary_encode().take(indices)


def _take(values: list, type_: pa.DataType, at: np.ndarray) -> pa.Array:
    """``values[at]`` as an Arrow array, each distinct value converted once."""
    return pa.array(values, type_).take(pa.array(at.astype(np.int64)))


def read_lustre(h: LogHandle, path: Path, idx: int) -> tuple[dict[str, Any] | None, Issue | None]:
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
    except RecordError:
        h.reopen()
        return None, log_issue(
            path,
            "corrupt",
            f"the LUSTRE data are damaged (libdarshan-util failed after {len(ids)} records); "
            "iosweep reads only striping from it, and the modules it analyses are intact",
            "warning",
        )
    if not ids:
        return None, None
    size, count = np.array(sizes, np.int64), np.array(counts, np.int64)
    cols: dict[str, Any] = {
        "file_id": np.array(ids, np.uint64),
        "rank": np.array(ranks, np.int64),
        "stripe_size": Known.where(size, size < 0),
        "stripe_count": Known.where(count, count < 0),
    }
    cols["module"] = np.broadcast_to(np.array("LUSTRE", object), (len(ids),))
    return cols, None
