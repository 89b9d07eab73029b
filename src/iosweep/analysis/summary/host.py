"""``summary.json``'s host figures: what the ranks' processes did on their host's cores
(iosweep.analysis.pipeline.host; docs/analysis.md "The host's cores")."""

from __future__ import annotations

from pydantic import Field

from iosweep.analysis.summary.base import Model


class HostRank(Model):
    """One rank's processes over its training window (Unix seconds of its steps)."""

    rank: int
    host: str
    window_s: float  # of the training window, the part the sampler covered
    covered_share: float | None  # that part of the whole window
    cores_usable: float | None  # affinity, cgroup quota, SLURM CPUs per task: the least
    rank_cores: float | None  # CPU seconds a second of the rank's own process (all threads)
    other_cores: float | None  # the same for every process below it (loader workers, ...)
    rank_runq_share: float | None  # of the window, its main thread waited for a core
    core_wait_share: float | None  # of its processes' runnable time, spent waiting for a core
    host_busy_cores: float | None  # the host's cores busy (all processes)
    processes: int  # processes seen in its tree
    majflt: float | None  # major page faults (pages read from storage on access)
    minflt: float | None
    rchar: float | None  # bytes through read calls (page cache included); None: unreadable
    read_bytes: float | None  # bytes fetched from storage (memory-mapped pages included)
    overhead_cpu_s: float | None  # the sampler's own CPU time, the whole run
    interval_s: float | None


class HostNode(Model):
    host: str
    ranks: int
    cores_usable: float | None
    busy_share: float | None  # host busy cores / usable cores, over the ranks' windows
    job_cores: float  # cores the job's processes used there


class Host(Model):
    """The host's cores and the ranks' processes during training; unknown where not
    measured (a trace from elsewhere), never zero."""

    available: bool
    reason: str = ""
    missing_ranks: list[int] = Field(default_factory=list)
    errors: dict[str, str] = Field(default_factory=dict)
    ranks: list[HostRank] = Field(default_factory=list)
    nodes: list[HostNode] = Field(default_factory=list)
    busy_share: float | None = None  # the busiest node's
    rank_cores: float | None = None  # per rank, mean
    other_cores: float | None = None
    rank_runq_share: float | None = None
    core_wait_share: float | None = None
    majflt: float | None = None  # all ranks, in their windows
    rchar: float | None = None
    read_bytes: float | None = None
    overhead_cpu_s: float | None = None
    mapped_files: dict[str, int] = Field(default_factory=dict)  # data files memory-mapped
