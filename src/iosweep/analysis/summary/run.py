"""``summary.json``'s models: :class:`RunSummary`, its sections, and :class:`AnalysisFailure`
(docs/analysis.md says what each key holds)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from iosweep.analysis.summary.base import Model
from iosweep.analysis.summary.pipeline import Overlap, Pipeline, TimelineRecord


class Issue(Model):
    """Something wrong or missing in a run's logs (iosweep.trace.schema.Issue)."""

    source: str
    kind: str
    message: str
    severity: Literal["error", "warning"] = "error"
    field: str | None = None  # the figure it makes unknown ("run_time"), where it is one


class RankHost(Model):
    rank: int
    host: str


class RunInfo(Model):
    """How the run was made, from its trace store's ``run.json``: what the report states
    about provenance without opening the store."""

    clock_zero: float | None = None  # Unix seconds that time 0.0 of every time stands for
    command: list[str] = Field(default_factory=list)
    ranks: list[RankHost] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)
    # the run manifest as written, less its step records (the store's steps table)
    manifest: dict[str, Any] = Field(default_factory=dict)


class RunWindow(Model):
    start: float | None
    end: float | None
    run_time: float | None  # None: not known (a log's job record is impossible)


class Ranks(Model):
    count: int
    kind: Literal["rank", "process"]
    with_io: int
    nodes: int | None  # None: unknown (a rank's host is not in the trace)
    hosts: list[str]  # those known
    per_node: dict[str, int]
    # ranks whose figures are not known: no trace, or counters that held impossible values
    unknown: list[int] = Field(default_factory=list)


class Trace(Model):
    segments: int
    counter_records: int
    dxt_available: bool
    completeness: float | None
    excluded_ops: int
    excluded_records: int = 0  # counter records of analysed modules on excluded paths
    excluded_paths: list[str] = Field(default_factory=list)  # the first 5, by path (<STDOUT>)
    unsized_io_calls: int = 0  # DFTracer reads/writes without file or size (no metadata)
    unattributed: dict[str, int | float]
    # MPI files reduced by Darshan to one record: records, spread (to ranks), traced, ranks,
    # and those whose bytes went to a few ranks (analysis.shared.SharedRecords)
    shared_records: dict[str, Any] = Field(default_factory=dict)


class Epoch(Model):
    epoch: int
    start: float
    end: float


class Phase(Model):
    """One I/O phase (a row of ``phases.parquet``): operations of all ranks merged in time."""

    phase: int
    start: float
    end: float
    duration: float
    ops: int
    reads: int
    writes: int
    bytes_read: int
    bytes_written: int
    ranks: int
    main_class: str
    where: str
    epoch: int | None


class Phases(Model):
    count: int
    io_active_time: float | None = None
    phases: list[Phase]  # the first 100


class Signature(Model):
    signature: str  # the rank's operations in time order, run-length compressed
    runs: int
    ops: int
    shape: str  # hash of the sequence's shape (no names, no offsets)


class SignatureGroup(Model):
    ranks: list[int]
    example: str | None


class Temporal(Model):
    signatures: dict[str, Signature]  # rank -> its signature
    same_sequence: dict[str, bool | None]  # class (or "all") -> every rank alike
    signature_groups: dict[str, list[SignatureGroup]]  # class (or "all") -> ranks alike
    phases: Phases
    epochs: list[Epoch]


class CounterPattern(Model):
    ops: int  # POSIX calls the counters count
    consecutive: int  # at the previous call's end
    sequential: int  # further on (not consecutive)
    random: int  # before the previous call's end


class Spatial(Model):
    counters: dict[str, CounterPattern] | None = None  # read / write, from Darshan's counters
    ops: int
    ops_by_category: dict[str, int]
    share_by_category: dict[str, float | None]
    patterns: dict[str, int]


class Stat(Model):
    min: float
    mean: float
    median: float
    max: float
    sum: float


class Spread(Model):
    min: float
    median: float
    max: float


class MinMeanMax(Model):
    min: float
    mean: float
    max: float


class AccessExample(Model):
    path: str
    size: int
    ranks: int
    bytes: int
    whole_by: int
    overlap: float
    category: str


class Evidence(Model):
    """What decided a class's access strategy (iosweep.analysis.patterns.access)."""

    files: int
    ranks: int
    ranks_of_run: int
    rank_list: list[int] | None  # up to 64 ranks
    bytes: int
    ops: int
    ranks_per_file: Spread | None
    files_per_rank: Spread | None
    bytes_per_rank_per_file: Spread | None
    bytes_per_rank: Spread | None
    whole_file_share: float | None
    files_whole_by_every_rank: int
    offset_union_bytes: int
    offset_shared_bytes: int
    offset_overlap: float | None
    offsets_known: bool
    category_share: dict[str, float]
    examples: list[AccessExample]


