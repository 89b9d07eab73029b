"""Which logs belong to the same job, when logs of several jobs are given as one input.

An MPI job leaves one Darshan log holding all its ranks, so two MPI logs are two jobs
unless they share job id, executable and start time. Non-MPI logs cannot be split by job id
alone: a non-MPI Darshan process takes its own pid (or its forking parent's) as job id when
no scheduler sets one, so the ranks of one local run carry different job ids. Non-MPI logs
(and DFTracer traces) are one job where they overlap in time or share a job id, chained: two
runs that never overlapped (one ended before the other began) are two jobs, never one run
whose ranks are compared. How the split stores are laid out is in ``docs/data-model.md``
("Several jobs in one input").
"""

from __future__ import annotations

import datetime as dt
import filecmp
import re
from pathlib import Path, PurePosixPath

from iosweep.trace.logs import ProcessLog

JOBS_JSON = "jobs.json"  # in an ingest output that holds one store per job
PROCESSES_JOB = "processes"  # the label of the non-MPI logs' job


def _is_mpi_job(log: ProcessLog) -> bool:
    return log.tracer == "darshan" and log.mpi


def job_key(log: ProcessLog) -> tuple:
    """Logs with equal keys are one job."""
    if _is_mpi_job(log):
        return ("mpi", log.jobid, log.exe, round(log.start))
    return ("processes",)


def job_label(log: ProcessLog) -> str:
    """A short, file-name-safe name for the job of ``log``: executable and job id."""
    if not _is_mpi_job(log):
        return PROCESSES_JOB
    words = log.exe.split()
    exe = PurePosixPath(words[0]).name if words else "job"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{exe}-job{log.jobid}") or "job"


#: logs this close in time still overlap (Darshan's clocks before 3.4.7 are whole seconds)
OVERLAP_SLACK_S = 1.0


def _sessions(logs: list[ProcessLog], idx: list[int]) -> list[list[int]]:
    """The non-MPI logs ``idx`` as jobs: chained where they overlap in time (within
    :data:`OVERLAP_SLACK_S`) or share a job id."""
    parent = {i: i for i in idx}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    order = sorted(idx, key=lambda i: logs[i].start)
    reach, last = -float("inf"), None
    for i in order:  # a sweep in start order: a log that starts before the others end joins
        if last is not None and logs[i].start <= reach + OVERLAP_SLACK_S:
            parent[root(i)] = root(last)
        reach, last = max(reach, logs[i].end), i
    by_id: dict[int, int] = {}
    for i in idx:
        jid = logs[i].jobid
        if jid:
            parent[root(i)] = root(by_id.setdefault(jid, i))
    groups: dict[int, list[int]] = {}
    for i in idx:
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def group_jobs(logs: list[ProcessLog]) -> list[tuple[str, list[int]]]:
    """(label, indices into ``logs``) per job, in order of the jobs' start; labels unique."""
    keyed: dict[tuple, list[int]] = {}
    for i, log in enumerate(logs):
        keyed.setdefault(job_key(log), []).append(i)
    groups = [
        g
        for key, idx in keyed.items()
        for g in (_sessions(logs, idx) if key == ("processes",) else [idx])
    ]
    ordered = sorted(groups, key=lambda idx: min(logs[i].start for i in idx))
    out: list[tuple[str, list[int]]] = []
    taken: set[str] = set()
    for idx in ordered:
        base = label = job_label(logs[idx[0]])
        n = 1
        while label in taken:
            n += 1
            label = f"{base}-{n}"
        taken.add(label)
        out.append((label, idx))
    return out


def copies(logs: list[ProcessLog]) -> dict[int, int]:
    """Darshan logs that are copies of an earlier one in the same folder (index -> the
    earlier one's): one process leaves one log, so two logs of the same process, start, end
    and contents are one log given twice (copied into the folder); read once."""
    seen: dict[tuple, list[int]] = {}
    out: dict[int, int] = {}
    for i, log in enumerate(logs):
        # a Darshan header names its process and times; a DFTracer trace's events may be
        # another rank's byte for byte (synthetic traces): only Darshan logs are compared
        if log.tracer != "darshan":
            continue
        # (in one folder: two runs' folders may hold the same synthetic or replayed trace)
        where = Path(log.source).parent
        key: tuple = (where, log.jobid, log.pid, log.start, log.end, log.exe, log.nprocs)
        same = seen.setdefault(key, [])
        # (the same header: the same bytes? the files are compared only then)
        first = next((j for j in same if filecmp.cmp(logs[j].source, log.source, False)), None)
        if first is None:
            same.append(i)
        else:
            out[i] = first
    return out


def describe(logs: list[ProcessLog], jobs: list[tuple[str, list[int]]]) -> str:
    """One clause per job for a message: label, job id, ranks and start (UTC)."""
    parts = []
    for label, idx in jobs:
        first = logs[idx[0]]
        when = dt.datetime.fromtimestamp(min(logs[i].start for i in idx), dt.UTC)
        if not _is_mpi_job(first):
            parts.append(
                f"{label}: {len(idx)} non-MPI process log(s), from {when:%Y-%m-%d %H:%M:%S} UTC"
            )
            continue
        parts.append(
            f"{label}: job id {first.jobid}, {first.nprocs} ranks, "
            f"started {when:%Y-%m-%d %H:%M:%S} UTC"
        )
    return "; ".join(parts)
