"""Write real-format Darshan logs (format 3.41, as darshan-runtime 3.5 does) through
libdarshan-util's own writer: for merged logs, tests and benchmarks."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.trace.darshan.libutil import SEGMENT_DTYPE, backend

# ----------------------------------------------------------------------------------------
# Writing: real-format logs through libdarshan-util's writer (benchmarks, tests)
# ----------------------------------------------------------------------------------------

# The writer side of libdarshan-util 3.5 (darshan-logutils.h, darshan-log-format.h,
# darshan-dxt-log-format.h, uthash.h); PyDarshan's cdef declares only the reader side.
_WRITER_CDEF = """
struct darshan_job {
    int64_t uid; int64_t start_time_sec; int64_t start_time_nsec;
    int64_t end_time_sec; int64_t end_time_nsec; int64_t nprocs; int64_t jobid;
    char metadata[1024];
};
struct darshan_mnt_info { char mnt_type[3015]; char mnt_path[3015]; };
typedef struct UT_hash_handle {
    void *tbl; void *prev; void *next; void *hh_prev; void *hh_next;
    void *key; unsigned keylen; unsigned hashv;
} UT_hash_handle;
struct darshan_name_record_ref { void *name_record; UT_hash_handle hlink; };
struct darshan_base_record { uint64_t id; int64_t rank; };
struct dxt_file_record {
    struct darshan_base_record base_rec; int64_t shared_record; char hostname[64];
    int64_t write_count; int64_t read_count;
};
struct darshan_posix_file {
    struct darshan_base_record base_rec; int64_t counters[69]; double fcounters[17];
};
struct darshan_heatmap_record {
    struct darshan_base_record base_rec; double bin_width_seconds; int64_t nbins;
    int64_t *write_bins; int64_t *read_bins;
};
struct darshan_mod_logutil_funcs {
    int (*log_get_record)(void *fd, void **buf);
    int (*log_put_record)(void *fd, void *buf);
    void (*log_print_record)(void *rec, char *file_name, char *mnt_pt, char *fs_type);
    void (*log_print_description)(int ver);
    void (*log_print_diff)(void *rec1, char *name1, void *rec2, char *name2);
    void (*log_agg_records)(void *rec, void *agg_rec, int init_flag);
    int (*log_sizeof_record)(void *rec);
    int (*log_record_metrics)(void *rec, uint64_t *rec_id, int64_t *r_bytes, int64_t *w_bytes,
        int64_t *max_offset, double *io_total_time, double *md_only_time, double *rw_only_time,
        int64_t *rank, int64_t *nprocs);
};
/* indexed by module id, NULL where the library has no functions for a module */
extern struct darshan_mod_logutil_funcs *mod_logutils[18];
extern struct darshan_mod_logutil_funcs posix_logutils;
extern struct darshan_mod_logutil_funcs mpiio_logutils;
extern struct darshan_mod_logutil_funcs hdf5_file_logutils;
extern struct darshan_mod_logutil_funcs hdf5_dataset_logutils;
extern struct darshan_mod_logutil_funcs pnetcdf_file_logutils;
extern struct darshan_mod_logutil_funcs pnetcdf_var_logutils;
extern struct darshan_mod_logutil_funcs stdio_logutils;
extern struct darshan_mod_logutil_funcs dxt_posix_logutils;
extern struct darshan_mod_logutil_funcs dfs_logutils;
extern struct darshan_mod_logutil_funcs daos_logutils;
void *darshan_log_create(const char *name, int comp_type, int partial_flag);
int darshan_log_put_job(void *fd, struct darshan_job *job);
int darshan_log_put_exe(void *fd, char *buf);
int darshan_log_put_mounts(void *fd, struct darshan_mnt_info *mnt_data_array, int count);
int darshan_log_put_namehash(void *fd, struct darshan_name_record_ref *hash);
int darshan_log_put_mod(void *fd, int mod_id, void *mod_buf, int mod_buf_sz, int ver);
void darshan_log_close(void *fd);
"""
_writer = None


def writer_lib():
    global _writer
    if _writer is None:
        import glob

        import cffi
        from darshan.discover_darshan import discover_darshan_wheel

        found = glob.glob(f"{discover_darshan_wheel()}/libdarshan-util*.so*")
        if not found:
            raise RuntimeError("PyDarshan's bundled libdarshan-util was not found")
        ffi = cffi.FFI()
        ffi.cdef(_WRITER_CDEF)
        _writer = (ffi, ffi.dlopen(found[0]))
    return _writer


# Darshan module -> (its id, libdarshan-util's functions, PyDarshan's record type): the
# writer must receive the modules in increasing id order
_MODULES = {
    "POSIX": (1, "posix_logutils", "struct darshan_posix_file"),  # (besides the DxtFiles')
    "MPI-IO": (2, "mpiio_logutils", "struct darshan_mpiio_file"),
    "H5F": (3, "hdf5_file_logutils", "struct darshan_hdf5_file"),
    "H5D": (4, "hdf5_dataset_logutils", "struct darshan_hdf5_dataset"),
    "PNETCDF_FILE": (5, "pnetcdf_file_logutils", "struct darshan_pnetcdf_file"),
    "PNETCDF_VAR": (6, "pnetcdf_var_logutils", "struct darshan_pnetcdf_var"),
    "STDIO": (9, "stdio_logutils", "struct darshan_stdio_file"),
    "DFS": (16, "dfs_logutils", "struct darshan_dfs_file"),
    "DAOS": (17, "daos_logutils", "struct darshan_daos_object"),
}
_POSIX_ID, _DXT_POSIX_ID = 1, 10


@dataclass
class CounterRecord:
    """One counter record of a module other than POSIX, for :func:`write_darshan_log`:
    the named counters are set, every other one is 0."""

    module: str  # a key of _MODULES: "POSIX" (no DXT), "H5D", "DFS", "MPI-IO" ...
    path: str
    counters: dict[str, int]
    fcounters: dict[str, float] | None = None
    rank: int = 0


@dataclass
class DxtFile:
    """One file's trace for :func:`write_darshan_log`: its writes first, then its reads."""

    path: str
    segments: np.ndarray  # SEGMENT_DTYPE, times in seconds from the log's start
    writes: int = 0  # how many of the segments (the leading ones) are writes
    rank: int = 0
    host: str = "localhost"


