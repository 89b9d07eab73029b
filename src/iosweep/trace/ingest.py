"""Turn a run's per-process trace logs into one trace store (issue 3: ingest and merge).

:func:`ingest` finds the logs under the given paths (both the workflow's run layout and a
plain directory of logs), reads each in isolation (a bad log becomes an :class:`Issue`, the
others go on), ties every log to a rank and host, puts all times on one clock and writes
the store with :func:`iosweep.trace.store.write_store`. How ranks, hosts and the clock are
recovered, and what ``merged.darshan`` holds, is in ``docs/data-model.md``
("Ingest and merge").
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iosweep import memory
from iosweep.files import write_json
from iosweep.trace import jobs
from iosweep.trace.darshan.merge import MergeInput, write_merged_log
from iosweep.trace.dftracer import decode
from iosweep.trace.logs import LogError, ProcessLog
from iosweep.trace.schema import (
    STEPS,
    TABLES,
    Issue,
    ProcessInfo,
    RankInfo,
    RunMeta,
    conform,
    empty_table,
)
from iosweep.trace.store import RUN_JSON, write_store

DARSHAN_SUFFIXES = (".darshan",)
DFTRACER_SUFFIXES = (".pfw", ".pfw.gz")
# darshan-runtime writes <name>.darshan_partial and renames it when the log is complete
UNFINISHED_SUFFIX = ".darshan_partial"
_RANK_DIR = re.compile(r"^rank-(\d+)$")
_RANK_FILE = re.compile(r"^rank-(\d+)\.json$")
MERGED_DARSHAN = "merged.darshan"
INPUTS_JSON = "inputs.json"  # what a store was built from: lets an unchanged input be reused


@dataclass
class _Log:
    """One discovered log file and what became of it."""

    path: Path
    tracer: str  # darshan | dftracer
    dir_rank: int | None = None  # R when the log lies under a traces/rank-R/ directory
    log: ProcessLog | None = None
    # attribution
    rank: int = -1
    role: str = "unknown"
    host: str = ""
    attributed_by: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def plog(self) -> ProcessLog:
        """The log as read; only for entries that were read (``log`` is set)."""
        if self.log is None:
            raise RuntimeError(f"{self.path}: used before it was read")
        return self.log


# ----------------------------------------------------------------------------------------
# discovery
# ----------------------------------------------------------------------------------------


def _tracer_of(path: Path) -> str | None:
    name = path.name
    if name.endswith(DARSHAN_SUFFIXES):
        return "darshan"
    if name.endswith(DFTRACER_SUFFIXES):
        return "dftracer"
    return None


def _dir_rank(path: Path, root: Path) -> int | None:
    """R if ``path`` lies under a ``rank-R`` directory below ``root`` (traces/rank-R/...)."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    for part in reversed(rel.parts[:-1]):
        m = _RANK_DIR.match(part)
        if m:
            return int(m.group(1))
    return None


def discover(inputs: list[Path]) -> tuple[list[_Log], list[Path]]:
    """Logs under ``inputs`` (files or directories, searched recursively), and unfinished ones.

    Files that are not logs (``*.dxt``, ``*.csv``, the store's parquet files ...) are ignored.
    """
    logs: dict[Path, _Log] = {}
    unfinished: list[Path] = []
    for root in inputs:
        root = Path(root)
        if root.is_file():
            candidates, base = [root], root.parent
        elif root.is_dir():
            candidates, base = sorted(p for p in root.rglob("*") if p.is_file()), root
        else:
            raise FileNotFoundError(f"{root}: no such file or directory")
        for p in candidates:
            key = p.resolve()
            if key in logs:
                continue
            tracer = _tracer_of(p)
            if tracer:
                logs[key] = _Log(path=p, tracer=tracer, dir_rank=_dir_rank(p, base))
            elif p.name.endswith(UNFINISHED_SUFFIX):
                unfinished.append(p)
    return list(logs.values()), unfinished


# ----------------------------------------------------------------------------------------
# run context: manifest and rank files
# ----------------------------------------------------------------------------------------


def _load_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: manifest not found") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: manifest is not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: manifest is not a JSON object")
    return data


