"""Reading every log on its own (a bad one becomes an issue, the others go on), in parallel
processes when there are many: the store is the same either way."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tqdm import tqdm

from iosweep import memory
from iosweep.trace.dftracer import decode
from iosweep.trace.ingest.find import LogEntry
from iosweep.trace.ingest.parts import spill
from iosweep.trace.logs import LogError, ProcessLog
from iosweep.trace.schema import (
    Issue,
)


def _read(entry: LogEntry, isolate: bool) -> ProcessLog:
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


def guarded(
    read: Callable[[Path], ProcessLog], path: Path
) -> tuple[ProcessLog | None, list[Issue]]:
    """``read(path)``, or the issue that says why it could not be read (never raises: one
    broken log or reader must not stop the other logs)."""
    try:
        log = read(path)
    except LogError as err:
        severity = "warning" if err.kind == "empty" else "error"
        return None, [Issue(err.path, err.kind, err.message, severity)]
    except Exception as err:
        why = f"reader failed: {type(err).__name__}: {err}"
        return None, [Issue(str(path), "unreadable", why)]
    return log, list(log.issues)


def read_one(
    entry: LogEntry, isolate: bool, spill_to: Path | None = None, key: str = ""
) -> tuple[ProcessLog | None, list[Issue]]:
    """One log, or the issue that says why it could not be read (:func:`guarded`); with
    ``spill_to``, its tables moved to files there (:mod:`iosweep.trace.ingest.parts`) named
    after ``key``."""
    log, issues = guarded(lambda p: _read(entry, isolate), entry.path)
    if log is not None and spill_to is not None:  # a full disk stops the ingest
        spill(log, spill_to, key)
    return log, issues


# Below this much DFTracer data, starting reader processes costs more than it saves.
PARALLEL_MIN_BYTES = 32 * 2**20


def read_workers(
    entries: list[LogEntry], requested: int | None = None, spilled: bool = False
) -> int:
    """How many processes read the logs: ``requested``, else one per core (at most 8) when
    there are several logs and enough of them to pay for starting the processes: DFTracer
    traces; Darshan logs only where their tables are spilled (``spilled``: written to files
    by the reader itself). Held tables would travel between processes, which costs more
    than reading Darshan logs in bulk (8 logs of 1.5 M segments: 3.2 s in one, 5.4 s in
    two); spilled, the ImageNet-scale run's 544 logs take 35.9 s in two, 51.5 s in one."""
    if requested is not None:
        return max(1, min(requested, len(entries)))
    pooled = [e for e in entries if (e.tracer == "dftracer" or spilled) and e.path.exists()]
    if len(pooled) < 2 or sum(e.path.stat().st_size for e in pooled) < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(len(os.sched_getaffinity(0)), 8, len(entries)))


def reader_process() -> None:
    """One of several reader processes: each parses on one thread."""
    decode.BULK_THREADS = False


def read_logs(
    entries: list[LogEntry],
    isolate: bool,
    issues: list[Issue],
    workers: int | None = None,
    spill_to: Path | None = None,
) -> int:
    """Read every discovered log, in ``read_workers`` processes (per-process logs are
    independent; the result is the same as one by one); returns how many processes read.
    ``spill_to``: each log's tables go to files there as it is read (``need.spills``)."""
    n, found = read_each(entries, isolate, workers, spill_to)
    for own in found:
        issues.extend(own)
    return n


def read_each(
    entries: list[LogEntry],
    isolate: bool,
    workers: int | None = None,
    spill_to: Path | None = None,
) -> tuple[int, list[list[Issue]]]:
    """:func:`read_logs`, each log's issues apart (in the order of ``entries``)."""
    n = read_workers(entries, workers, spilled=spill_to is not None)
    keys = [str(i) for i in range(len(entries))]
    # progress with an ETA on a terminal; nothing where stderr is a file (Snakemake's log)
    bar = tqdm(total=len(entries), desc="reading logs", unit="log", disable=None, leave=False)
    with bar:
        if n == 1:
            results = []
            for e, k in zip(entries, keys, strict=True):
                results.append(read_one(e, isolate, spill_to, k))
                bar.update()
        else:
            # forkserver: a fork of a process running Arrow's threads could deadlock
            ctx = multiprocessing.get_context("forkserver")
            with (
                memory.huge_pages(),
                ProcessPoolExecutor(n, mp_context=ctx, initializer=reader_process) as pool,
            ):
                n_e = len(entries)
                results = []
                for r in pool.map(read_one, entries, [isolate] * n_e, [spill_to] * n_e, keys):
                    results.append(r)
                    bar.update()
    for e, (log, _found) in zip(entries, results, strict=True):
        e.log = log
    return n, [found for _log, found in results]
