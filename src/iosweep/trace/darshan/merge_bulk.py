"""The merged log's counter and DXT records made in bulk: each log's region inflated and
taken as numpy arrays (as :mod:`~iosweep.trace.darshan.bulk` reads it), moved onto the job's
rank and clock, and handed to libdarshan-util's writer a rank's records at a call
(``darshan_log_put_mod``, what each module's ``log_put_record`` calls for one record).

Record by record through libdarshan-util this took 322 s for an ImageNet-scale run's 544
logs (5 M records); the Python around each record was most of it. Only records of one
(file, rank) from several processes (a rank and its DataLoader workers) still go through
libdarshan-util a record at a time: its ``log_agg_records`` folds them, as Darshan reduces
records.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from iosweep.trace.darshan.bulk import (
    COUNTS_AT,
    CURRENT_VERSIONS,
    DXT_HEAD,
    HOST_AT,
    HOST_LEN,
    SEGMENT,
    DxtColumns,
    bulk_readable,
    counter_dtype,
    read_dxt_region,
    region_bytes,
)
from iosweep.trace.darshan.counters import counter_widths
from iosweep.trace.darshan.libutil import backend
from iosweep.trace.darshan.write import writer_lib

#: bytes handed to the writer at a call (its size argument is a C int)
_CALL_BYTES = 256 << 20
_DXT = ("DXT_POSIX", "DXT_MPIIO")


@dataclass
class RegionOf:
    """Where one log's region of a module lies, and how to read it."""

    path: Path
    span: tuple[int, int]
    version: int
    comp_type: int
    swap: bool


@dataclass
class RankLog:
    """One process's log as the merged log takes it: its rank, host and clock."""

    rank: int
    host: str  # "" to keep each record's own
    delta: float  # its start, in seconds after the merged job's start
    regions: dict[str, RegionOf]  # module -> its region, where the log has one
    unmapped: set[str]  # modules whose region is not known here (cut off, or unpaired)


def bulk_mergeable(module: str, logs: Iterable[RankLog], lib_version: str) -> bool:
    """Whether ``module``'s records are merged here: every log's region of it is in the
    format this libdarshan-util writes (older ones it upgrades, a record at a time)."""
    if module not in CURRENT_VERSIONS or not bulk_readable(
        module, CURRENT_VERSIONS[module], lib_version
    ):  # (the library's layouts are the structs: its series only)
        return False
    return all(
        module not in log.unmapped
        and (module not in log.regions or log.regions[module].version == CURRENT_VERSIONS[module])
        for log in logs
    )


def put_module_bulk(fd, module: str, idx: int, ranks: list[list[RankLog]]) -> bool:
    """Write ``module`` (id ``idx``) rank by rank (``ranks``: each rank's logs), one rank's
    records held at a time."""
    make = _dxt_records if module in _DXT else _counter_records
    found = [
        [(log, log.regions[module]) for log in logs if module in log.regions] for logs in ranks
    ]
    found = [f for f in found if f]
    ok = True
    # the next rank's records are made while the writer deflates this rank's: both inflate
    # and deflate run in C without the GIL, and deflate is most of the time (a 2-core
    # machine: 62 s one after the other for the ImageNet-scale run, 37 s of it deflate)
    with ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(make, module, idx, found[0]) if found else None
        for i in range(len(found)):
            assert ahead is not None
            buf, ends = ahead.result()
            ahead = pool.submit(make, module, idx, found[i + 1]) if i + 1 < len(found) else None
            ok &= _put(fd, idx, CURRENT_VERSIONS[module], buf, ends)
            del buf, ends  # two ranks' records at most are held
    return ok


def _put(fd, idx: int, version: int, buf: np.ndarray, ends: np.ndarray) -> bool:
    """Hand ``buf`` (records ending at ``ends``) to the writer, whole records a call."""
    ffi, lib = writer_lib()
    ok, pos = True, 0
    while pos < len(buf):
        k = int(np.searchsorted(ends, pos + _CALL_BYTES, side="right"))
        stop = int(ends[k - 1]) if k and ends[k - 1] > pos else int(ends[k])
        if stop - pos >= 1 << 31:
            raise OSError(f"a record of {stop - pos} bytes: more than the writer takes at once")
        part = buf[pos:stop]
        ok &= lib.darshan_log_put_mod(fd, idx, ffi.from_buffer(part), len(part), version) == 0
        pos = stop
    return ok