def _rank_info(d: Any, source: str, issues: list[Issue]) -> RankInfo | None:
    try:
        info = RankInfo(
            rank=int(d["rank"]),
            local_rank=int(d.get("local_rank", -1)),
            size=int(d.get("size", -1)),
            pid=int(d["pid"]),
            host=str(d.get("host") or ""),
        )
    except (TypeError, KeyError, ValueError) as e:
        issues.append(
            Issue(source, "bad-rank-file", f"not a rank record ({type(e).__name__}: {e})")
        )
        return None
    if info.rank < 0 or info.pid <= 0:
        issues.append(Issue(source, "bad-rank-file", f"invalid rank {info.rank} or pid {info.pid}"))
        return None
    return info


def _rank_files(inputs: list[Path]) -> list[Path]:
    """ranks/rank-R.json beside or above each input directory (run dir, or run/logs)."""
    found: dict[Path, Path] = {}
    for root in inputs:
        root = Path(root)
        d = root if root.is_dir() else root.parent
        for cand in (d / "ranks", d.parent / "ranks"):
            if cand.is_dir():
                for f in sorted(cand.iterdir()):
                    if _RANK_FILE.match(f.name):
                        found.setdefault(f.resolve(), f)
                break
    return list(found.values())


def _collect_ranks(
    manifest: dict[str, Any], rank_files: list[Path], issues: list[Issue]
) -> tuple[list[RankInfo], str]:
    """Ranks from the manifest, completed by rank files; and where they came from."""
    ranks: dict[int, RankInfo] = {}
    source = ""
    for i, d in enumerate(manifest.get("ranks") or []):
        info = _rank_info(d, f"manifest ranks[{i}]", issues)
        if info:
            ranks.setdefault(info.rank, info)
            source = "manifest"
    for f in rank_files:
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            issues.append(Issue(str(f), "bad-rank-file", f"not readable JSON ({e})"))
            continue
        info = _rank_info(d, str(f), issues)
        if info is None:
            continue
        known = ranks.get(info.rank)
        if known and (known.pid, known.host) != (info.pid, info.host):
            issues.append(
                Issue(
                    str(f),
                    "bad-rank-file",
                    f"rank {info.rank} is pid {info.pid} on {info.host!r} here but pid "
                    f"{known.pid} on {known.host!r} in the {source or 'other rank files'}",
                )
            )
            continue
        ranks.setdefault(info.rank, info)
        source = source or "rank-file"
    return [ranks[r] for r in sorted(ranks)], source


# ----------------------------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------------------------


def _read(entry: _Log, isolate: bool) -> ProcessLog:
    if entry.tracer == "darshan":
        from iosweep.trace.darshan.read import read_darshan_log, read_darshan_log_isolated

        return (read_darshan_log_isolated if isolate else read_darshan_log)(entry.path)
    try:
        from iosweep.trace.dftracer.read import read_dftracer_trace
    except ImportError as e:
        raise LogError(
            entry.path, "unreadable", f"the DFTracer reader is not available ({e})"
        ) from None
    return read_dftracer_trace(entry.path)


# ----------------------------------------------------------------------------------------
# attribution: which rank (and host) each process belongs to
# ----------------------------------------------------------------------------------------


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


def _attribute(entries: list[_Log], ranks: list[RankInfo], rank_source: str) -> list[Issue]:
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


def _attribute_one(e: _Log, read: list[_Log], index: _RankIndex, rank_source: str) -> Issue | None:
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


def _unattributed(pending: list[_Log]) -> list[Issue]:
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


def _number_processes(pending: list[_Log]) -> list[Issue]:
    """No rank information at all: forked children follow their parent log, the other
    processes are numbered in start order."""
    issues: list[Issue] = []
    by_key = {(e.plog.host, e.plog.pid): e for e in pending}
    by_pid_log: dict[int, list[_Log]] = {}
    for e in pending:
        by_pid_log.setdefault(e.plog.pid, []).append(e)

    def parent_log(e: _Log) -> _Log | None:
        for pid in (e.plog.ppid, e.plog.jobid if e.plog.jobid != e.plog.pid else None):
            if pid is None:
                continue
            p = by_key.get((e.plog.host, pid))
            if p is None and len(by_pid_log.get(pid, [])) == 1:
                p = by_pid_log[pid][0]
            if p is not None and p is not e:
                return p
        return None

    roots = [e for e in pending if parent_log(e) is None]
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


def _mpi_hosts(log: ProcessLog) -> dict[int, str]:
    """rank -> host as the DXT records of an MPI log name them."""
    seg = log.segments
    if not seg.num_rows:
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


