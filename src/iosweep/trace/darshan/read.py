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
from pathlib import Path
from typing import Any

import numpy as np

from iosweep.files import shown
from iosweep.trace.darshan.bulk import (
    DxtColumns,
    bulk_readable,
    read_counter_region,
    read_dxt_region,
    region_bytes,
)
from iosweep.trace.darshan.check import LogLayout, check_log
from iosweep.trace.darshan.counters import (
    COUNTER_SPECS,
    counter_records,
    counter_widths,
    counters_table,
    read_counters,
    read_lustre,
)
from iosweep.trace.darshan.dxt import DXT_MODULES, check_dxt, read_dxt, segments_table
from iosweep.trace.darshan.libutil import (
    SEGMENT_DTYPE,
    LogHandle,
    RecordError,
    backend,
    lib_version,
    log_issue,
)
from iosweep.trace.darshan.plausible import dxt_beyond_counters, job_times
from iosweep.trace.logs import LogError, ProcessLog
from iosweep.trace.schema import Issue

__all__ = ["SEGMENT_DTYPE", "backend", "read_darshan_log", "read_darshan_log_isolated"]


# darshan-runtime names a log <user>_<exe>_id<jobid>-<pid>_<month>-<day>-<secs>-<hash>_<n>
_PID_IN_NAME = re.compile(r"_id(\d+)-(\d+)_")


def _check_region(h: LogHandle, path: Path, module: str, idx: int) -> Issue | None:
    """Decode every record of a module iosweep does not analyse (LUSTRE, HEATMAP, APMPI ...):
    damage there must be found too, though the figures do not depend on it."""
    n = 0
    try:
        for _ in h.records(idx, "void *"):
            n += 1
    except RecordError:
        h.reopen()  # see _read: the inflate stream stays broken after an error
        return log_issue(
            path,
            "corrupt",
            f"the {module} data are damaged (libdarshan-util failed after {n} records); "
            "iosweep does not analyse that module, and the modules it reads are intact",
            "warning",
        )
    return None


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
    layout = checked_layout(path)
    h = LogHandle(path)
    try:
        return _read(path, layout, h)
    finally:
        h.close()


def checked_layout(path: Path, names: bool = True) -> LogLayout:
    """:func:`check_log`'s layout of a log with I/O recorded (LogError ``empty`` without)."""
    layout = check_log(path, names)
    if not any(k.startswith("slot") for k in layout.regions):
        raise LogError(path, "empty", "no I/O recorded: the log holds job metadata only")
    return layout


def module_slots(
    layout: LogLayout, mods: dict[str, dict[str, Any]]
) -> tuple[list[str], dict[int, str]]:
    """libdarshan-util's modules in its order, and the name of each mapped header slot (empty
    where the two do not pair up)."""
    # libdarshan-util renumbers the slots of older formats (modules were added over time)
    # but keeps their order, so the i-th mapped header slot is the i-th module it lists
    slots = sorted(int(k[4:]) for k in layout.regions if k.startswith("slot"))
    by_idx = sorted(mods, key=lambda m: mods[m]["idx"])
    slot_name = dict(zip(slots, by_idx, strict=False)) if len(slots) == len(by_idx) else {}
    return by_idx, slot_name


