"""A large run's Darshan logs in two passes: each log's head first (its process, job, times
and host: :mod:`iosweep.trace.darshan.head`), so that the logs are tied to ranks and put on
one clock before any record is read; then each log's records, read in rank order while the
store is written, a log's segments and counters side by side
(:class:`~iosweep.trace.store.JointParts`).

Read in one pass, every log had to be read before any row was written (a log's rank, and
the run's clock, are known only from all of them), so each log's tables went to a file and
came back (:mod:`iosweep.trace.ingest.parts`): for the ImageNet-scale run's 544 logs, 6 s of
a 45 s ingest. A log whose records cannot be read in the second pass (damage past its job
record) leaves its rows and its process out, and its issue says why; its rank was already
counted as present.

MPI logs keep the one pass: an MPI log's ranks' hosts come from all its records.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from tqdm import tqdm

from iosweep import memory
from iosweep.trace.darshan.head import read_darshan_head
from iosweep.trace.ingest.clock import in_rank_order, placed_parts, processes_of
from iosweep.trace.ingest.find import LogEntry
from iosweep.trace.ingest.readlogs import guarded, read_one, reader_process
from iosweep.trace.logs import ProcessLog
from iosweep.trace.schema import Issue, ProcessInfo
from iosweep.trace.store import JointParts

_TABLES = ("segments", "counters", "app_events")


@dataclass
class Bodies:
    """How the logs' records are read in the second pass: by ``workers`` processes (more than
    one: each log's tables spilled to ``spill_to`` for the writer to take in turn)."""

    workers: int
    spill_to: Path


def streamable(entries: list[LogEntry], isolate: bool) -> bool:
    """Whether logs large enough that their tables would be spilled are read in two passes:
    Darshan logs all, each read in this process (not ``isolate``)."""
    return not isolate and all(e.tracer == "darshan" for e in entries)


def read_heads(entries: list[LogEntry], issues: list[Issue]) -> bool:
    """Each log's head into ``entry.log`` (a log whose head cannot be read: its issue, and no
    log). False, and no log kept, where one of them is an MPI job's: read them whole."""
    bar = tqdm(total=len(entries), desc="reading logs' heads", unit="log", disable=None)
    found: list[Issue] = []
    with bar:
        for e in entries:
            e.log, own = guarded(read_darshan_head, e.path)
            found.extend(own)
            bar.update()
    if any(e.log is not None and e.log.mpi for e in entries):
        for e in entries:
            e.log = None
        return False
    issues.extend(found)
    return True


def _bodies(
    by_rank: list[LogEntry], workers: int, spill_to: Path
) -> Iterator[tuple[ProcessLog | None, list[Issue]]]:
    """Each log read whole, in the order given: in this process, or in ``workers`` processes
    that spill each log's tables (``spill_to``) for this one to take in turn."""
    if workers == 1:
        for e in by_rank:
            yield read_one(e, False)
        return
    # forkserver: a fork of a process running Arrow's threads could deadlock
    ctx = multiprocessing.get_context("forkserver")
    n = len(by_rank)
    keys = [str(i) for i in range(n)]
    with memory.huge_pages():  # (the readers are started by map, at once)
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=reader_process)
        read = pool.map(read_one, by_rank, [False] * n, [spill_to] * n, keys)
    try:
        yield from read
    finally:  # the store's writing failed (a full disk): the logs not begun are not read
        pool.shutdown(wait=True, cancel_futures=True)


def place_streamed(
    read: list[LogEntry], clock_zero: float, issues: list[Issue], bodies: Bodies
) -> tuple[JointParts, Callable[[], list[ProcessInfo]]]:
    """The logs' tables as the store's joint parts, each log read whole when its turn comes
    (its issues then added to ``issues``), and the run's processes once they have been read."""
    by_rank = in_rank_order(read)
    whole: list[LogEntry] = []

    def made() -> Iterator[dict[str, pa.Table | None]]:
        bar = tqdm(total=len(by_rank), desc="reading logs", unit="log", disable=None)
        with bar:
            for e, (log, found) in zip(
                by_rank, _bodies(by_rank, bodies.workers, bodies.spill_to), strict=True
            ):
                bar.update()
                issues.extend(found)
                if log is None:
                    continue
                if log.host != e.plog.host:
                    issues.append(_host_moved(e, log))
                e.log = log
                whole.append(e)
                yield placed_parts(e, clock_zero)

    # Arrow bytes of the tables: ~13x a generated ImageNet run's compressed logs
    need = sum(e.path.stat().st_size for e in read if e.path.exists()) * 16
    joint = JointParts(_TABLES, made, need=need)
    return joint, lambda: processes_of(whole, clock_zero, {})


def _host_moved(e: LogEntry, log: ProcessLog) -> Issue:
    """A log whose readable records name another host than its head did (its first DXT
    module damaged): tied to a rank by the head's."""
    return Issue(
        str(e.path),
        "host",
        f"its records name host {log.host!r}, its first DXT record {e.plog.host!r} (the "
        "records before are damaged): tied to a rank by the latter",
        "warning",
    )