class Access(Model):
    strategy: str  # for reads, judged within epochs where the run has them
    evidence: Evidence
    run_strategy: str | None = None  # reads: the strategy over the whole run


class PerEpoch(Model):
    """How a class's files are shared by the ranks within each epoch, and between epochs."""

    epochs: int
    files_per_epoch: list[int]
    shared_in_epoch_share: float  # (epoch, file) pairs read by more than one rank
    max_readers_in_epoch: int
    redundant_bytes_in_epochs: int  # bytes of those files beyond one rank's
    reader_changed_share: float | None  # files whose rank changed from one epoch to the next


class ClassSpatial(Model):
    share_by_category: dict[str, float | None]
    patterns: dict[str, int]
    whole_file_read_pairs: int
    read_pairs: int
    read_coverage_frac_median: float | None


class FileClass(Model):
    """One file class (dataset, checkpoint, ...) of a run."""

    files: int
    size_total: int
    size_min: int
    size_median: float
    size_max: int
    bytes_read: int
    bytes_written: int
    reads: int
    writes: int
    ranks: int
    readers: list[int]
    writers: list[int]
    access: dict[str, Access | None]  # read | write
    per_epoch: PerEpoch | None = None
    spatial: ClassSpatial


class TopSize(Model):
    size: int
    count: int
    share: float


class SizeStats(Model):
    """Request sizes of one (class, direction); exact figures need segments."""

    ops: int
    ops_from_segments: int
    ops_from_counters: int
    bytes: int | None = None
    mean: float | None = None
    min: int | None = None
    p10: int | None = None
    median: int | None = None
    p90: int | None = None
    max: int | None = None
    zero_length: int | None = None
    top_sizes: list[TopSize] = Field(default_factory=list)
    median_bin: str
    small: int  # known smaller than small_request_bytes
    small_undecided: int = 0  # may be (counters only: Darshan's bin holding the threshold)
    small_share: float
    small_source: str


class Sizes(Model):
    small_request_bytes: int
    by_class: dict[str, dict[str, SizeStats]]  # class (or "all") -> read | write -> stats


class Metadata(Model):
    source: str  # counters | events | none
    totals: dict[str, int]
    per_rank: dict[str, MinMeanMax | None]
    per_second: dict[str, float | None]
    meta_time: float
    max_rank_meta_time: float
    meta_time_share: float | None


class Node(Model):
    host: str
    ranks: int
    bytes_read: int
    bytes_written: int
    io_time_sum: float
    io_time_max: float
    unique_bytes_read: int
    read_amplification: float
    read_redundancy: float
    read_once_per: str


class CheckpointEvent(Model):
    start: float
    end: float
    duration: float
    bytes: int
    files: int
    ranks: int
    after_epoch: int | None
    traced: bool = True  # false: placed by the files' opens and closes, sized on disk


class AppSave(Model):
    """A checkpoint save as the training script timed it (manifest phases)."""

    rank: int
    name: str
    start: float
    end: float


class OnDisk(Model):
    files: int
    bytes: int


class Checkpoints(Model):
    available: bool
    reason: str = ""
    writers: list[int] = Field(default_factory=list)
    n_writers: int = 0
    ranks_of_run: int = 0
    only_one_rank_writes: bool = False
    files_written: int = 0
    bytes_written: int = 0
    bytes_written_per_writer: dict[str, int] = Field(default_factory=dict)
    write_ops: int = 0
    write_time: float = 0.0
    bytes_read: int = 0
    readers: list[int] = Field(default_factory=list)
    n_checkpoints: int = 0
    bytes_per_checkpoint_mean: float | None = None
    duration_mean: float | None = None
    duration_max: float | None = None
    interval_mean: float | None = None
    time_share_of_run: float | None = None
    events: list[CheckpointEvent] = Field(default_factory=list)
    app_saves: list[AppSave] = Field(default_factory=list)
    on_disk: OnDisk = Field(default_factory=lambda: OnDisk(files=0, bytes=0))
    opened: list[CheckpointEvent] = Field(default_factory=list)  # the tracer saw opens, no writes
    marks: list[CheckpointEvent | AppSave] = Field(default_factory=list)  # times to show