def write_darshan_log(
    path: Path | str,
    files: list[DxtFile],
    *,
    start: float,
    end: float,
    exe: str,
    jobid: int,
    nprocs: int = 1,
    uid: int = 0,
    metadata: dict[str, str] | None = None,
    records: list[CounterRecord] | None = None,
) -> Path:
    """Write a format-3.41 log (as darshan-runtime 3.5 does) with libdarshan-util's writer.

    The log holds the name records, one POSIX counter record (opens, reads, writes, bytes,
    timestamps, derived from the segments) and one DXT_POSIX record per file and rank.
    ``records`` adds counter records of other modules (HDF5, PnetCDF, MPI-IO, STDIO, DFS,
    DAOS) as given. This is for benchmarks and tests: darshan-runtime, which writes logs for
    real, needs an instrumented process.
    """
    records = records or []
    for r in records:
        if r.module not in _MODULES:
            raise ValueError(f"write_darshan_log: no writer for module {r.module!r}")
    ffi, lib = writer_lib()
    cb = backend()  # counter names of the same library
    path = Path(path)
    path.unlink(missing_ok=True)
    fd = lib.darshan_log_create(os.fsencode(path), 0, 0)  # zlib, as the runtime writes
    if fd == ffi.NULL:
        raise OSError(f"{path}: darshan_log_create failed")
    ok = True
    try:
        ids = _record_ids([f.path for f in files] + [r.path for r in records])
        ok &= put_header(
            fd,
            start=start,
            end=end,
            exe=exe,
            jobid=jobid,
            nprocs=nprocs,
            uid=uid,
            metadata={"lib_ver": "3.5.0", **(metadata or {})},
            mounts=[("/", "ext4")],
            names=(
                np.fromiter(ids.values(), np.uint64, len(ids)),
                pa.array(list(ids), pa.string()),
            ),
        )

        # modules in increasing id order: POSIX (1), then MPI-IO ... STDIO (9), DXT_POSIX
        # (10), then DFS and DAOS
        def put_records(lo: int, hi: int) -> bool:
            done = True
            for r in sorted(records, key=lambda r: _MODULES[r.module][0]):
                if lo < _MODULES[r.module][0] < hi:
                    done &= _put_counter_record(cb, ffi, lib, fd, r, ids[r.path])
            return done

        cn = {n: i for i, n in enumerate(cb.counter_names("POSIX"))}
        fn = {n: i for i, n in enumerate(cb.fcounter_names("POSIX"))}
        for f in files:
            seg, w = f.segments, f.writes
            rec = ffi.new("struct darshan_posix_file *")
            rec.base_rec.id, rec.base_rec.rank = ids[f.path], f.rank
            c = np.frombuffer(ffi.buffer(rec.counters), np.int64)
            fc = np.frombuffer(ffi.buffer(rec.fcounters), np.float64)
            c[cn["POSIX_OPENS"]] = 1
            c[cn["POSIX_READS"]], c[cn["POSIX_WRITES"]] = len(seg) - w, w
            c[cn["POSIX_BYTES_READ"]] = int(seg["length"][w:].sum())
            c[cn["POSIX_BYTES_WRITTEN"]] = int(seg["length"][:w].sum())
            if len(seg):
                ends = seg["offset"] + seg["length"]
                c[cn["POSIX_MAX_BYTE_READ"]] = int(ends[w:].max() - 1) if len(seg) > w else 0
                c[cn["POSIX_MAX_BYTE_WRITTEN"]] = int(ends[:w].max() - 1) if w else 0
                fc[fn["POSIX_F_OPEN_START_TIMESTAMP"]] = float(seg["start"].min())
                fc[fn["POSIX_F_CLOSE_END_TIMESTAMP"]] = float(seg["end"].max())
            dur = seg["end"] - seg["start"]
            fc[fn["POSIX_F_READ_TIME"]] = float(dur[w:].sum())
            fc[fn["POSIX_F_WRITE_TIME"]] = float(dur[:w].sum())
            ok &= lib.posix_logutils.log_put_record(fd, rec) == 0
        ok &= put_records(0, _POSIX_ID + 1)  # POSIX records given as counters
        ok &= put_records(_POSIX_ID, _DXT_POSIX_ID)
        head = ffi.sizeof("struct dxt_file_record")
        for f in files:
            n = len(f.segments)
            buf = ffi.new("char[]", head + n * SEGMENT_DTYPE.itemsize)
            rec = ffi.cast("struct dxt_file_record *", buf)
            rec.base_rec.id, rec.base_rec.rank = ids[f.path], f.rank
            rec.hostname = f.host.encode()[:63]
            rec.write_count, rec.read_count = f.writes, n - f.writes
            seg = np.frombuffer(ffi.buffer(buf + head, n * SEGMENT_DTYPE.itemsize), SEGMENT_DTYPE)
            seg[:] = f.segments
            ok &= lib.dxt_posix_logutils.log_put_record(fd, buf) == 0
        ok &= put_records(_DXT_POSIX_ID, 1 << 30)
    finally:
        lib.darshan_log_close(fd)  # writes the header (region map, module versions)
    if not ok or not path.exists():
        raise OSError(f"{path}: libdarshan-util's writer reported an error (see stderr)")
    return path


