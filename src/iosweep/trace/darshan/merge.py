"""One Darshan log for a run of per-process (non-MPI) logs, written through
libdarshan-util's own writer, that other Darshan tools open as one N-rank job.

``darshan-merge`` (3.5.0) marks its output partial (``darshan-parser`` refuses it), leaves
every record at rank 0 with ``nprocs: 1`` and concatenates heatmaps of different bin widths
(PyDarshan then fails). Here each process's records take the process's true rank; the
processes of one rank (the rank and its forked DataLoader workers) are folded into that rank
with libdarshan-util's own aggregation (``log_agg_records``), as Darshan reduces records;
every time is moved onto the earliest log's clock; DXT records keep each process's host;
every heatmap is re-binned onto one bin width from the job's start, so that all have the
same bins. The log is not marked partial. Processes with no rank are left out (a record
with rank -1 would mean "shared by all ranks").

Counter and DXT regions in the current format are made in bulk, a rank at a time
(:mod:`~iosweep.trace.darshan.merge_bulk`); older formats and other modules (heatmaps,
LUSTRE ...) go through libdarshan-util a record at a time.
"""

from __future__ import annotations

import math
import os
import resource
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from iosweep.trace.darshan.check import NameTable, check_log
from iosweep.trace.darshan.counters import COUNTER_SPECS
from iosweep.trace.darshan.libutil import SEGMENT_DTYPE, LogHandle, lib_version
from iosweep.trace.darshan.merge_bulk import RankLog, RegionOf, bulk_mergeable, put_module_bulk
from iosweep.trace.darshan.read import module_slots
from iosweep.trace.darshan.write import put_header, writer_lib

_DXT = {"DXT_POSIX", "DXT_MPIIO"}
_HEATMAP = "HEATMAP"


@dataclass
class MergeInput:
    """One process's log and where it belongs."""

    path: Path
    rank: int
    host: str = ""


@dataclass
class MergeResult:
    path: Path
    nprocs: int
    processes: int  # logs merged
    left_out: list[str] = field(default_factory=list)  # why some data are not in the log


class _Handles:
    """The logs' libdarshan-util handles, at most ``limit`` open at once (the least recently
    used closed first, reopened when asked again): a run of thousands of logs on a machine
    that allows 1,024 open files."""

    def __init__(self, limit: int):
        self.limit = max(limit, 1)
        self.open: OrderedDict[Path, LogHandle] = OrderedDict()

    def get(self, path: Path) -> LogHandle:
        h = self.open.pop(path, None)
        if h is None:
            while len(self.open) >= self.limit:
                self.open.popitem(last=False)[1].close()
            h = LogHandle(path)
        self.open[path] = h
        return h

    def close(self) -> None:
        for h in self.open.values():
            h.close()
        self.open.clear()


def open_files_allowed() -> int:
    """Handles the merge keeps open: a quarter of the process's open-file limit, at most 64
    (each is one file; the rest stay for the ingest's other files)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(1, min(64, soft // 4)) if soft > 0 else 64


@dataclass
class _Open:
    inp: MergeInput
    job: dict
    mods: dict[str, dict]  # libdarshan-util's account of its modules
    handles: _Handles
    bulk: RankLog  # its rank, host, clock and regions (what the bulk writer takes)

    @property
    def delta(self) -> float:
        """This log's start, in seconds after the merged job's start."""
        return self.bulk.delta

    @property
    def h(self) -> LogHandle:
        """The log's handle (opened again where the pool closed it): use it within one pass
        over one log's records, never across two logs."""
        return self.handles.get(self.inp.path)