class FileShape(Model):
    files: int
    streams: int  # (file, epoch, rank) read sequences
    text: str
    first_read: int  # bytes of each stream's first read
    first_at_0: bool
    body_read_min: int | None  # the reads between, but the last (the file's remainder)
    body_read_max: int | None
    eof_read: bool  # ends with a zero-byte read at end of file
    reads_per_stream_min: int
    reads_per_stream_max: int
    opens_per_file_per_epoch: float | None


class FileShapes(Model):
    """How a class's files are read, said once per shape (iosweep.analysis.patterns.shapes)."""

    class_: str = Field(alias="class")
    files: int
    streams: int
    shapes: list[FileShape]


class Place(Model):
    ops: int
    bytes_read: int
    bytes_written: int
    io_time: float  # the union of the operations in time, all ranks


class Placement(Model):
    """Where the I/O happens relative to training (iosweep.analysis.pipeline.epochs.placement)."""

    known: bool  # the run has epochs: otherwise every operation counts as before training
    places: dict[str, Place]  # before training, in epochs, between epochs, after training
    io_time: float
    io_share_of_run: float | None


class Artefact(Model):
    """Operations a tracer charged to the wrong file, left out of every figure."""

    kind: Literal["darshan-fd-reuse"]
    path: str
    rank: int
    ops: int
    bytes_read: int
    bytes_written: int
    start: float
    end: float
    message: str


class CompletenessCheck(Model):
    """What the trace saw against an outside account of the run (iosweep.analysis.pipeline.completeness)."""

    kind: Literal["dataset-reads", "checkpoint-writes"]
    expected: int | None
    seen: int
    message: str
    why: str = ""
    # how the figures the trace missed were measured instead, where they were: the run stays
    # complete for its question (checkpoint sizes from the files on disk)
    measured_by: str = ""


class TimeStats(Model):
    min: float
    mean: float
    max: float


class MpiioDirection(Model):
    ops: int
    bytes: int
    collective: int  # MPI_File_*_all calls (from counters; 0 where only DXT)
    independent: int
    nonblocking: int = 0  # MPI_File_i* calls (from counters)
    time: TimeStats | None  # seconds per rank in MPI-IO calls
    # bytes per rank asked of MPI-IO; None where not known (a reduced record's bytes went
    # to a few ranks, by Darshan's variance, and which is not recorded)
    rank_bytes: TimeStats | None = None
    posix_time: TimeStats | None  # the same ranks' seconds in POSIX calls on MPI-IO's files
    gap_mean: float | None  # mean MPI-IO time less mean POSIX time


class Mpiio(Model):
    """The MPI-IO layer (above POSIX; its bytes are POSIX's too, so never in the volumes)."""

    source: Literal["dxt", "counters"]
    ranks: int
    read: MpiioDirection
    write: MpiioDirection


class LustreStriping(Model):
    files: int  # analysed files with a LUSTRE record
    stripe_size: int  # bytes, the most common among them
    stripe_count: int  # OSTs a file is striped over, the most common
    stripe_count_max: int


class Alignment(Model):
    """POSIX requests not aligned to the file system (Darshan's counters; analysis/patterns/alignment.py)."""

    ops: int  # POSIX reads + writes the counters count
    file_not_aligned: int
    mem_not_aligned: int
    file_share: float
    mem_share: float
    file_alignment: int | None  # bytes: the file system's block (Lustre: stripe) size
    lustre: LustreStriping | None = None


class Layer(Model):
    """One I/O layer (Darshan module) of the trace, on the paths analysed; only the
    ``analysed`` ones count in the volumes (the others carry the same bytes above or below)."""

    module: str
    name: str
    level: Literal["library", "middleware", "file", "object store", "other"]
    analysed: bool
    records: int  # counter records (0: from DXT or DFTracer events)
    reads: int
    writes: int
    bytes_read: int
    bytes_written: int
    time: float  # seconds in its calls, summed over records (read + write + metadata)


class Imbalance(Model):
    bytes: float | None
    bytes_cv: float | None = None
    bytes_max: float | None = None  # the busiest rank's bytes
    io_time: float | None
    io_time_max: float | None = None
    io_time_median: float | None = None
    stragglers: list[int]


class OpsSample(Model):
    """What ``ops_sample.parquet`` stands for: ``shown`` of ``total`` analysed operations
    (``excluded``: on files the analysis left out; ``other_layers``: of modules it does not
    analyse, e.g. MPI-IO above POSIX); classes in plotting order."""

    total: int
    shown: int
    excluded: int
    class_order: list[str]
    other_layers: dict[str, int]  # module not analysed -> its reads and writes (not drawn)