# ----------------------------------------------------------------------------------------
# tables on one clock
# ----------------------------------------------------------------------------------------


def _fill_dict_column(col: pa.ChunkedArray, value: str) -> pa.ChunkedArray:
    """Nulls of a dictionary<string> column replaced by ``value``."""
    if col.null_count == 0:
        return col
    filled = pc.fill_null(col.cast(pa.string()), value)
    return filled.cast(col.type)


def _place(table: pa.Table, e: _Log, delta: float, time_cols: tuple[str, ...]) -> pa.Table:
    """One log's table with the attributed rank/host/pid and times shifted by ``delta``."""
    L = e.plog
    n = table.num_rows
    if n == 0:
        return table
    if not L.mpi:
        table = table.set_column(
            table.schema.get_field_index("rank"),
            "rank",
            pa.array(np.full(n, e.rank, np.int32)),
        )
        if "pid" in table.column_names:
            i = table.schema.get_field_index("pid")
            table = table.set_column(i, "pid", pc.fill_null(table.column(i), L.pid))
        if "host" in table.column_names and e.host:
            i = table.schema.get_field_index("host")
            table = table.set_column(i, "host", _fill_dict_column(table.column(i), e.host))
    for c in time_cols:
        if c in table.column_names:
            i = table.schema.get_field_index(c)
            table = table.set_column(i, c, pc.add(table.column(i), delta))
    return table


def _concat(name: str, parts: list[pa.Table]) -> pa.Table:
    parts = [conform(t, name) for t in parts if t is not None and t.num_rows]
    if not parts:
        return empty_table(name)
    # one dictionary per column for the whole run, so readers see plain categories
    return pa.concat_tables(parts).unify_dictionaries()


def _steps_table(manifest: dict[str, Any], clock_zero: float, issues: list[Issue]) -> pa.Table:
    """The manifest's steps on the run's clock (STEPS)."""
    rows: dict[str, list] = {f.name: [] for f in STEPS}

    def when(s: dict[str, Any], key: str) -> float | None:
        return None if s.get(key) is None else float(s[key]) - clock_zero

    for i, s in enumerate(manifest.get("steps") or []):
        try:
            row = {
                "rank": int(s["rank"]),
                "epoch": int(s.get("epoch", -1)),
                "step": int(s.get("step", -1)),
                "start": float(s["start"]) - clock_zero,
                "end": float(s["end"]) - clock_zero,
                "wait_start": when(s, "wait_start"),
                "wait_end": when(s, "wait_end"),
                "samples": None if s.get("samples") is None else int(s["samples"]),
            }
        except (TypeError, KeyError, ValueError, AttributeError) as e:
            issues.append(
                Issue(f"manifest steps[{i}]", "bad-step", f"not a step record ({e})", "warning")
            )
            continue
        for k, v in row.items():
            rows[k].append(v)
    if not rows["rank"]:
        return empty_table("steps")
    return pa.Table.from_arrays([pa.array(rows[f.name], f.type) for f in STEPS], schema=STEPS)


# ----------------------------------------------------------------------------------------
# the run's merged Darshan log
# ----------------------------------------------------------------------------------------


def write_merged_darshan(read: list[_Log], processes: list[ProcessInfo], out: Path) -> list[Issue]:
    """``out``: the run's per-process Darshan logs as one N-rank log (trace/darshan/merge.py),
    for Darshan's own tools. Only for per-process (non-MPI) logs: an MPI job's log already is
    one. Returns the warnings (the store itself is complete either way)."""
    out.unlink(missing_ok=True)
    where = {p.source: p for p in processes}
    logs = [e for e in read if e.tracer == "darshan" and not e.plog.mpi]
    if not logs:
        return []
    inputs = [
        MergeInput(e.path, where[e.path.name].rank, where[e.path.name].host)
        if e.path.name in where
        else MergeInput(e.path, -1)
        for e in logs
    ]
    try:
        res = write_merged_log(inputs, out)
    except Exception as err:  # the store is complete without it: never fail the ingest
        out.unlink(missing_ok=True)
        why = f"the merged log was not written: {type(err).__name__}: {err}"
        return [Issue(str(out), "merge-failed", why, "warning")]
    if not res.left_out:
        return []
    return [
        Issue(
            str(out),
            "merge-partial",
            "the merged log leaves out " + "; ".join(res.left_out),
            "warning",
        )
    ]