def write_merged_log(
    inputs: list[MergeInput], out: Path, *, jobid: int | None = None, bulk: bool = True
) -> MergeResult:
    """Write ``out`` from ``inputs`` (see the module docstring); raises OSError when
    libdarshan-util's writer reports an error, LogError when a log is damaged. Without
    ``bulk``, every record goes through libdarshan-util one at a time (slow; what the bulk
    writer is tested against)."""
    ranked = [i for i in inputs if i.rank >= 0]
    left_out = [f"{i.path.name}: no rank" for i in inputs if i.rank < 0]
    handles = _Handles(open_files_allowed())
    try:
        if not ranked:
            raise ValueError("write_merged_log: no log with a rank")
        name_ids, name_paths = [], []
        logs = []
        for i in ranked:
            o, names = _open(i, handles)
            logs.append(o)
            name_ids.append(names.ids)
            name_paths.append(names.paths)
        names = NameTable(np.concatenate(name_ids), pa.concat_arrays(name_paths))
        del name_ids, name_paths
        start = min(o.job["start"] for o in logs)
        end = max(o.job["end"] for o in logs)
        for o in logs:
            o.bulk.delta = o.job["start"] - start
        nprocs = max(o.inp.rank for o in logs) + 1
        # the header (job id, uid, exe, metadata) is the earliest process's, as its start is
        first = min(logs, key=lambda o: (o.job["start"], o.inp.rank))
        mounts: dict[str, str] = {}
        for o in logs:
            mounts.update({p: t for p, t in o.job["mounts"]})
        ffi, lib = writer_lib()
        out.unlink(missing_ok=True)
        fd = lib.darshan_log_create(os.fsencode(out), 0, 0)  # zlib; not partial
        if fd == ffi.NULL:
            raise OSError(f"{out}: darshan_log_create failed")
        ok = True
        try:
            meta = {**first.job["metadata"], "merged_by": "iosweep", "merged_logs": str(len(logs))}
            ok &= put_header(
                fd,
                start=start,
                end=end,
                exe=first.job["exe"],
                jobid=first.job["jobid"] if jobid is None else jobid,
                nprocs=nprocs,
                uid=first.job["uid"],
                metadata=meta,
                mounts=sorted(mounts.items()),
                names=(names.ids, names.paths),
            )
            for name, idx in _modules(logs, left_out):
                ok &= _put_module(fd, name, idx, logs, end - start, bulk)
        finally:
            lib.darshan_log_close(fd)
        if not ok or not out.exists():
            raise OSError(f"{out}: libdarshan-util's writer reported an error (see stderr)")
        return MergeResult(out, nprocs, len(logs), left_out)
    finally:
        handles.close()


def _open(i: MergeInput, handles: _Handles) -> tuple[_Open, NameTable]:
    """A log's job, modules and regions (LogError where its structure is damaged), and its
    name records."""
    h = handles.get(i.path)
    job, mods = h.job(), h.modules()
    layout = check_log(i.path)
    _, slot_name = module_slots(layout, mods)
    lost = {slot_name.get(s) for s in layout.lost_slots}
    span = {n: layout.regions[f"slot{s}"] for s, n in slot_name.items() if n not in lost}
    regions = {
        n: RegionOf(i.path, at, mods[n]["ver"], layout.comp_type, layout.swap)
        for n, at in span.items()
    }
    unmapped = set(mods) - set(regions)  # what only libdarshan-util can read
    o = _Open(i, job, mods, handles, RankLog(i.rank, i.host, 0.0, regions, unmapped))
    return o, layout.names


def _modules(logs: list[_Open], left_out: list[str]) -> list[tuple[str, int]]:
    """The modules of the logs, in the increasing id order the writer needs."""
    ffi, lib = writer_lib()
    found: dict[str, int] = {}
    for o in logs:
        for name, m in o.mods.items():
            found.setdefault(name, m["idx"])
    out = []
    for name, idx in sorted(found.items(), key=lambda kv: kv[1]):
        funcs = lib.mod_logutils[idx]
        if funcs == ffi.NULL or funcs.log_put_record == ffi.NULL:
            left_out.append(f"{name}: libdarshan-util cannot write this module")
            continue
        out.append((name, idx))
    return out


def _records(o: _Open, idx: int):
    """Each record of module ``idx`` of one log, as a pointer (freed after use)."""
    yield from o.h.records(idx, "void *")


def _put_module(
    fd, name: str, idx: int, logs: list[_Open], duration: float, bulk: bool = True
) -> bool:
    if bulk and bulk_mergeable(name, [o.bulk for o in logs], lib_version()):
        return put_module_bulk(fd, name, idx, [[o.bulk for o in r] for r in _by_rank(logs)])
    if name in _DXT:
        return _put_dxt(fd, idx, logs)
    if name == _HEATMAP:
        return _put_heatmaps(fd, idx, logs, duration)
    if name in COUNTER_SPECS:
        return _put_counters(fd, name, idx, logs)
    return _put_first(fd, idx, logs)


