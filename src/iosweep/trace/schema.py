"""The one data model of iosweep: the trace store every stage reads and writes.

A *trace store* is a directory per run (see ``docs/data-model.md``)::

    STORE/
      run.json             run metadata (RunMeta): sweep point, ranks, processes, clock, issues
      segments.parquet     one row per traced I/O operation (SEGMENTS)
      counters.parquet     per-file, per-process counters (COUNTERS) - Darshan only
      steps.parquet        training step / epoch timestamps from the manifest (STEPS)
      app_events.parquet   application-level events, e.g. DFTracer annotations (APP_EVENTS)

Times in every table are float64 seconds from the run's start (``RunMeta.clock_zero``,
Unix epoch seconds), on one clock for all ranks and hosts.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from iosweep.files import shown, write_text

SCHEMA_VERSION = 1

_dict_str = pa.dictionary(pa.int32(), pa.string())

#: One traced I/O operation (a DXT segment, or a DFTracer read/write event).
SEGMENTS = pa.schema(
    [
        pa.field("rank", pa.int32(), nullable=False),  # Horovod rank; -1 when unknown
        pa.field("host", _dict_str),
        pa.field("pid", pa.int64()),  # process that issued the op (a forked worker keeps its pid)
        pa.field("thread", pa.int64()),  # null where the tracer does not record it (DXT)
        pa.field("file_id", pa.uint64()),  # Darshan record id, or hash of the path
        pa.field("path", _dict_str),
        pa.field("module", _dict_str),  # POSIX | STDIO | MPIIO
        pa.field("op", _dict_str),  # read | write
        pa.field("offset", pa.int64()),  # -1 where unknown
        pa.field("length", pa.int64()),
        pa.field("start", pa.float64()),  # seconds from run start
        pa.field("end", pa.float64()),
        pa.field("source", _dict_str),  # basename of the log the segment came from
    ],
    metadata={"iosweep.table": "segments", "iosweep.schema_version": str(SCHEMA_VERSION)},
)

#: Darshan's 10 access-size bins (SIZE_READ_0_100 ... SIZE_READ_1G_PLUS), lower bounds in bytes.
SIZE_BINS = [
    "0_100",
    "100_1K",
    "1K_10K",
    "10K_100K",
    "100K_1M",
    "1M_4M",
    "4M_10M",
    "10M_100M",
    "100M_1G",
    "1G_PLUS",
]
SIZE_BIN_LOWER = [0, 100, 1024, 10240, 102400, 1048576, 4194304, 10485760, 104857600, 1073741824]


def darshan_size_bin(length: Any) -> np.ndarray:
    """Index into :data:`SIZE_BINS` of each request size, as darshan-runtime counts it
    (DARSHAN_BUCKET_INC): a bin holds its upper bound, 100 B in ``0_100``, 1 MiB in ``100K_1M``."""
    return np.searchsorted(np.array(SIZE_BIN_LOWER[1:]), length, side="left")


#: Darshan's four most common access sizes per record (ACCESS1..4)
ACCESS_SLOTS = (1, 2, 3, 4)

#: Per file, per process counters from Darshan's POSIX and STDIO modules.
COUNTERS = pa.schema(
    [
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("host", _dict_str),
        pa.field("pid", pa.int64()),
        pa.field("file_id", pa.uint64()),
        pa.field("path", _dict_str),
        pa.field("module", _dict_str),
        pa.field("opens", pa.int64()),
        pa.field("stats", pa.int64()),
        pa.field("seeks", pa.int64()),
        pa.field("fsyncs", pa.int64()),  # POSIX_FSYNCS + POSIX_FDSYNCS; STDIO_FLUSHES
        pa.field("reads", pa.int64()),
        pa.field("writes", pa.int64()),
        pa.field("bytes_read", pa.int64()),
        pa.field("bytes_written", pa.int64()),
        pa.field("max_byte_read", pa.int64()),
        pa.field("max_byte_written", pa.int64()),
        pa.field("read_time", pa.float64()),  # cumulative seconds
        pa.field("write_time", pa.float64()),
        pa.field("meta_time", pa.float64()),
        pa.field("open_start", pa.float64()),  # seconds from run start; null if never opened
        pa.field("close_end", pa.float64()),
        *[pa.field(f"size_read_{b}", pa.int64()) for b in SIZE_BINS],
        *[pa.field(f"size_write_{b}", pa.int64()) for b in SIZE_BINS],
        # MPIIO only: of the reads/writes above, the collective ones (MPI_File_*_all)
        pa.field("collective_reads", pa.int64()),
        pa.field("collective_writes", pa.int64()),
        # MPIIO only: of the reads/writes above, the non-blocking ones (MPI_File_i*)
        pa.field("nonblocking_reads", pa.int64()),
        pa.field("nonblocking_writes", pa.int64()),
        # POSIX only: requests not aligned, in memory or in the file, to the file system's
        # alignment (file_alignment bytes: its block size; on Lustre, the stripe size)
        pa.field("mem_not_aligned", pa.int64()),
        pa.field("file_not_aligned", pa.int64()),
        pa.field("file_alignment", pa.int64()),
        # POSIX only: of the reads/writes above, those at a higher offset than the previous
        # one (sequential) and, among them, those right where the previous one ended
        pa.field("seq_reads", pa.int64()),
        pa.field("seq_writes", pa.int64()),
        pa.field("consec_reads", pa.int64()),
        pa.field("consec_writes", pa.int64()),
        # POSIX and MPIIO only: the four most common request sizes (reads and writes
        # together) and how many requests had each (*_ACCESS1..4_ACCESS / _COUNT)
        *[pa.field(f"access{i}_{k}", pa.int64()) for i in ACCESS_SLOTS for k in ("size", "count")],
        # LUSTRE only (a file's layout, no I/O): its first component's stripe size and count
        pa.field("stripe_size", pa.int64()),
        pa.field("stripe_count", pa.int64()),
        # a file shared by all ranks that Darshan reduced to one record (rank -1): its
        # counters are sums over the ranks; these say what the fastest and slowest rank
        # (by I/O time on the file) did, and the variance across ranks. Null otherwise.
        pa.field("fastest_rank", pa.int64()),
        pa.field("fastest_rank_bytes", pa.int64()),
        pa.field("fastest_rank_time", pa.float64()),
        pa.field("slowest_rank", pa.int64()),
        pa.field("slowest_rank_bytes", pa.int64()),
        pa.field("slowest_rank_time", pa.float64()),
        pa.field("variance_rank_time", pa.float64()),
        pa.field("variance_rank_bytes", pa.float64()),
        pa.field("source", _dict_str),
    ],
    metadata={"iosweep.table": "counters", "iosweep.schema_version": str(SCHEMA_VERSION)},
)

#: Training progress from the manifest: one row per (rank, epoch, step); step = -1 is the epoch.
#: A step's start..end is what the training script timed as the step; the ImageNet-style
#: scripts time the compute alone (batch in hand to optimizer step done) and the wait for the
#: batch apart (wait_start..wait_end). The MNIST scripts time the wait inside the step.
STEPS = pa.schema(
    [
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("epoch", pa.int32()),
        pa.field("step", pa.int32()),  # -1 for the whole epoch
        pa.field("start", pa.float64()),
        pa.field("end", pa.float64()),
        pa.field("wait_start", pa.float64()),  # null where the script did not time the wait
        pa.field("wait_end", pa.float64()),
        pa.field("samples", pa.int64()),  # samples of the step's batch on this rank, if known
    ],
    metadata={"iosweep.table": "steps", "iosweep.schema_version": str(SCHEMA_VERSION)},
)

#: Application-level events that are not POSIX/STDIO I/O (DFTracer categories such as
#: ``compute`` or ``IO`` annotated by the training script, and other non-I/O calls).
APP_EVENTS = pa.schema(
    [
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("host", _dict_str),
        pa.field("pid", pa.int64()),
        pa.field("thread", pa.int64()),
        pa.field("cat", _dict_str),
        pa.field("name", _dict_str),
        pa.field("start", pa.float64()),
        pa.field("end", pa.float64()),
        pa.field("source", _dict_str),
        # file the call was about (POSIX/STDIO metadata calls such as open/lseek/close);
        # null for application annotations and calls on no traced file
        pa.field("path", _dict_str),
        # the epoch and step an annotation names in its args (DFTracer's AI events; iter()'s
        # ``step``, counted from 1 in each loop); null where it names none
        pa.field("epoch", pa.int64()),
        pa.field("step", pa.int64()),
    ],
    metadata={"iosweep.table": "app_events", "iosweep.schema_version": str(SCHEMA_VERSION)},
)

STORE_TABLES = {
    "segments": SEGMENTS,
    "counters": COUNTERS,
    "steps": STEPS,
    "app_events": APP_EVENTS,
}


@dataclass
class RankInfo:
    """One Horovod rank, as the per-rank wrapper recorded it before exec'ing Python."""

    rank: int
    local_rank: int
    size: int
    pid: int
    host: str


