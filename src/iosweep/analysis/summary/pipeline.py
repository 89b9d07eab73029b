"""``summary.json``'s input-pipeline section: is training waiting for its data, the verdict
and its levers, the rate model's predictions (iosweep.analysis.pipeline)."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from iosweep.analysis.summary.base import Model
from iosweep.analysis.summary.host import Host


class OverlapEpoch(Model):
    epoch: int
    duration_max: float
    io_time_max: float
    exposed_io_time_max: float
    exposed_io_time_mean: float
    exposed_share_max: float


class Overlap(Model):
    available: bool
    reason: str = ""
    compute_source: str = ""
    epochs: list[OverlapEpoch] = Field(default_factory=list)
    exposed_io_time_in_epochs_max: float | None = None
    exposed_share_of_epochs_max: float | None = None
    io_time_outside_epochs_max: float | None = None


class PipelineTotals(Model):
    """The run's input-pipeline figures over every rank and epoch (per-rank means where
    named so)."""

    ranks: int
    epochs: int
    au: float | None  # sum of compute / sum of epoch time without the first step's wait and step
    compute_per_rank: float
    compute_share: float | None  # every step's compute (warm-up included) / epoch time
    read_time_per_rank: float  # seconds inside reads, the rank's processes added up
    wait_per_rank: float  # data wait, steps after the first
    epoch_time_per_rank: float
    idle_per_rank: float | None = None  # AU's denominator less compute: wait and the rest
    checkpoint_per_rank: float | None = None  # of idle_per_rank, in synchronous checkpoints
    # steady state: each epoch's steps after its first (their waits and compute, and the loop's
    # time between them: AU's denominator), per rank
    steady_time_per_rank: float | None = None
    steady_steps_per_rank: float | None = None
    steady_samples_per_rank: float | None = None
    wait_share: float | None = None  # the data wait's share of the steady state (step time)
    first_wait_max: float  # the wait for the first batch (loader start-up)
    first_step_max: float  # the first step (warm-up)
    samples: float | None
    samples_per_s: float | None  # over all ranks
    startup: float  # run start to the first epoch
    training_time: float
    run_time: float
    read_in_wait_share: float | None  # of the wait: reads in flight
    # of the reads' time in the wait: those of the training loop's own process
    own_read_in_wait_share: float | None = None
    meta_in_wait_share: float | None  # metadata calls (not reads)
    other_in_wait_share: float | None  # neither: decode, augment, collate, copy
    no_read_share: float | None  # no read in flight at all
    bytes_read_in_epochs: int | None  # None: the run was not traced
    data_opens_in_epochs: int | None = None  # dataset files opened in the epochs
    read_bandwidth_per_rank: float | None  # bytes read per second of epoch, per rank


class PipelineEpoch(Model):
    epoch: int
    epoch_time: float
    compute_mean: float
    wait_mean: float
    wait_max: float
    first_wait_max: float
    first_step_max: float
    au_mean: float | None
    au_min: float | None
    samples: float | None
    samples_per_s: float | None
    bytes_read: int


class Lever(Model):
    """A lever to try: its words, and the sweep parameter it turns and which way ('' where
    none does), so that what a sweep measured of that parameter can overrule it."""

    text: str
    param: str = ""  # loader_workers, staging
    direction: Literal["more", "fewer", "on", "set", ""] = ""
    # rule: the verdict's rule of thumb; measured: the sweep's best value; predicted: the
    # rate model's (iosweep.analysis.pipeline.rates), never shown as measured
    source: Literal["rule", "measured", "predicted"] = "rule"

    @model_validator(mode="before")
    @classmethod
    def _words(cls, v: Any) -> Any:
        return {"text": v} if isinstance(v, str) else v  # an older summary's plain words


class Verdict(Model):
    kind: Literal[
        "compute-bound",
        "input-bound-storage",
        "input-bound-preprocessing",
        "input-bound-phase-start",
        "input-bound-untraced",
        "loop-bound",
        "unexplained",
        "host-cpu-bound",
        "startup",
        "too-short",
        "undecided",
    ]
    title: str
    text: str
    numbers: dict[str, float | None]
    levers: list[Lever]
    # input-bound verdicts: the wait's share of the step time, graded as XProf grades it
    grade: Literal["moderate", "high", ""] = ""
    # the reading from the steps and the trace alone where the host's figures changed it
    # (host-CPU-bound; storage read outside the trace): what a replay, whose costs are sleeps
    # that compete for no core, compares with
    trace_kind: str = ""


class Timing(Model):
    """How the run's steps and data waits were timed (the manifest's ``timing``)."""

    # the training script, iosweep's hooks, the trace's own annotations (analysis.phases)
    source: Literal["script", "hooks", "events", "none", ""] = ""
    wait: Literal["measured", "estimated", ""] = ""
    method: str = ""
    loop: str = ""  # the loop the hooks timed: its kind, file and line
    training_thread: str = ""  # the thread the hooks took as training's, and why
    overhead_s: float | None = None  # seconds in the hooks' own bookkeeping, all ranks
    batches: int | None = None  # batches the hooks timed, all ranks and loops
    other_loops: list[str] = Field(default_factory=list)  # loops not taken for the steps
    problems: list[str] = Field(default_factory=list)  # hooks that could not be installed


class UnoverlappedFigures(Model):
    """Seconds of compute, application I/O and POSIX I/O (their unions), and of each I/O
    that no compute covered."""

    compute_time: float
    app_io_time: float
    posix_io_time: float
    unoverlapped_app_io_time: float
    unoverlapped_posix_io_time: float


class UnoverlappedRank(UnoverlappedFigures):
    rank: int


class UnoverlappedTotals(UnoverlappedFigures):
    u_app_io_dfa: float  # as dftracer-analyzer computes it: sums less sums, per process
    u_posix_io_dfa: float


class Unoverlapped(Model):
    """DFAnalyzer's overlap figures (iosweep.analysis.pipeline.unoverlapped)."""

    available: bool
    reason: str = ""
    per_rank: list[UnoverlappedRank] = Field(default_factory=list)
    totals: UnoverlappedTotals | None = None
    processes: int = 0