def _put_first(fd, idx: int, logs: list[_Open]) -> bool:
    """A module iosweep does not analyse (LUSTRE striping, APMPI, ...): each (record, rank)
    once, as its first process recorded it (a file's striping is the same for all)."""
    ffi, lib = writer_lib()
    funcs = lib.mod_logutils[idx]
    seen: set[tuple[int, int]] = set()
    ok = True
    for o in logs:
        for rec in _records(o, idx):
            base = ffi.cast("struct darshan_base_record *", int(o.h.ffi.cast("uintptr_t", rec)))
            key = (int(base.id), o.inp.rank)
            if key in seen:
                continue
            seen.add(key)
            base.rank = o.inp.rank
            ok &= funcs.log_put_record(fd, ffi.cast("void *", base)) == 0
    return ok


def _put_counters(fd, name: str, idx: int, logs: list[_Open]) -> bool:
    """Counter records with the process's rank and times on the job's clock; records of one
    (file, rank) from several processes folded by the module's own aggregation."""
    ffi, lib = writer_lib()
    funcs = lib.mod_logutils[idx]
    ctype = COUNTER_SPECS[name][0]
    names = logs[0].h.cb.fcounter_names(name)
    stamps = [i for i, n in enumerate(names) if n.endswith("TIMESTAMP")]
    size = logs[0].h.ffi.sizeof(ctype.rstrip(" *"))  # fixed-size records
    ok = True
    for rank_logs in _by_rank(logs):  # records fold within a rank only: one rank held at a time
        groups: dict[int, list] = {}
        for o in rank_logs:
            for rec in _records(o, idx):
                buf = ffi.new("char[]", size)
                ffi.memmove(buf, ffi.cast("void *", int(o.h.ffi.cast("uintptr_t", rec))), size)
                base = ffi.cast("struct darshan_base_record *", buf)
                base.rank = o.inp.rank
                if o.delta:
                    _shift(o, ctype, buf, stamps)
                groups.setdefault(int(base.id), []).append(buf)
        for bufs in groups.values():
            rec = bufs[0]
            if len(bufs) > 1 and funcs.log_agg_records != ffi.NULL:
                rec = ffi.new("char[]", len(bufs[0]))
                for i, b in enumerate(bufs):
                    funcs.log_agg_records(b, rec, int(i == 0))
            ok &= funcs.log_put_record(fd, rec) == 0
    return ok


def _by_rank(logs: list[_Open]) -> list[list[_Open]]:
    """The logs of each rank (the rank and its workers), rank by rank."""
    ranks: dict[int, list[_Open]] = {}
    for o in logs:
        ranks.setdefault(o.inp.rank, []).append(o)
    return [ranks[r] for r in sorted(ranks)]


def _shift(o: _Open, ctype: str, buf, stamps: list[int]) -> None:
    """Move a record's timestamps (seconds from its own log's start; 0: never) onto the
    merged job's clock."""
    cffi = o.h.ffi
    rec = cffi.cast(ctype, int(writer_lib()[0].cast("uintptr_t", buf)))
    fc = np.frombuffer(cffi.buffer(rec.fcounters), np.float64)
    for i in stamps:
        if fc[i] > 0:
            fc[i] += o.delta


def _put_dxt(fd, idx: int, logs: list[_Open]) -> bool:
    """DXT records on the job's clock, each process's segments under its rank (the writes,
    then the reads, each in time order) with its host."""
    ffi = writer_lib()[0]
    head = ffi.sizeof("struct dxt_file_record")
    ok = True
    for rank_logs in _by_rank(logs):  # one rank's records held at a time
        groups: dict[tuple[int, int], tuple[str, list[np.ndarray], list[np.ndarray]]] = {}
        for o in rank_logs:
            for rec in _records(o, idx):
                r = o.h.ffi.cast("struct dxt_file_record *", rec)
                w, n = int(r.write_count), int(r.write_count + r.read_count)
                at = o.h.ffi.cast("char *", rec) + head
                seg = np.frombuffer(o.h.ffi.buffer(at, n * SEGMENT_DTYPE.itemsize), SEGMENT_DTYPE)
                seg = seg.copy()
                seg["start"] += o.delta
                seg["end"] += o.delta
                host = o.inp.host or o.h.ffi.string(r.hostname).decode("utf-8", "replace")
                _, ws, rs = groups.setdefault((int(r.base_rec.id), o.inp.rank), (host, [], []))
                ws.append(seg[:w])
                rs.append(seg[w:])
        ok &= _put_dxt_records(fd, idx, groups)
    return ok


