"""Tying each log to its rank and host (manifest, rank files, parent pids, the rank
directories), and the issues when that cannot be done: numbered, unattributed, duplicate
and missing ranks, several jobs mixed in one input."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from iosweep.trace.ingest.find import LogEntry
from iosweep.trace.ingest.parts import table_of
from iosweep.trace.logs import ProcessLog
from iosweep.trace.schema import (
    Issue,
    RankInfo,
)


class _RankIndex:
    """The known ranks, looked up by (host, pid), by pid alone, or by rank."""

    def __init__(self, ranks: list[RankInfo]):
        self.by_hostpid = {(r.host, r.pid): r for r in ranks}
        self.by_pid: dict[int, list[RankInfo]] = {}
        for r in ranks:
            self.by_pid.setdefault(r.pid, []).append(r)
        self.by_rank = {r.rank: r for r in ranks}

    def find(self, pid: int | None, host: str | None) -> RankInfo | None:
        if pid is None:
            return None
        if host and (host, pid) in self.by_hostpid:
            return self.by_hostpid[(host, pid)]
        cands = self.by_pid.get(pid, [])
        # a log without a host record (no DXT) matches by pid when that is unambiguous
        if len(cands) == 1 and (not host or not cands[0].host):
            return cands[0]
        return None


def attribute_logs(entries: list[LogEntry], ranks: list[RankInfo], rank_source: str) -> list[Issue]:
    """Set rank/role/host/attributed_by on every read log; return the warnings."""
    index = _RankIndex(ranks)
    read = [e for e in entries if e.log is not None]
    issues = [i for e in read if (i := _attribute_one(e, read, index, rank_source)) is not None]
    pending = [e for e in read if not e.plog.mpi and not e.attributed_by]
    if not pending:
        return issues
    if ranks:
        return issues + _unattributed(pending)
    return issues + _number_processes(pending)


def _attribute_one(
    e: LogEntry, read: list[LogEntry], index: _RankIndex, rank_source: str
) -> Issue | None:
    """Tie one log to a rank by the known ranks: an MPI log, a rank's own pid, a forked
    worker's parent pid, or the rank directory it lies in; a warning for a child process."""
    L = e.plog
    if L.mpi:
        e.rank, e.role, e.attributed_by = -1, "rank", "mpi"  # ranks are inside the log
        e.host = L.host or ""
        return None
    info = index.find(L.pid, L.host)
    if info is not None:
        e.rank, e.role, e.host, e.attributed_by = (
            info.rank,
            "rank",
            L.host or info.host,
            rank_source,
        )
        return None
    # a forked worker: Darshan records the parent (fork_parent) and keeps the parent's
    # pid as job id; DFTracer records ppid
    parent = index.find(L.ppid, L.host) or (
        index.find(L.jobid, L.host) if L.jobid != L.pid else None
    )
    if parent is not None:
        e.rank, e.role, e.host = parent.rank, "worker", L.host or parent.host
        e.attributed_by = "parent-pid"
        return None
    if e.dir_rank is None or e.dir_rank not in index.by_rank:
        e.host = L.host or ""
        return None
    owner = index.by_rank.get(e.dir_rank)
    same_exe = any(
        o.plog.exe == L.exe and o.role == "rank" and o.rank == e.dir_rank
        for o in read
        if o is not e and o.log is not None
    )
    e.rank, e.attributed_by = e.dir_rank, "log-dir"
    e.host = L.host or (owner.host if owner else "")
    e.role = "worker" if same_exe else "child"
    if e.role == "worker":
        return None
    return Issue(
        str(e.path),
        "child-process",
        f"pid {L.pid} ({_short(L.exe)}) is a child process of rank "
        f"{e.dir_rank} (found in its trace directory), not the rank itself: "
        "its I/O is kept under that rank with role 'child'",
        "warning",
    )


def _unattributed(pending: list[LogEntry]) -> list[Issue]:
    """Processes that are no known rank and were forked by none: rank -1, role child."""
    issues = []
    for e in pending:
        e.rank, e.role = -1, "child"
        issues.append(
            Issue(
                str(e.path),
                "unattributed",
                f"pid {e.plog.pid} ({_short(e.plog.exe)}) is not a rank and was not forked "
                "by one (a child such as TensorFlow's uname, or a rank missing from the "
                "rank files): kept as rank -1, role 'child'",
                "warning",
            )
        )
    return issues