class FileTables(Model):
    """What ``files.parquet`` and ``file_ranks.parquet`` hold: at most ``max_files`` files (those
    that moved the most bytes) of ``files``; the counts are over every file."""

    files: int
    files_kept: int
    zero_byte_files: int  # opened (or stat-ed) but no byte moved
    file_rank_rows: int
    file_rank_rows_kept: int
    counter_only_ops: int  # counted by Darshan, no DXT segment (e.g. STDIO)
    max_files: int


Unit = Literal["bytes", "bytes/s", "s", "share", "count", "ranks", "text"]


class Insight(Model):
    id: str
    severity: Literal["high", "warn", "info"]
    title: str
    message: str
    numbers: dict[str, Any] = Field(default_factory=dict)
    units: dict[str, Unit] = Field(default_factory=dict)  # every number's unit, by name
    recommendation: str = ""
    class_: str | None = Field(default=None, alias="class")

    @model_validator(mode="after")
    def _every_number_has_a_unit(self) -> Insight:
        missing = sorted(set(self.numbers) - set(self.units))
        if missing:
            raise ValueError(f"insight {self.id}: numbers without a unit: {missing}")
        return self


class Check(Model):
    """One rule's outcome on a run (``checks``): what it found, or why it passed, did not
    apply, or could not be checked. Every rule gives at least one, whatever the run."""

    id: str  # the rule's id, and the direction or place it judged: small_requests.write
    rule: str = ""  # the rule that gave it (findings/rules: RULES)
    title: str  # what is checked, in words
    outcome: Literal["found", "passed", "not-applicable", "not-checked"]
    severity: Literal["high", "warn", "info"] | None = None  # a finding's
    reason: str  # the finding, or the measured value against the threshold, or why not
    numbers: dict[str, Any] = Field(default_factory=dict)
    units: dict[str, Unit] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _every_number_has_a_unit(self) -> Check:
        missing = sorted(set(self.numbers) - set(self.units))
        if missing:
            raise ValueError(f"check {self.id}: numbers without a unit: {missing}")
        if (self.severity is None) == (self.outcome == "found"):
            raise ValueError(f"check {self.id}: a severity goes with a finding, and only there")
        return self


class RunSummary(Model):
    """One run's analysis (``summary.json``); every fact the report states about the run."""

    schema_: Literal["iosweep.analysis.run/4"] = Field(
        default="iosweep.analysis.run/4", alias="schema"
    )
    run_id: str
    params: dict[str, Any]
    store: str
    store_relative: str | None = None
    tracer: str
    status: str  # the run's own: ok | partial | failed | lost | skipped
    analysis_status: Literal["complete", "partial", "empty", "untraced"]
    empty: bool
    incomplete: bool
    trace_complete: bool  # traced, nothing lost, nothing missed
    completeness: list[CompletenessCheck]
    issues: list[Issue]
    limitations: list[str]
    settings: dict[str, Any]
    run: RunWindow
    run_meta: RunInfo
    ranks: Ranks
    trace: Trace
    classes: dict[str, FileClass]
    access: dict[str, dict[str, str | None]]  # class -> direction -> strategy
    spatial: Spatial
    sizes: Sizes
    metadata: Metadata
    temporal: Temporal
    nodes: list[Node]
    checkpoints: Checkpoints
    overlap: Overlap
    pipeline: Pipeline
    file_shapes: FileShapes | None
    placement: Placement
    artefacts: list[Artefact] = Field(default_factory=list)
    volume: dict[str, Stat | None]
    imbalance: Imbalance
    mpiio: Mpiio | None = None
    layers: list[Layer] = Field(default_factory=list)
    alignment: Alignment | None = None
    headline: dict[str, Any]  # flat metrics: one column each in the sweep table
    insights: list[Insight]
    checks: list[Check] = Field(default_factory=list)  # every rule's outcome
    ops_sample: OpsSample
    file_tables: FileTables
    timeline: TimelineRecord = Field(default_factory=lambda: TimelineRecord(file=""))
    tables: dict[str, str]  # table name -> file beside summary.json


class AnalysisFailure(Model):
    """What ``iosweep analyze`` writes for a store it could not analyse."""

    schema_: Literal["iosweep.analysis.run/4"] = Field(
        default="iosweep.analysis.run/4", alias="schema"
    )
    run_id: str
    error: str
    analysis_status: Literal["error"] = "error"


Summary = RunSummary | AnalysisFailure