@dataclass
class ProcessInfo:
    """One traced process (one per-process log) and how it was tied to a rank."""

    source: str  # log file basename
    pid: int
    host: str
    rank: int  # -1 when it could not be tied to a rank
    role: str  # "rank" | "worker" (forked by a rank, e.g. DataLoader) | "child" (other exe) | "unknown"
    exe: str = ""
    start: float | None = None  # seconds from run start
    end: float | None = None
    tracer: str = ""  # darshan | dftracer
    log_version: str = ""
    incomplete: list[str] = field(default_factory=list)  # modules whose data ran out of memory
    attributed_by: str = ""  # how the rank was found: rank-file, parent-pid, log-dir, mpi, numbered


@dataclass
class Issue:
    """Something wrong with the input, named so a user can find it."""

    source: str  # the file (or rank, or key) that is the culprit
    kind: str  # truncated | corrupt | empty | no-dxt | partial-dxt | partial-counters | missing-log | failed-rank | ...
    message: str
    severity: str = "error"  # error (data lost) | warning (data kept, caveat)
    # the figure the issue makes unknown, where it is one: "run_time" (a log's job record
    # is impossible); None: what ``kind`` says of the source
    field: str | None = None

    def __post_init__(self) -> None:  # a file name that is not UTF-8 (files.shown)
        self.source, self.message = shown(self.source), shown(self.message)