# ----------------------------------------------------------------------------------------
# the entry point
# ----------------------------------------------------------------------------------------


def _code_digest() -> str:
    """The trace stage's own source: a store built by other reader code is not reused."""
    h = hashlib.sha256()
    for f in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()


def inputs_fingerprint(files: list[Path], arguments: dict[str, Any]) -> dict[str, Any]:
    """What a store is built from: every input file's path, size and modification time, the
    ingest's arguments and the reader code; equal fingerprints give equal stores."""
    listed = []
    for f in sorted({p.resolve() for p in files}):
        st = f.stat()
        listed.append([str(f), st.st_size, st.st_mtime_ns])
    doc = {"code": _code_digest(), "arguments": arguments, "files": listed}
    key = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
    return {"fingerprint": key, **doc}


def _reusable(out: Path, fingerprint: dict[str, Any]) -> list[tuple[Path, RunMeta]] | None:
    """The store(s) at ``out`` if complete and built from exactly these inputs: the store
    itself (``inputs.json``), or one per job (``jobs.json``)."""
    for listing in (out / INPUTS_JSON, out / jobs.JOBS_JSON):
        try:
            old = json.loads(listing.read_text())
            if old.get("fingerprint") != fingerprint["fingerprint"]:
                continue
            dirs = [out / label for label in old["jobs"]] if "jobs" in old else [out]
            return [(d, RunMeta.read(d / "run.json")) for d in dirs]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def ingest(
    inputs: list[Path],
    out: Path,
    manifest: Path | None = None,
    run_id: str | None = None,
    *,
    isolate: bool = False,
    params: dict | None = None,
    reuse: bool = True,
    workers: int | None = None,
) -> RunMeta:
    """Build the trace store ``out`` from the logs under ``inputs``; return its metadata.

    ``inputs`` are log files or directories (searched recursively for ``*.darshan``,
    ``*.pfw``, ``*.pfw.gz``): a workflow run directory, or any directory of logs. ``manifest``
    is the run manifest; without one, ``manifest.json`` in an input directory is used if
    present. Ranks come from the manifest's ``ranks`` and ``ranks/rank-R.json`` files beside
    (or one level above) an input directory. ``isolate`` reads each Darshan log in a child
    process. ``params`` labels the run's sweep point (framework, nodes, ppn, ...) where no
    manifest says it, e.g. for logs of a past job; the manifest's own values win. Problems
    with the input become ``RunMeta.issues``; the store is written even
    when no log could be read (``RunMeta.processes`` is then empty). With ``reuse``, a store
    already at ``out`` that was built from the same files (paths, sizes, modification times),
    arguments and reader code is returned as it is (``inputs.json`` records them).
    ``workers`` processes read the logs (default: :func:`read_workers`).

    Logs of several unrelated jobs (:mod:`iosweep.trace.jobs`) raise ValueError naming them:
    :func:`ingest_jobs` writes one store per job instead.
    """
    stores = ingest_jobs(
        inputs,
        out,
        manifest,
        run_id,
        isolate=isolate,
        params=params,
        reuse=reuse,
        workers=workers,
        split=False,
    )
    return stores[0][1]