def _record_ids(paths: list[str]) -> dict[str, int]:
    """A record id per distinct path: a 64-bit hash of the name, as darshan-runtime's
    (darshan_core_gen_record_id), so that ids look like real logs' to a reader (about one
    NUL byte in 256, where crc32 + 2**40 put three in every id)."""
    ids = {
        p: int.from_bytes(hashlib.blake2b(p.encode(), digest_size=8).digest(), "little") or 1
        for p in dict.fromkeys(paths)
    }
    if len(set(ids.values())) != len(ids):  # two names one id: the log would merge them
        raise ValueError("write_darshan_log: two file names hash to one record id")
    return ids


def put_header(
    fd,
    *,
    start: float,
    end: float,
    exe: str,
    jobid: int,
    nprocs: int,
    uid: int,
    metadata: dict[str, str],
    mounts: list[tuple[str, str]],
    names: tuple[np.ndarray, pa.Array],
) -> bool:
    """Write a log's job record, executable, mount table and name records (what comes
    before the modules' records); True when libdarshan-util reported no error."""
    ffi, lib = writer_lib()
    job = ffi.new("struct darshan_job *")
    job.uid, job.nprocs, job.jobid = uid, nprocs, jobid
    job.start_time_sec, job.start_time_nsec = int(start), int(start % 1 * 1e9)
    job.end_time_sec, job.end_time_nsec = int(end), int(end % 1 * 1e9)
    job.metadata = "".join(f"{k}={v}\n" for k, v in metadata.items()).encode()[:1023]
    ok = lib.darshan_log_put_job(fd, job) == 0
    ok &= lib.darshan_log_put_exe(fd, exe.encode()) == 0
    mnt = ffi.new("struct darshan_mnt_info[]", max(len(mounts), 1))
    for i, (path, kind) in enumerate(mounts):
        mnt[i].mnt_path, mnt[i].mnt_type = path.encode()[:3014], kind.encode()[:3014]
    ok &= lib.darshan_log_put_mounts(fd, mnt, len(mounts)) == 0
    if len(names[0]):  # (record ids, and each one's path)
        ok &= put_names(fd, *names)
    return bool(ok)