def _put_dxt_records(
    fd, idx: int, groups: dict[tuple[int, int], tuple[str, list[np.ndarray], list[np.ndarray]]]
) -> bool:
    """One DXT record per (file, rank): its processes' writes, then their reads, in time order."""
    ffi, lib = writer_lib()
    head = ffi.sizeof("struct dxt_file_record")
    ok = True
    funcs = lib.mod_logutils[idx]
    for (rid, rank), (host, ws, rs) in groups.items():
        writes, reads = (_by_start(np.concatenate(x)) for x in (ws, rs))
        n = len(writes) + len(reads)
        buf = ffi.new("char[]", head + n * SEGMENT_DTYPE.itemsize)
        r = ffi.cast("struct dxt_file_record *", buf)
        r.base_rec.id, r.base_rec.rank = rid, rank
        r.hostname = host.encode()[:63]
        r.write_count, r.read_count = len(writes), len(reads)
        seg = np.frombuffer(ffi.buffer(buf + head, n * SEGMENT_DTYPE.itemsize), SEGMENT_DTYPE)
        seg[: len(writes)] = writes
        seg[len(writes) :] = reads
        ok &= funcs.log_put_record(fd, buf) == 0
    return ok


def _by_start(seg: np.ndarray) -> np.ndarray:
    return seg[np.argsort(seg["start"], kind="stable")]


def _put_heatmaps(fd, idx: int, logs: list[_Open], duration: float) -> bool:
    """Every heatmap on one grid: the widest bin width of the inputs, from the job's start.
    A process's bin spreads its bytes over the merged bins it overlaps in proportion (whole
    bytes; the totals are kept exactly)."""
    ffi, lib = writer_lib()
    found = []
    for o in logs:
        for rec in _records(o, idx):
            r = o.h.ffi.cast("struct darshan_heatmap_record *", rec)
            nb = int(r.nbins)
            wb = np.array(o.h.ffi.unpack(r.write_bins, nb), np.int64)
            rb = np.array(o.h.ffi.unpack(r.read_bins, nb), np.int64)
            found.append(
                (int(r.base_rec.id), o.inp.rank, o.delta, float(r.bin_width_seconds), wb, rb)
            )
    if not found:
        return True
    width = max(f[3] for f in found)
    nbins = max(
        math.ceil(duration / width),
        *(math.ceil((d + len(wb) * w) / width) for _, _, d, w, wb, _ in found),
    )
    sums: dict[tuple[int, int], np.ndarray] = {}
    for rid, rank, delta, w, wb, rb in found:
        acc = sums.setdefault((rid, rank), np.zeros((2, nbins), np.int64))
        acc[0] += _rebin(wb, delta, w, width, nbins)
        acc[1] += _rebin(rb, delta, w, width, nbins)
    head = ffi.sizeof("struct darshan_heatmap_record")
    ok = True
    funcs = lib.mod_logutils[idx]
    for (rid, rank), acc in sums.items():
        buf = ffi.new("char[]", head + 2 * nbins * 8)
        r = ffi.cast("struct darshan_heatmap_record *", buf)
        r.base_rec.id, r.base_rec.rank = rid, rank
        r.bin_width_seconds, r.nbins = width, nbins
        r.write_bins = ffi.cast("int64_t *", buf + head)
        r.read_bins = ffi.cast("int64_t *", buf + head + nbins * 8)
        np.frombuffer(ffi.buffer(buf + head, 2 * nbins * 8), np.int64)[:] = acc.ravel()
        ok &= funcs.log_put_record(fd, buf) == 0
    return ok


def _rebin(bins: np.ndarray, delta: float, w: float, width: float, nbins: int) -> np.ndarray:
    """``bins`` (of width ``w`` from ``delta``) on the grid of ``nbins`` bins of ``width``
    from 0. A source bin is at most ``width`` wide, so it overlaps one or two target bins:
    the first gets its share rounded down, the second the rest."""
    out = np.zeros(nbins, np.int64)
    lo = delta + np.arange(len(bins)) * w
    first = np.minimum((lo // width).astype(np.int64), nbins - 1)
    boundary = (first + 1) * width
    frac = np.clip((boundary - lo) / w, 0.0, 1.0) if w > 0 else np.ones(len(bins))
    part = np.floor(bins * frac).astype(np.int64)
    np.add.at(out, first, part)
    np.add.at(out, np.minimum(first + 1, nbins - 1), bins - part)
    return out