#: Issue.field of an issue that makes the run's length unknown
RUN_TIME = "run_time"
#: a run longer than this is a clock or unit error (any tracer's times)
RUN_CEILING_S = 366 * 86400.0


@dataclass
class RunMeta:
    """Run metadata (``run.json``): the manifest plus what ingesting the logs found."""

    run_id: str
    clock_zero: float  # Unix epoch seconds that time 0.0 in every table stands for
    params: dict[str, Any] = field(
        default_factory=dict
    )  # sweep point: framework, nodes, ppn, rep, ...
    tracer: str = ""
    status: str = "ok"  # ok | failed | skipped | partial
    start: float | None = None  # run start/end, seconds from clock_zero
    end: float | None = None
    ranks: list[RankInfo] = field(default_factory=list)
    processes: list[ProcessInfo] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    incomplete: bool = False  # True if any trace is missing, truncated or partial
    versions: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)  # the run manifest as written, if any
    # which application events are compute, fetch, ... (`iosweep ingest --phase`): they
    # replace the analysis settings' rules of the kinds they name
    phases: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        # the records' dataclasses as dicts, the rest as it is: asdict of the whole would copy
        # the manifest (its steps: 10 k at ImageNet scale) element by element first
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("ranks", "processes", "issues"):
            d[key] = [asdict(x) for x in d[key]]
        return json.dumps(d, indent=2, sort_keys=False, default=str)

    def write(self, path: Path) -> None:
        write_text(path, self.to_json() + "\n")  # whole or not at all: it marks a store complete

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunMeta:
        d = dict(d)
        d["ranks"] = [RankInfo(**r) for r in d.get("ranks", [])]
        d["processes"] = [ProcessInfo(**p) for p in d.get("processes", [])]
        d["issues"] = [Issue(**i) for i in d.get("issues", [])]
        return cls(**d)

    @classmethod
    def read(cls, path: Path) -> RunMeta:
        """The run.json at ``path``: parsed once while it is unchanged (a run analysed in parts
        opens its store several times a part; a manifest's steps made it 16 MB at 100 M
        segments, 0.55 s a parse), a new RunMeta each time."""
        st = Path(path).stat()
        # (a file written again is a new inode: written atomically, as write() does; and its
        # times, coarser than the writes of a test, only help)
        d = _parsed(str(Path(path).resolve()), (st.st_ino, st.st_mtime_ns, st.st_size))
        # each RunMeta its own containers: one changed by its reader leaves the kept one alone
        return cls.from_dict({k: copy.copy(v) for k, v in d.items()})


@functools.lru_cache(maxsize=4)
def _parsed(path: str, version: tuple[int, int, int]) -> dict[str, Any]:
    """A run.json's content, kept while its file is unchanged (``version``: its inode,
    modification time and size)."""
    return json.loads(Path(path).read_text())


def empty_table(name: str) -> pa.Table:
    """An empty table with the named schema (a run with no I/O still has every table)."""
    return STORE_TABLES[name].empty_table()


def conform(table: pa.Table, name: str) -> pa.Table:
    """Cast ``table`` to the named schema: columns reordered, missing nullable columns added."""
    schema = STORE_TABLES[name]
    if table.schema.equals(schema):  # a reader's table already is (a cast is not free)
        return table
    # each name looked up once: Table.column_names is a new list at every call, which made
    # this quadratic in the columns (13 ms for a 5 k-row counter table of ~200 columns)
    have = dict(zip(table.column_names, table.columns, strict=True))
    cols = []
    for f in schema:
        col = have.get(f.name)
        if col is not None:  # a column already of the type is not cast (nor copied)
            cols.append(col if col.type.equals(f.type) else col.cast(f.type))
        elif f.nullable:
            cols.append(pa.nulls(table.num_rows, f.type))
        else:
            raise ValueError(f"{name} table lacks required column {f.name!r}")
    return pa.Table.from_arrays(cols, schema=schema)