def _number_processes(pending: list[LogEntry]) -> list[Issue]:
    """No rank information at all: forked children follow their parent log, the other
    processes are numbered in start order."""
    issues: list[Issue] = []
    by_key = {(e.plog.host, e.plog.pid): e for e in pending}
    by_pid_log: dict[int, list[LogEntry]] = {}
    for e in pending:
        by_pid_log.setdefault(e.plog.pid, []).append(e)

    def parent_log(e: LogEntry) -> LogEntry | None:
        for pid in (e.plog.ppid, e.plog.jobid if e.plog.jobid != e.plog.pid else None):
            if pid is None:
                continue
            p = by_key.get((e.plog.host, pid))
            if p is None and len(by_pid_log.get(pid, [])) == 1:
                p = by_pid_log[pid][0]
            if p is not None and p is not e:
                return p
        return None

    same = _same_process(pending)
    roots = [e for e in pending if parent_log(e) is None and id(e) not in same]
    roots.sort(key=lambda e: (e.plog.start, e.plog.pid, str(e.path)))
    # the run layout's traces/rank-R/ directories name ranks even without rank files: the
    # first process started there is the rank, later unrelated ones are its children
    in_dirs = [e for e in roots if e.dir_rank is not None]
    for e in in_dirs:
        first = next(o for o in in_dirs if o.dir_rank == e.dir_rank)
        e.rank, e.attributed_by = int(e.dir_rank or 0), "log-dir"  # not None: in_dirs
        e.role = "rank" if e is first else "child"
    roots = [e for e in roots if e.dir_rank is None]
    base = max((e.rank for e in in_dirs), default=-1) + 1
    for i, e in enumerate(roots):
        e.rank, e.role, e.attributed_by = base + i, "rank", "numbered"
    for e in pending:
        if id(e) in same and same[id(e)].attributed_by:
            first = same[id(e)]
            e.rank, e.role, e.attributed_by = first.rank, first.role, "same-process"
            e.host = e.host or first.host
    for e in pending:
        if e.attributed_by:
            continue
        p, seen = parent_log(e), set()
        while p is not None and not p.attributed_by and id(p) not in seen:
            seen.add(id(p))
            p = parent_log(p)
        if p is not None and p.attributed_by:
            e.rank, e.role, e.attributed_by = p.rank, "worker", "parent-pid"
            e.host = e.host or p.host
    if roots:
        issues.append(
            Issue(
                "ranks",
                "numbered-ranks",
                f"no rank information (no manifest ranks, no ranks/rank-R.json files): "
                f"{len(roots)} processes numbered {base}..{base + len(roots) - 1} in order of "
                "start time; these are not Horovod/MPI ranks. Map: "
                + ", ".join(f"{e.rank}=pid {e.plog.pid}" for e in roots),
                "warning",
            )
        )
    return issues


def _same_process(pending: list[LogEntry]) -> dict[int, LogEntry]:
    """DFTracer traces that are one process's: the same host and pid, overlapping in time
    (DFTracer 1.x writes an app-annotation file and a POSIX file per process, Stormer's
    test-trace-dist-0 and -1). id(entry) -> the process's first trace (by start)."""
    by_key: dict[tuple, list[LogEntry]] = {}
    for e in pending:
        if e.plog.tracer == "dftracer" and e.plog.pid is not None and e.plog.pid >= 0:
            by_key.setdefault((e.plog.host, e.plog.pid), []).append(e)
    out: dict[int, LogEntry] = {}
    for group in by_key.values():
        group.sort(key=lambda e: (e.plog.start, str(e.path)))
        for e in group[1:]:
            first = next((o for o in group if o is not e and _overlap(o, e)), None)
            if first is not None and id(first) not in out:
                out[id(e)] = first
    return out


def _overlap(a: LogEntry, b: LogEntry) -> bool:
    return a.plog.start <= b.plog.end and b.plog.start <= a.plog.end


def mpi_hosts_of(log: ProcessLog) -> dict[int, str]:
    """rank -> host as the DXT records of an MPI log name them."""
    seg = table_of(log, "segments", ["rank", "host"])
    if seg is None or not seg.num_rows:
        return {}
    pairs = seg.select(["rank", "host"]).group_by(["rank", "host"]).aggregate([])
    return {
        int(r): str(h)
        for r, h in zip(
            pairs.column("rank").to_pylist(), pairs.column("host").to_pylist(), strict=True
        )
        if h is not None
    }