class TimelineRecord(Model):
    """The run's timeline file (iosweep.analysis.timeline) and what it leaves out."""

    file: str  # beside summary.json; "" when none was written
    slices: int = 0
    window: list[float | None] = Field(default_factory=list)  # seconds; None: to the end
    cut: str = ""  # "" when nothing was left out, else where and why it ends
    left_out: dict[str, int] = Field(default_factory=dict)  # operations, app_events, ...


class DlioReplay(Model):
    """A DLIO run of a workload ``iosweep replay`` wrote: the replayed run's own answer, as
    the workload recorded it, beside this run's."""

    of_run: str
    ranks_of_run: int | None
    au_of_run: float | None
    samples_per_s_of_run: float | None
    verdict_of_run: str | None
    text: str
    calibrated: bool | None = None  # whether iosweep replay --calibrate corrected its times
    limits: list[str] = Field(default_factory=list)  # what DLIO could not express of the run


class DlioAu(Model):
    """DLIO's own account of its run beside iosweep's (iosweep.trace.dlio)."""

    au_mean: float | None  # fraction, the mean over epochs of DLIO's per-epoch AU
    au_per_epoch: list[float]
    iosweep_au: float | None
    iosweep_au_per_epoch: list[float | None]
    computation_time: float | None  # seconds a step, as configured (DLIO counts this)
    traced_compute_mean: float | None  # seconds a step, the compute events' mean
    throughput_samples_per_s: float | None
    text: str  # the two side by side, and why they differ
    replay: DlioReplay | None = None  # the run this one replays, where iosweep wrote the workload


class RatePrediction(Model):
    """What the rate model predicts with a number of loader workers: never a measurement."""

    workers: int
    samples_per_s: float  # all ranks
    au: float
    bottleneck: str  # the stage that sets the pace
    factor: float  # measured / modelled at the run's own settings, applied to every prediction


class RateModel(Model):
    """The run's rate model (iosweep.analysis.pipeline.rates): what it rests on, per rank and
    sample in steady state, and its predictions; or why there is none."""

    available: bool
    reason: str = ""
    workers: int | None = None
    samples_per_s: float | None = None  # measured, all ranks, steady state
    compute_s: float | None = None
    prep_s: float | None = None
    prep_source: str = ""
    cpu_s: float | None = None  # CPU seconds a sample, all of a rank's processes
    cores_per_rank: float | None = None
    ranks: int | None = None
    bytes_per_sample: float | None = None
    factor: float | None = None
    predictions: list[RatePrediction] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)


# a rank's time in the order the account claims it (a second goes to the first that holds it)
AccountKind = Literal[
    "checkpoint",
    "evaluation",
    "wait_phase_start",
    "wait_steady",
    "collectives",
    "compute",
    "startup",
    "unexplained",
]
ACCOUNT_KINDS: tuple[str, ...] = get_args(AccountKind)


class AccountSlice(Model):
    """One slice of a rank's time: seconds a rank (the mean over ranks), its share of the
    window, and the evidence that names it."""

    kind: AccountKind
    seconds: float
    share: float | None
    evidence: str


class AccountPlace(Model):
    where: str  # "before the first batch of epoch 2", "between steps of epoch 1", ...
    seconds: float  # a rank, the mean over ranks


class RankAccount(Model):
    rank: int
    window: float  # the run's start to the rank's last step
    seconds: dict[str, float]  # kind -> seconds


class TimeAccount(Model):
    """Each second of a rank's window in exactly one slice (iosweep.analysis.pipeline.account):
    what no evidence names is unexplained, with where it lies."""

    available: bool
    reason: str = ""
    window_per_rank: float | None = None
    slices: list[AccountSlice] = Field(default_factory=list)
    unexplained_at: list[AccountPlace] = Field(default_factory=list)
    per_rank: list[RankAccount] = Field(default_factory=list)
    wait_per_rank: float | None = None  # data wait, every batch (phase starts included)
    loop_per_rank: float | None = None  # the window less start-up
    loop_wait_share: float | None = None  # wait_per_rank / loop_per_rank
    phase_start_share_of_wait: float | None = None
    phases_per_rank: float | None = None  # epochs and evaluation loops a rank (the mean)


class Pipeline(Model):
    """Is training waiting for its data (iosweep.analysis.pipeline.waits)."""

    available: bool
    reason: str = ""
    au_label: str = ""
    wait_source: Literal["timed", "gaps", "estimated", ""] = (
        ""  # timed (by the script or the hooks), gaps between steps, or estimated
    )
    timing: Timing = Field(default_factory=Timing)
    totals: PipelineTotals | None = None
    account: TimeAccount = Field(default_factory=lambda: TimeAccount(available=False))
    epochs: list[PipelineEpoch] = Field(default_factory=list)
    verdict: Verdict | None = None
    coverage: str = ""  # a warning when the steps do not fall within the trace
    unoverlapped: Unoverlapped = Field(default_factory=lambda: Unoverlapped(available=False))
    dlio: DlioAu | None = None
    host: Host = Field(default_factory=lambda: Host(available=False))
    rates: RateModel = Field(default_factory=lambda: RateModel(available=False))