def ingest_jobs(
    inputs: list[Path],
    out: Path,
    manifest: Path | None = None,
    run_id: str | None = None,
    *,
    isolate: bool = False,
    params: dict | None = None,
    reuse: bool = True,
    workers: int | None = None,
    split: bool = True,
) -> list[tuple[Path, RunMeta]]:
    """Like :func:`ingest`, but logs of several jobs become one store per job.

    With one job the store is ``out`` itself; with several, ``out/<job>/`` for each, listed
    in ``out/jobs.json``, each with a ``mixed-jobs`` warning naming all of them. Logs that
    could not be read belong to no known job: their errors go into every job's store.
    Returns (store path, metadata) per job; with ``split`` False, several jobs raise
    ValueError instead.
    """
    inputs = [Path(p) for p in inputs]
    out = Path(out)
    issues: list[Issue] = []
    memory.map_large_arrays()
    if manifest is None:
        found = [p / "manifest.json" for p in inputs if (p / "manifest.json").is_file()]
        manifest = found[0] if found else None
    man = _load_manifest(manifest) if manifest is not None else {}

    entries, unfinished = discover(inputs)
    out_resolved = out.resolve()
    entries = [e for e in entries if out_resolved not in e.path.resolve().parents]
    rank_files = _rank_files(inputs)
    used = [e.path for e in entries] + unfinished + rank_files + ([manifest] if manifest else [])
    arguments = {"run_id": run_id, "isolate": isolate, "params": params or {}}
    fingerprint = inputs_fingerprint(used, arguments)
    if reuse and (stores := _reusable(out, fingerprint)) is not None:
        return stores
    _clear_outputs(out)
    for p in unfinished:
        issues.append(
            Issue(
                str(p),
                "truncated",
                "unfinished Darshan log (.darshan_partial): the process was still writing it "
                "or died while writing it; collect logs only after every process has exited",
            )
        )
    ranks, rank_source = _collect_ranks(man, rank_files, issues)
    readers = _read_all(entries, isolate, issues, workers)
    read = [e for e in entries if e.log is not None]
    # a manifest or rank files describe one run: its logs are never split
    groups = jobs.group_jobs([e.plog for e in read]) if not (man or rank_files) and read else []
    if len(groups) > 1:
        if not split:
            raise ValueError(
                f"the logs come from {len(groups)} different jobs "
                f"({jobs.describe([e.plog for e in read], groups)}): give each job's logs "
                "separately, or use `iosweep ingest`, which writes one store per job"
            )
        return _ingest_split(
            inputs,
            out,
            run_id,
            params,
            entries,
            read,
            groups,
            issues,
            {**fingerprint, "logs": len(entries), "read_processes": readers},
        )
    issues.extend(_mixed_jobs(read))
    meta = _build_store(
        out, man, entries, ranks, rank_source, issues, inputs=inputs, run_id=run_id, params=params
    )
    # last: only a finished store is reused
    write_json(out / INPUTS_JSON, {**fingerprint, "logs": len(entries), "read_processes": readers})
    return [(out, meta)]


def _ingest_split(
    inputs: list[Path],
    out: Path,
    run_id: str | None,
    params: dict | None,
    entries: list[_Log],
    read: list[_Log],
    groups: list[tuple[str, list[int]]],
    issues: list[Issue],
    inputs_doc: dict[str, Any],
) -> list[tuple[Path, RunMeta]]:
    """One store per job under ``out``; ``jobs.json`` lists them (and lets them be reused)."""
    base = run_id or (inputs[0].name if inputs else "run")
    warning = Issue(
        "logs",
        "mixed-jobs",
        f"the input holds logs of {len(groups)} unrelated jobs, ingested as {len(groups)} "
        f"separate runs: {jobs.describe([e.plog for e in read], groups)}",
        "warning",
    )
    read_paths = {str(e.path) for e in read}
    # errors of logs that were not read (or not finished) may belong to any of the jobs
    shared = [i for i in issues if i.source not in read_paths]
    stores = []
    for label, idx in groups:
        job = [read[i] for i in idx]
        own = {str(e.path) for e in job}
        job_issues = [warning, *shared, *(i for i in issues if i.source in own)]
        meta = _build_store(
            out / label,
            {},
            job,
            [],
            "",
            job_issues,
            inputs=inputs,
            run_id=f"{base}.{label}",
            params=params,
        )
        stores.append((out / label, meta))
    write_json(out / jobs.JOBS_JSON, {**inputs_doc, "jobs": [label for label, _ in groups]})
    return stores


def _clear_outputs(out: Path) -> None:
    """Forget what an earlier ingest wrote to ``out``: its reuse record, and the per-job
    stores of a split one (they would be analysed as if they were current)."""
    (out / INPUTS_JSON).unlink(missing_ok=True)
    listing = out / jobs.JOBS_JSON
    try:
        old = json.loads(listing.read_text()).get("jobs") or []
    except (OSError, ValueError, AttributeError):
        old = []
    listing.unlink(missing_ok=True)
    # a single store written here before: gone when its logs turn out to be several jobs
    for name in (RUN_JSON, MERGED_DARSHAN, *(f"{t}.parquet" for t in TABLES)):
        (out / name).unlink(missing_ok=True)
    for label in old:
        if isinstance(label, str) and label and "/" not in label and label not in (".", ".."):
            shutil.rmtree(out / label, ignore_errors=True)