def _short(exe: str, n: int = 60) -> str:
    exe = " ".join(exe.split())
    return exe if len(exe) <= n else exe[: n - 1] + "…"


def mixed_jobs(read: list[LogEntry]) -> list[Issue]:
    """A warning when the Darshan MPI logs come from several jobs (their ranks overlap), or
    when the per-process logs fall into groups that never ran at the same time (runs at
    different times mixed in one folder: one job's processes overlap in time)."""
    mpi_jobs = {e.plog.jobid for e in read if e.plog.mpi and e.plog.tracer == "darshan"}
    if len(mpi_jobs) > 1:
        return [
            Issue(
                "logs",
                "mixed-jobs",
                f"logs of {len(mpi_jobs)} different MPI jobs "
                f"({sorted(mpi_jobs, key=lambda j: (j is None, j or 0))}) in one run: "
                "their ranks overlap",
                "warning",
            )
        ]
    groups = _apart_in_time([e for e in read if not e.plog.mpi])
    if len(groups) < 2:
        return []
    said = "; ".join(
        f"{len(g)} log(s) from {dt.datetime.fromtimestamp(min(e.plog.start for e in g), dt.UTC):%Y-%m-%d %H:%M:%S} UTC, "
        f"e.g. {g[0].path.name}"
        for g in groups
    )
    return [
        Issue(
            "logs",
            "mixed-jobs",
            f"the logs form {len(groups)} groups that never ran at the same time, as runs at "
            f"different times would: {said}; they are analysed as one run: give each run's "
            "logs separately",
            "warning",
        )
    ]


def _apart_in_time(logs: list[LogEntry]) -> list[list[LogEntry]]:
    """The logs grouped by overlapping [start, end] (chains of overlaps), in time order."""
    groups: list[list[LogEntry]] = []
    end = 0.0
    for e in sorted(logs, key=lambda x: x.plog.start):
        if groups and e.plog.start <= end:
            groups[-1].append(e)
            end = max(end, e.plog.end)
        else:
            groups.append([e])
            end = e.plog.end
    return groups


def ranks_from_logs(read: list[LogEntry], mpi_hosts: dict[int, dict[int, str]]) -> list[RankInfo]:
    """The ranks the logs themselves know, when no manifest or rank file names them."""
    seen: dict[int, RankInfo] = {}
    for e in read:
        if e.plog.mpi:
            for r in range(e.plog.nprocs):
                host = mpi_hosts[id(e)].get(r, e.plog.host or "")
                pid = e.plog.pid if r == 0 else -1
                seen.setdefault(r, RankInfo(r, -1, e.plog.nprocs, pid, host))
        elif e.role == "rank":
            seen.setdefault(e.rank, RankInfo(e.rank, -1, -1, e.plog.pid, e.host))
    return [seen[r] for r in sorted(seen)]


def missing_rank_issues(
    entries: list[LogEntry], read: list[LogEntry], ranks: list[RankInfo]
) -> list[Issue]:
    """Every rank the manifest or rank files name should have left a log."""
    have = {e.rank for e in read if e.role == "rank"}
    have |= {r for e in read if e.plog.mpi for r in range(e.plog.nprocs)}
    have |= {e.rank for e in entries if e.log is None and e.rank >= 0}
    failed_logs = {str(e.path) for e in entries if e.log is None}
    why = (
        f" ({len(failed_logs)} log(s) could not be read)"
        if failed_logs
        else "; Darshan writes a log only when the process exits"
    )
    return [
        Issue(
            f"rank {info.rank}",
            "missing-log",
            f"rank {info.rank} (pid {info.pid} on {info.host or 'unknown host'}) has no "
            "readable trace log" + why,
        )
        for info in ranks
        if info.rank not in have
    ]


def duplicate_ranks(read: list[LogEntry]) -> list[Issue]:
    """A warning for each rank that several (non-MPI) logs claim."""
    claims = [e for e in read if e.role == "rank" and not e.plog.mpi]
    same = _same_process(claims)  # (two DFTracer traces of one process are not two claims)
    dup = Counter(e.rank for e in claims if id(e) not in same)
    return [
        Issue(
            f"rank {r}",
            "duplicate-rank",
            f"{n} logs claim to be rank {r}: their I/O is all counted under rank {r}",
            "warning",
        )
        for r, n in dup.items()
        if n > 1
    ]