def _counter_records(
    module: str, idx: int, found: list[tuple[RankLog, RegionOf]]
) -> tuple[np.ndarray, np.ndarray]:
    """One rank's records of a counter module: the rank set, timestamps on the job's clock,
    the records of one file folded into one (in the order each file first appears)."""
    rec = counter_dtype(*counter_widths(module))
    names = backend().fcounter_names(module)
    stamps = [i for i, n in enumerate(names) if n.endswith("TIMESTAMP")]
    parts = []
    for log, region in found:
        buf = region_bytes(region.path, region.span, region.comp_type, module)
        raw = np.frombuffer(buf, rec.newbyteorder(">" if region.swap else "<"))
        arr = raw[: len(buf) // rec.itemsize].astype(rec)  # trailing bytes end it, as in bulk
        arr["rank"] = log.rank
        if log.delta:
            f = arr["f"][:, stamps]
            arr["f"][:, stamps] = np.where(f > 0, f + log.delta, f)  # 0: never happened
        parts.append(arr)
    recs = np.concatenate(parts)
    _, first, inverse, counts = np.unique(
        recs["id"], return_index=True, return_inverse=True, return_counts=True
    )
    order = np.argsort(first, kind="stable")
    out = recs[first[order]]
    several = np.flatnonzero(counts[order] > 1)
    if len(several):
        _fold(idx, recs, inverse, counts, order, several, out)
    return out.view(np.uint8).reshape(-1), rec.itemsize * np.arange(1, len(out) + 1)


def _fold(
    idx: int,
    recs: np.ndarray,
    inverse: np.ndarray,
    counts: np.ndarray,
    order: np.ndarray,
    several: np.ndarray,
    out: np.ndarray,
) -> None:
    """Put into ``out[j]`` (for each ``j`` of ``several``) its file's records folded by the
    module's own aggregation (libdarshan-util's ``log_agg_records``); a module without one
    keeps the first record, as libdarshan-util's own tools do."""
    ffi, lib = writer_lib()
    agg = lib.mod_logutils[idx].log_agg_records
    if agg == ffi.NULL:
        return
    by_file = np.argsort(inverse, kind="stable")  # each file's records together, in order
    at = np.concatenate([[0], np.cumsum(counts)])
    size = recs.itemsize
    for j in several.tolist():
        u = int(order[j])
        members = np.ascontiguousarray(recs[by_file[at[u] : at[u + 1]]])
        into = np.zeros(1, recs.dtype)
        src, dst = ffi.from_buffer(members), ffi.from_buffer(into)
        for i in range(len(members)):
            agg(ffi.cast("char *", src) + i * size, dst, int(i == 0))
        out[j] = into[0]


def _dxt_records(
    module: str, idx: int, found: list[tuple[RankLog, RegionOf]]
) -> tuple[np.ndarray, np.ndarray]:
    """One rank's DXT records: one record per file, its processes' writes then their reads,
    each in time order, on the job's clock, with the host of its first process's record."""
    cols: list[DxtColumns] = []
    hosts: list[str] = []
    host_of: list[np.ndarray] = []
    for log, region in found:
        inflated = region_bytes(region.path, region.span, region.comp_type, module)
        c = read_dxt_region(region.path, inflated, region.swap, module, region.version)
        c.start += log.delta
        c.end += log.delta
        if log.host:
            host_of.append(np.full(len(c.rid), len(hosts), np.int64))
            hosts.append(log.host)
        else:
            host_of.append(c.host.astype(np.int64) + len(hosts))
            hosts.extend(c.hosts)
        cols.append(c)
    rid = np.concatenate([c.rid for c in cols])
    count = np.concatenate([c.count for c in cols])
    writes = np.concatenate([c.writes for c in cols])
    _, first, inverse = np.unique(rid, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    group = np.empty_like(order)
    group[order] = np.arange(len(order))  # each file's place, in order of first appearance
    g = group[inverse]  # of each record
    n_files = len(order)
    w = np.bincount(g, weights=writes, minlength=n_files).astype(np.int64)
    n = np.bincount(g, weights=count, minlength=n_files).astype(np.int64)
    # segments: each file's, writes before reads, each by start (stable: ties keep the order
    # the processes' records gave them)
    seg_g = np.repeat(g, count)
    pos = np.arange(len(seg_g)) - np.repeat(np.cumsum(count) - count, count)
    is_read = pos >= np.repeat(writes, count)
    start = np.concatenate([c.start for c in cols])
    sort = np.lexsort((start, is_read, seg_g))
    sizes = DXT_HEAD + SEGMENT * n
    ends = np.cumsum(sizes)
    buf = np.zeros(int(ends[-1]), np.uint8)
    words = buf.view(np.int64)
    w0 = (ends - sizes) // 8
    words[w0] = rid[first[order]].view(np.int64)
    words[w0 + 1] = found[0][0].rank
    words[w0 + COUNTS_AT // 8] = w
    words[w0 + COUNTS_AT // 8 + 1] = n - w
    host_names = np.array([h.encode()[: HOST_LEN - 1] for h in hosts], f"S{HOST_LEN}")
    first_host = np.concatenate(host_of)[first[order]]
    at = (w0 * 8 + HOST_AT)[:, None] + np.arange(HOST_LEN)
    buf[at] = host_names[first_host].view(np.uint8).reshape(-1, HOST_LEN)
    seg = np.repeat(w0 + DXT_HEAD // 8 - 4 * (np.cumsum(n) - n), n)
    seg += 4 * np.arange(len(seg), dtype=np.int64)
    floats = words.view(np.float64)
    words[seg] = np.concatenate([c.offset for c in cols])[sort]
    words[seg + 1] = np.concatenate([c.length for c in cols])[sort]
    floats[seg + 2] = start[sort]
    floats[seg + 3] = np.concatenate([c.end for c in cols])[sort]
    return buf, ends