def _build_store(
    out: Path,
    man: dict[str, Any],
    entries: list[_Log],
    ranks: list[RankInfo],
    rank_source: str,
    issues: list[Issue],
    *,
    inputs: list[Path],
    run_id: str | None,
    params: dict | None,
) -> RunMeta:
    """Attribute ``entries`` (read or not) to ranks, put them on one clock, write the store."""
    read = [e for e in entries if e.log is not None]
    issues.extend(_attribute(entries, ranks, rank_source))

    # one clock: the manifest's start time, else the earliest log start
    if isinstance(man.get("start_time"), (int, float)):
        clock_zero = float(man["start_time"])
    elif read:
        clock_zero = min(e.plog.start for e in read)
    else:
        clock_zero = 0.0

    # an MPI log holds its ranks itself; DXT records name each rank's host
    mpi_hosts = {id(e): _mpi_hosts(e.plog) for e in read if e.plog.mpi}
    if not ranks:  # no manifest/rank files: the ranks are those the logs know
        ranks = _ranks_from_logs(read, mpi_hosts)
    tracer = man.get("tracer")
    tracer_name = str(tracer.get("name", "") if isinstance(tracer, dict) else tracer or "")
    # manifests of other tools may name the tracer among the sweep point's parameters only
    tracer_name = tracer_name or str((man.get("params") or {}).get("tracer") or "")
    if tracer_name != "none" and (rank_source or man):
        issues.extend(_missing_ranks(entries, read, ranks))
    issues.extend(_duplicate_ranks(read))

    tables, processes = _place_all(read, clock_zero, mpi_hosts)
    steps = _steps_table(man, clock_zero, issues)
    meta = _run_meta(man, inputs, run_id, params, tracer_name, clock_zero, ranks, processes, issues)
    write_store(out, meta, {**tables, "steps": steps})
    problems = write_merged_darshan(read, processes, out / MERGED_DARSHAN)
    if problems:
        meta.issues.extend(problems)
        meta.write(out / "run.json")
    return meta


def _read_one(entry: _Log, isolate: bool) -> tuple[ProcessLog | None, list[Issue]]:
    """One log, or the issue that says why it could not be read (never raises: one broken
    reader must not stop the other logs)."""
    try:
        log = _read(entry, isolate)
    except LogError as err:
        severity = "warning" if err.kind == "empty" else "error"
        return None, [Issue(err.path, err.kind, err.message, severity)]
    except Exception as err:
        why = f"reader failed: {type(err).__name__}: {err}"
        return None, [Issue(str(entry.path), "unreadable", why)]
    return log, list(log.issues)


# Below this much DFTracer data, starting reader processes costs more than it saves.
PARALLEL_MIN_BYTES = 32 * 2**20


def read_workers(entries: list[_Log], requested: int | None = None) -> int:
    """How many processes read the logs: ``requested``, else one per core (at most 8) when
    there are several DFTracer traces and enough of them to pay for starting the processes.
    Darshan logs are read in one: libdarshan-util decodes them faster than their tables
    travel between processes (8 logs of 1.5 M segments: 3.2 s in one, 5.4 s in two)."""
    if requested is not None:
        return max(1, min(requested, len(entries)))
    dft = [e for e in entries if e.tracer == "dftracer" and e.path.exists()]
    if len(dft) < 2 or sum(e.path.stat().st_size for e in dft) < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(len(os.sched_getaffinity(0)), 8, len(entries)))


def _reader_process() -> None:
    """One of several reader processes: each parses on one thread."""
    decode.BULK_THREADS = False


def _read_all(
    entries: list[_Log], isolate: bool, issues: list[Issue], workers: int | None = None
) -> int:
    """Read every discovered log, in ``read_workers`` processes (per-process logs are
    independent; the result is the same as one by one); returns how many processes read."""
    n = read_workers(entries, workers)
    if n == 1:
        results = [_read_one(e, isolate) for e in entries]
    else:
        # forkserver: a fork of a process running Arrow's threads could deadlock
        ctx = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(n, mp_context=ctx, initializer=_reader_process) as pool:
            results = list(pool.map(_read_one, entries, [isolate] * len(entries)))
    for e, (log, found) in zip(entries, results, strict=True):
        e.log = log
        issues.extend(found)
    return n


def _mixed_jobs(read: list[_Log]) -> list[Issue]:
    """A warning when the Darshan MPI logs come from several jobs (their ranks overlap)."""
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
    return []


