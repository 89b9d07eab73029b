"""What a tracer reader hands to the merge: one per-process (or, for MPI Darshan, per-job) log.

Readers (:mod:`iosweep.trace.darshan.read`, :mod:`iosweep.trace.dftracer.read`) turn one log file into a
:class:`ProcessLog`; :mod:`iosweep.trace.ingest` ties logs to ranks and hosts, puts them on the
run's clock and writes the trace store (:mod:`iosweep.trace.schema`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from iosweep.trace.schema import Issue


class LogError(Exception):
    """A log that cannot be read. ``kind`` is one of Issue.kind's values."""

    def __init__(self, path: Path | str, kind: str, message: str):
        self.path = str(path)
        self.kind = kind
        self.message = message
        super().__init__(f"{path}: {message}")

    def as_issue(self) -> Issue:
        return Issue(source=self.path, kind=self.kind, message=self.message)


@dataclass
class ProcessLog:
    """One log file, decoded. Times in its tables are seconds from ``start`` (the log's own zero)."""

    source: Path
    tracer: str  # "darshan" | "dftracer"
    pid: int  # process id (for MPI Darshan logs: the pid of the log's rank 0)
    exe: str  # executable or command line as the tracer recorded it
    start: float  # Unix epoch seconds of the log's time zero
    end: float  # Unix epoch seconds when the log ends
    # SEGMENTS columns; rank = the log's own rank (-1 where it has none); None in a head
    segments: pa.Table | None
    host: str | None = None  # where the tracer recorded it (DXT records, DFTracer hhash)
    jobid: int | None = None
    nprocs: int = 1
    mpi: bool = False  # True: ranks inside the log are real MPI ranks
    version: str = ""  # log format / tracer version
    counters: pa.Table | None = None  # COUNTERS columns (Darshan); None if the tracer has none
    app_events: pa.Table | None = None  # APP_EVENTS columns (DFTracer)
    incomplete: list[str] = field(default_factory=list)  # modules flagged partial by the tracer
    issues: list[Issue] = field(default_factory=list)  # warnings found while reading
    ppid: int | None = None  # parent process id, where the tracer records it
    # tracer-specific header fields kept for reference (Darshan: uid, lib_ver, metadata,
    # mounts, modules with their format versions and partial flags)
    header: dict[str, Any] = field(default_factory=dict)
    # tables moved to disk until the store is written (iosweep.trace.ingest.parts):
    # attr -> (file, the table's Arrow bytes)
    spilled: dict[str, tuple[Path, int]] = field(default_factory=dict)
    # only the header and job record read (iosweep.trace.darshan.head): no tables, no issues
    # of its records yet; ingest reads the rest as it writes the store (ingest.stream)
    head: bool = False