def put_names(fd, ids: np.ndarray, paths: pa.Array) -> bool:
    """Write the name records (record ``ids[i]`` is file ``paths[i]``) at once: each laid
    out as the writer copies it (8-byte id, the name, a NUL) by Arrow, and the hash table
    ``darshan_log_put_namehash`` walks filled in with numpy."""
    ffi, lib = writer_lib()
    n = len(ids)
    id_bytes = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(8), n, [None, pa.py_buffer(np.ascontiguousarray(ids, np.uint64))]
    )
    big = pa.types.is_large_string(paths.type) or pa.types.is_large_binary(paths.type)
    kind = pa.large_binary() if big else pa.binary()
    recs = pc.binary_join_element_wise(
        id_bytes.cast(kind), paths.cast(kind), pa.scalar(b"\0", kind), pa.scalar(b"", kind)
    )
    offsets = np.frombuffer(recs.buffers()[1], np.int64 if big else np.int32)
    starts = offsets[recs.offset : recs.offset + n].astype(np.uint64)
    # put_namehash walks the uthash table with HASH_ITER, which follows hlink.next only: a
    # linked list of refs is all the writer needs
    refs = ffi.new("struct darshan_name_record_ref[]", n)
    words = np.frombuffer(ffi.buffer(refs), np.uint64).reshape(n, -1)
    first = int(ffi.cast("uintptr_t", refs))
    nxt = ffi.offsetof("struct darshan_name_record_ref", "hlink", "next") // 8
    words[:, 0] = recs.buffers()[2].address + starts  # name_record
    words[:-1, nxt] = first + ffi.sizeof("struct darshan_name_record_ref") * np.arange(
        1, n, dtype=np.uint64
    )  # hlink.next; the last stays NULL
    return bool(lib.darshan_log_put_namehash(fd, refs) == 0)  # recs lives until it returns


def _put_counter_record(cb, ffi, lib, fd, r: CounterRecord, rec_id: int) -> bool:
    """Write one :class:`CounterRecord` through its module's put_record."""
    _, funcs, ctype = _MODULES[r.module]
    rec = cb.ffi.new(f"{ctype} *")  # PyDarshan's cdef knows every module's record layout
    rec.base_rec.id, rec.base_rec.rank = rec_id, r.rank
    c = np.frombuffer(cb.ffi.buffer(rec.counters), np.int64)
    fc = np.frombuffer(cb.ffi.buffer(rec.fcounters), np.float64)
    cn = {n: i for i, n in enumerate(cb.counter_names(r.module))}
    fn = {n: i for i, n in enumerate(cb.fcounter_names(r.module))}
    for name, v in r.counters.items():
        c[cn[name]] = v
    for name, fv in (r.fcounters or {}).items():
        fc[fn[name]] = fv
    ptr = ffi.cast("void *", int(cb.ffi.cast("uintptr_t", rec)))
    return bool(getattr(lib, funcs).log_put_record(fd, ptr) == 0)
