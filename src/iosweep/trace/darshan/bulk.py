"""Module regions decoded in bulk: a region inflated with Python's zlib/bz2 and its records
turned into columns with numpy, no call per record.

libdarshan-util hands out one record a call (``darshan_log_get_record``); over an
ImageNet-scale run's 5 M records the calls and the Python around each cost most of the time
to read the logs. A module region written in the format version the bundled libdarshan-util
writes itself is the records' C structs back to back, which libdarshan-util copies out
unchanged (only byte-swapped when the log comes from a machine of the other byte order): here
the same bytes become numpy arrays at once. A module in an older version is upgraded by
libdarshan-util's own code (counters moved, added as -1): such a region, and any module or
library version not listed here, is left to libdarshan-util, record by record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from iosweep.trace.darshan.check import decompress
from iosweep.trace.logs import LogError

#: the module format versions libdarshan-util 3.5 writes (include/darshan-*-log-format.h):
#: a region in these versions holds the very structs libdarshan-util hands out
CURRENT_VERSIONS = {"POSIX": 4, "MPI-IO": 3, "STDIO": 2, "DXT_POSIX": 1, "DXT_MPIIO": 2}
#: DXT_MPIIO version 1 recorded no offsets: libdarshan-util sets each to -1 (so do we)
_DXT_MPIIO_NO_OFFSETS = 1
_LIB_SERIES = "3.5."
# struct dxt_file_record: base_rec {u64 id, i64 rank}, i64 shared_record, char hostname[64],
# i64 write_count, i64 read_count; then segment_info {i64 offset, i64 length, f64 start, f64 end}
DXT_HEAD = 104
HOST_AT, HOST_LEN, COUNTS_AT = 24, 64, 88
SEGMENT = 32


#: a region of more compressed bytes than this is left to libdarshan-util, which inflates it a
#: record at a time: read here, it is held inflated beside its columns (about 3.5 times the
#: 32 bytes of each DXT segment at once, against 1.8 times record by record), which for one
#: MPI log of 100 M segments would be 11 GB
BULK_MAX_REGION = 128 << 20


def bulk_readable(module: str, version: int, lib_version: str, size: int = 0) -> bool:
    """Whether a region of ``module`` in format ``version`` (``size`` compressed bytes) is
    read here, not by libdarshan-util (``lib_version``: the bundled library's, whose layouts
    the structs are)."""
    if not lib_version.startswith(_LIB_SERIES) or size > BULK_MAX_REGION:
        return False
    if module == "DXT_MPIIO":
        return version in (_DXT_MPIIO_NO_OFFSETS, CURRENT_VERSIONS[module])
    return CURRENT_VERSIONS.get(module) == version


def region_bytes(path: Path, span: tuple[int, int], comp_type: int, module: str) -> bytes:
    """A module region (``span``: its offset and length), inflated (one compressed stream
    per rank in an MPI log)."""
    off, ln = span
    with open(path, "rb") as f:
        f.seek(off)
        raw = f.read(ln)
    if len(raw) < ln:
        raise LogError(path, "corrupt", f"the {module} data are cut short")
    return decompress(path, f"{module} data", raw, comp_type)


@dataclass
class DxtColumns:
    """One DXT module's records as columns: a row per record with operations, and their
    segments back to back in record order (``count`` of them per record, writes first)."""

    module: str  # the layer traced: POSIX or MPIIO
    rid: np.ndarray  # uint64 record (file) id
    rank: np.ndarray  # int64
    host: np.ndarray  # int32 index into hosts
    hosts: list[str]
    writes: np.ndarray  # int64 writes of each record (its first segments)
    count: np.ndarray  # int64 segments of each record
    offset: np.ndarray
    length: np.ndarray
    start: np.ndarray
    end: np.ndarray


def _record_starts(path: Path, buf: bytes, order: str, module: str) -> np.ndarray:
    """Byte offsets of the records in a DXT region. Each record's size follows from its own
    counts, so the walk goes a record at a time, except over a run of records of one size
    (a loader's reads of same-sized samples), which numpy checks at once."""
    words = np.frombuffer(buf, order + "i8", count=len(buf) // 8)
    counts = struct.Struct(order + "qq")
    found: list[np.ndarray] = []
    one: list[int] = []
    pos, n, same, wait, last = 0, len(buf), 0, 0, -1
    while pos + DXT_HEAD <= n:  # fewer bytes left than a record header: the region's end
        wc, rc = counts.unpack_from(buf, pos + COUNTS_AT)
        size = DXT_HEAD + SEGMENT * (wc + rc)
        if wc < 0 or rc < 0 or pos + size > n:
            (rid,) = struct.unpack_from(order + "Q", buf, pos)
            beyond = ", more than the region holds" if wc >= 0 and rc >= 0 else ""
            raise LogError(
                path,
                "corrupt",
                f"{module} record {rid} is damaged ({wc} writes, {rc} reads{beyond})",
            )
        one.append(pos)
        pos += size
        same, last = (same + 1 if size == last else 0), size
        wait -= 1
        if same >= 2 and wait <= 0:
            run = _run_of(words, pos, size, wc + rc, n)
            if run:
                found.append(np.asarray(one, np.int64))
                found.append(pos + size * np.arange(run, dtype=np.int64))
                one = []
                pos += size * run
            wait = 0 if run >= 64 else 64  # short runs: back to one at a time for a while
    found.append(np.asarray(one, np.int64))
    return np.concatenate(found)


def _run_of(words: np.ndarray, pos: int, size: int, ops: int, n: int) -> int:
    """How many records of ``size`` bytes (``ops`` segments, counts not negative) follow,
    one after another, from byte ``pos``: checked in windows that double as they hold."""
    run, window = 0, 256
    while True:
        k = min(window, (n - pos - run * size) // size)
        if k <= 0:
            return run
        at = (pos + run * size + size * np.arange(k, dtype=np.int64)) // 8 + COUNTS_AT // 8
        wc, rc = words[at], words[at + 1]
        ok = (wc >= 0) & (rc >= 0) & (wc + rc == ops)
        if not ok.all():
            return run + int(np.argmin(ok))
        run += k
        window *= 2


def read_dxt_region(path: Path, buf: bytes, swap: bool, module: str, version: int) -> DxtColumns:
    """:class:`DxtColumns` of an inflated DXT region (``module``: DXT_POSIX or DXT_MPIIO)."""
    order = ">" if swap else "<"
    at = _record_starts(path, buf, order, module)
    words = np.frombuffer(buf, order + "i8", count=len(buf) // 8)
    w0 = at // 8  # every field lies on an 8-byte boundary (104 and 32 are multiples of 8)
    rid = words[w0].view(order + "u8").astype(np.uint64)
    rank = words[w0 + 1].astype(np.int64)
    wc = words[w0 + COUNTS_AT // 8].astype(np.int64)
    count = wc + words[w0 + COUNTS_AT // 8 + 1].astype(np.int64)
    bad = np.flatnonzero((rank < -1) | (rank >= 1 << 24))
    if len(bad):
        i = int(bad[0])
        raise LogError(
            path,
            "corrupt",
            f"{module} record {int(rid[i])} is damaged (rank {int(rank[i])}, {int(wc[i])} "
            f"writes, {int(count[i] - wc[i])} reads)",
        )
    keep = count > 0  # libdarshan-util's readers skip a record without operations too
    at, rid, rank, wc, count = at[keep], rid[keep], rank[keep], wc[keep], count[keep]
    u8 = np.frombuffer(buf, np.uint8)
    raw = u8[(at + HOST_AT)[:, None] + np.arange(HOST_LEN)]
    raw_hosts = raw.view(f"S{HOST_LEN}").ravel()
    if len(raw) and (raw == raw[0]).all():  # a process's records name one host: no sort
        uniq, host = raw_hosts[:1], np.zeros(len(raw), np.intp)
    else:
        uniq, host = np.unique(raw_hosts, return_inverse=True)
    hosts = [h.split(b"\0", 1)[0].decode("utf-8", "replace") for h in uniq.tolist()]
    # the word index of each segment's first field: its record's header end, plus 4 words a
    # segment into the record (two arrays a segment, added in place: what this holds at once)
    total = int(count.sum())
    seg = np.repeat(w0[keep] + DXT_HEAD // 8 - 4 * (np.cumsum(count) - count), count)
    seg += 4 * np.arange(total, dtype=np.int64)
    floats = words.view(order + "f8")
    offset = words[seg].astype(np.int64)
    if module == "DXT_MPIIO" and version == _DXT_MPIIO_NO_OFFSETS:
        offset[:] = -1
    return DxtColumns(
        module=module.removeprefix("DXT_"),
        rid=rid,
        rank=rank,
        host=host.astype(np.int32),
        hosts=hosts,
        writes=wc,
        count=count,
        offset=offset,
        length=words[seg + 1].astype(np.int64),
        start=floats[seg + 2].astype(np.float64),
        end=floats[seg + 3].astype(np.float64),
    )


def counter_dtype(n_counters: int, n_fcounters: int, order: str = "=") -> np.dtype:
    """A counter record as it lies in a region: base_rec {u64 id, i64 rank}, int64
    counters[n], double fcounters[m] (``order``: the bytes', "=" this machine's)."""
    return np.dtype(
        [
            ("id", order + "u8"),
            ("rank", order + "i8"),
            ("c", order + "i8", (n_counters,)),
            ("f", order + "f8", (n_fcounters,)),
        ]
    )


def read_counter_region(
    buf: bytes, swap: bool, n_counters: int, n_fcounters: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(record ids, ranks, counters, fcounters) of an inflated counter region: fixed-size
    records of base_rec {u64 id, i64 rank}, int64 counters[n], double fcounters[m]. Bytes
    after the last whole record end it (libdarshan-util's readers stop there too)."""
    rec = counter_dtype(n_counters, n_fcounters, ">" if swap else "<")
    arr = np.frombuffer(buf, rec, count=len(buf) // rec.itemsize)
    # in this machine's byte order, views of the buffer (read-only), not copies of it
    return (
        arr["id"].astype(np.uint64, copy=False),
        arr["rank"].astype(np.int64, copy=False),
        arr["c"].astype(np.int64, copy=False).reshape(len(arr), n_counters),
        arr["f"].astype(np.float64, copy=False).reshape(len(arr), n_fcounters),
    )