def _ranks_from_logs(read: list[_Log], mpi_hosts: dict[int, dict[int, str]]) -> list[RankInfo]:
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


def _missing_ranks(entries: list[_Log], read: list[_Log], ranks: list[RankInfo]) -> list[Issue]:
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


def _duplicate_ranks(read: list[_Log]) -> list[Issue]:
    """A warning for each rank that several (non-MPI) logs claim."""
    dup = Counter(e.rank for e in read if e.role == "rank" and not e.plog.mpi)
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


# (table, the ProcessLog attribute holding it, its time columns)
_PLACED = (
    ("segments", "segments", ("start", "end")),
    ("counters", "counters", ("open_start", "close_end")),
    ("app_events", "app_events", ("start", "end")),
)


def _place_all(
    read: list[_Log], clock_zero: float, mpi_hosts: dict[int, dict[int, str]]
) -> tuple[dict[str, Callable[[], pa.Table]], list[ProcessInfo]]:
    """One ProcessInfo per process, and per table a function that puts every log's part of it
    on the run's clock and concatenates them.

    The store writes one table after the other, and each builder lets go of the logs' parts
    as it takes them: only one concatenated table is in memory at a time (ten million
    DFTracer events: 0.3 GiB less at the peak)."""
    processes: list[ProcessInfo] = []
    for e in read:
        L = e.plog
        # an MPI log is one process per rank; only rank 0's pid may be known (the log's name)
        members = (
            [(r, L.pid if r == 0 else -1, mpi_hosts[id(e)].get(r, e.host)) for r in range(L.nprocs)]
            if L.mpi
            else [(e.rank, L.pid, e.host)]
        )
        for rank, pid, host in members:
            processes.append(
                ProcessInfo(
                    source=L.source.name,
                    pid=pid,
                    host=host,
                    rank=rank,
                    role=e.role,
                    exe=L.exe,
                    start=L.start - clock_zero,
                    end=L.end - clock_zero,
                    tracer=L.tracer,
                    log_version=L.version,
                    incomplete=list(L.incomplete),
                    attributed_by=e.attributed_by,
                )
            )
    role_order = {"rank": 0, "worker": 1, "child": 2, "unknown": 3}
    processes.sort(key=lambda p: (p.rank < 0, p.rank, role_order.get(p.role, 9), p.start or 0))

    def builder(name: str, attr: str, time_cols: tuple[str, ...]) -> Callable[[], pa.Table]:
        def build() -> pa.Table:
            parts = []
            for e in read:
                table = getattr(e.plog, attr)
                if table is not None:
                    parts.append(_place(table, e, e.plog.start - clock_zero, time_cols))
                    setattr(e.plog, attr, None)  # its part now lives in ``parts``
            return _concat(name, parts)

        return build

    return {name: builder(name, attr, cols) for name, attr, cols in _PLACED}, processes


def _run_meta(
    man: dict[str, Any],
    inputs: list[Path],
    run_id: str | None,
    params: dict | None,
    tracer_name: str,
    clock_zero: float,
    ranks: list[RankInfo],
    processes: list[ProcessInfo],
    issues: list[Issue],
) -> RunMeta:
    """The store's run.json: the manifest's facts plus what ingesting found."""
    incomplete = any(i.severity == "error" for i in issues)
    status = str(man.get("status") or "ok")
    if incomplete and status == "ok":
        status = "partial"
    if not run_id:
        run_id = str(man.get("run_id") or (inputs[0].name if inputs else "run"))
    tracers = sorted({p.tracer for p in processes})
    start = man.get("start_time")
    end = man.get("end_time")
    return RunMeta(
        run_id=run_id,
        clock_zero=clock_zero,
        params={**(params or {}), **(man.get("params") or {})},
        tracer=tracer_name or "+".join(tracers),
        status=status,
        start=float(start) - clock_zero
        if isinstance(start, (int, float))
        else min((p.start for p in processes if p.start is not None), default=None),
        end=float(end) - clock_zero
        if isinstance(end, (int, float))
        else max((p.end for p in processes if p.end is not None), default=None),
        ranks=ranks,
        processes=processes,
        issues=issues,
        incomplete=incomplete,
        versions={str(k): str(v) for k, v in (man.get("versions") or {}).items()},
        command=[str(c) for c in man.get("command") or []],
        manifest=man,
    )