def job_facts(
    path: Path, layout: LogLayout, job: dict[str, Any], mods: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The :class:`ProcessLog` fields its header and job record give (the process, its times,
    the log's versions): what ties a log to a rank, before any record is read."""
    # a log of whole seconds (no nanoseconds: Darshan before 3.4.7) ends within the second it
    # names: Darshan's own run time counts that second (end - start + 1 s; PyDarshan's too),
    # not 0 s beside records that took longer
    whole_seconds = job["start"] % 1 == 0 and job["end"] % 1 == 0
    nprocs = job["nprocs"]
    fork_parent = job["metadata"].get("fork_parent")
    return {
        "source": path,
        "tracer": "darshan",
        "pid": _pid_of(path, job["jobid"], nprocs > 1),
        "exe": job["exe"],
        "start": job["start"],
        "end": job["end"] + 1.0 if whole_seconds else job["end"],
        "jobid": job["jobid"],
        "nprocs": nprocs,
        "mpi": nprocs > 1,
        "version": layout.version,
        "ppid": int(fork_parent) if fork_parent and fork_parent.isdigit() else None,
        "header": {
            "uid": job["uid"],
            "lib_ver": job["metadata"].get("lib_ver", ""),
            "metadata": job["metadata"],
            "mounts": job["mounts"],
            "modules": {k: {"ver": v["ver"], "partial": v["partial"]} for k, v in mods.items()},
        },
    }


def _read(path: Path, layout: LogLayout, h: LogHandle) -> ProcessLog:
    job = h.job()
    mods = h.modules()
    facts = job_facts(path, layout, job, mods)
    by_idx, slot_name = module_slots(layout, mods)
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
            log_issue(
                path,
                "truncated",
                f"file is {layout.size} bytes but its header maps {layout.mapped_end}: "
                f"the {', '.join(lost)} data are cut off",
            )
        )
        incomplete.extend(lost)

    # a log of whole seconds (no nanoseconds: Darshan before 3.4.7) ends within the second it
    # names: Darshan's own run time counts that second (end - start + 1 s; PyDarshan's too),
    # not 0 s beside records that took longer
    issues.extend(job_times(path, job["start"], job["end"]))
    duration = max(facts["end"] - facts["start"], 0.0)
    dxt_parts: list[DxtColumns] = []
    counter_parts: list[dict[str, Any]] = []
    read_ok: list[str] = []
    span_of = {n: layout.regions[f"slot{s}"] for s, n in slot_name.items()}
    lib = lib_version()
    for name in by_idx:
        m = mods[name]
        if name in lost:
            continue
        if name == "LUSTRE":
            part, problem = read_lustre(h, path, m["idx"])
            counter_parts.extend([part] if part is not None else [])
            issues.extend([problem] if problem is not None else [])
            continue
        if name not in DXT_MODULES and name not in COUNTER_SPECS:
            if (problem := _check_region(h, path, name, m["idx"])) is not None:
                issues.append(problem)
            continue
        try:
            cols, part, found = _read_module(h, layout, name, m, span_of.get(name), lib, duration)
            issues.extend(found)
            dxt_parts.extend([cols] if cols is not None else [])
            counter_parts.extend([part] if part is not None else [])
            read_ok.append(name)
        except LogError as e:
            issues.append(e.as_issue())
            incomplete.append(name)
            # libdarshan-util's inflate stream stays broken after an error; a fresh handle
            # lets the next module's region be read
            h.reopen()
            continue
        if m["partial"]:
            dxt = name in DXT_MODULES
            issues.append(
                log_issue(
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
        p["module"][0]: sum(int(p[k].filled(0).sum()) for k in ("reads", "writes") if k in p)
        for p in counter_parts
    }
    traced = rw.get("POSIX", 0) > 0 or "MPI-IO" in mods
    # DXT traces POSIX and MPI-IO alone: the layers it never sees are named (STDIO, DFS ...)
    untraced = [m for m, n in rw.items() if n > 0 and m not in ("POSIX", "MPIIO", "MPI-IO")]
    if (traced or untraced) and not any(n in mods for n in DXT_MODULES):
        why = (
            "DXT tracing was off (DXT_ENABLE_IO_TRACE=1 turns it on)"
            if traced
            else f"its reads and writes are {_and(untraced)}, which DXT does not trace"
        )
        issues.append(
            log_issue(
                path,
                "no-dxt",
                f"no DXT trace in this log ({why}): counters only, no per-operation segments",
                "warning",
            )
        )

    # (a POSIX module that ran out of records counts fewer: no bookkeeping to check against)
    if "POSIX" not in incomplete:
        excess = dxt_beyond_counters(path, dxt_parts, counter_parts, layout.names)
        issues.extend([excess] if excess is not None else [])
    pid = facts["pid"]
    host_of_rank: dict[int, str] = {}
    for p in dxt_parts:
        ranks, at = np.unique(p.rank, return_index=True)
        for r, i in zip(ranks.tolist(), at.tolist(), strict=True):
            host_of_rank.setdefault(r, p.hosts[p.host[i]])
    # a per-process log is rank 0 of itself; in an MPI log only rank 0's pid may be known
    pid_of_rank = {0: pid} if pid >= 0 else {}
    source = shown(path.name)
    segments = segments_table(dxt_parts, layout.names, source, pid_of_rank)
    counters = counters_table(counter_parts, layout.names, source, host_of_rank, pid_of_rank)
    return ProcessLog(
        **facts,
        segments=segments,
        host=host_of_rank.get(0) or next(iter(host_of_rank.values()), None),
        counters=counters,
        incomplete=incomplete,
        issues=issues,
    )


def _read_module(
    h: LogHandle,
    layout: LogLayout,
    name: str,
    m: dict[str, Any],
    span: tuple[int, int] | None,
    lib: str,
    duration: float,
) -> tuple[DxtColumns | None, dict[str, Any] | None, list[Issue]]:
    """One module of :data:`DXT_MODULES` or :data:`COUNTER_SPECS` (``m``: libdarshan-util's
    account of it, ``span``: its region): its DXT columns or its counters, and the impossible
    values among those. A region in the format libdarshan-util writes is read in bulk, any
    other a record a call; LogError where it is damaged."""
    path = h.path
    bulk = span is not None and bulk_readable(name, m["ver"], lib, span[1])
    buf = region_bytes(path, span, layout.comp_type, name) if span is not None and bulk else b""
    if name in DXT_MODULES:
        cols = (
            read_dxt_region(path, buf, layout.swap, name, m["ver"])
            if bulk
            else read_dxt(h, name, m["idx"])
        )
        check_dxt(path, name, cols, duration)
        return cols, None, []
    records = (
        read_counter_region(buf, layout.swap, *counter_widths(name))
        if bulk
        else counter_records(h, name, m["idx"])
    )
    part, impossible = read_counters(path, name, records, layout.names)
    return None, part, impossible


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


def _and(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
