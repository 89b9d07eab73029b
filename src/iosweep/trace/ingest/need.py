"""The memory an ingest takes at its peak, counted before it reads a log, against a budget.

The budget is the one every step of a run keeps to (``--memory-gb``; the workflow's
``analysis.memory_gb``; by default 90% of the machine's memory, or of the cgroup's limit under
SLURM). Who holds what, measured with ``benchmarks/bench_segments_scale.py --ingest`` at 10,
30 and 100 M segments (benchmarks/README.md):

- the process that writes the store: its modules and the store writer's row groups in the
  making (about ``store.GROUP_BYTES`` of each table at most), whatever the run's size;
- a reader process (several read where the logs are many and large: each spills a log's
  tables to files as it reads it): its modules and one log's tables, about ``LOG_FACTOR``
  times the log's bytes on disk. One reader is the writing process itself;
- logs under ``parts.SPILL_MIN_BYTES`` in all are held whole until the store is written, unless
  holding them would not fit the budget (:func:`spills`).

So the peak is bounded by the readers' count and the largest log, not by the number of logs,
files or segments; a log's records are bounded by the tracer's own buffers (Darshan's module
memory, ``DARSHAN_MODMEM``). A budget too small for one reader is refused with the figures,
before any work, as the analysis refuses a run it cannot hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iosweep.memory import GIB, MACHINE_SHARE, MemoryBudgetError, budget_bytes
from iosweep.trace.ingest import parts
from iosweep.trace.ingest.find import LogEntry
from iosweep.trace.ingest.readlogs import read_workers

# The process that writes the store: its modules (the interpreter, numpy, pyarrow, iosweep's
# reader and writer; measured 0.17-0.22 GiB ingesting the shared fixtures, logs of 76 kB to
# 2.6 MB) and, from large logs, the store writer's row groups in the making (GROUP_BYTES a
# table), which never exceed the run's tables. Measured with two readers: 0.51, 0.59 and
# 0.74 GiB at 10.2, 30.7 and 102.5 M segments (the rise: the manifest's step records and the
# logs' heads, which the run's length brings).
WRITER_BASE = 256 << 20
WRITER_HOLD = 768 << 20
# A reader process's modules (its log's tables are counted apart, LOG_FACTOR). Measured with
# logs of 0.66 MB: 0.18-0.19 GiB a reader at every size.
READER = 256 << 20
# A log's tables (Arrow columns, their copies while spilled or made), per byte of the log on
# disk: a generated ImageNet run's tables are ~13x its compressed logs.
LOG_FACTOR = 16


@dataclass(frozen=True)
class IngestNeed:
    """What reading ``logs`` bytes of logs (the largest ``largest``) takes at its peak, with
    ``readers`` processes, their tables spilled (``spilled``) or held whole."""

    readers: int
    largest: int
    logs: int
    spilled: bool

    @property
    def bytes(self) -> int:
        held = self.logs if not self.spilled else self.largest if self.readers == 1 else 0
        # spilled, the writer's row groups (held whole, the tables are their own groups)
        groups = min(WRITER_HOLD, LOG_FACTOR * self.logs) if self.spilled else 0
        own = WRITER_BASE + groups + LOG_FACTOR * held
        return own + (
            self.readers * (READER + LOG_FACTOR * self.largest) if self.readers > 1 else 0
        )

    @property
    def gib(self) -> float:
        return self.bytes / GIB


def _sizes(entries: list[LogEntry]) -> list[int]:
    return [e.path.stat().st_size if e.path.exists() else 0 for e in entries]


def spills(logs: list[Path], memory_gb: float | None) -> bool:
    """Whether the logs' tables are spilled to files as they are read (``parts``), not held
    until the store is written: logs of ``parts.SPILL_MIN_BYTES`` or more in all, or fewer
    whose tables held would not fit the budget."""
    size = sum(p.stat().st_size for p in logs if p.exists())
    held = WRITER_BASE + LOG_FACTOR * size
    return size >= parts.SPILL_MIN_BYTES or held > budget_bytes(memory_gb)


def fit_readers(
    entries: list[LogEntry], readers: int, requested: bool, spilled: bool, memory_gb: float | None
) -> IngestNeed:
    """The ingest's need with ``readers`` processes (fewer where they would not fit the budget,
    unless the count was ``requested``); MemoryBudgetError with the figures where even that
    count does not fit."""
    need = _fewer(entries, readers, not requested, spilled, budget_bytes(memory_gb))
    if need.bytes > budget_bytes(memory_gb):
        raise over_budget(need, memory_gb, requested)
    return need


def _fewer(
    entries: list[LogEntry], readers: int, shrink: bool, spilled: bool, budget: int
) -> IngestNeed:
    """The need with ``readers`` processes, or (``shrink``) the most of them that fit
    ``budget`` (at least one)."""
    sizes = _sizes(entries)
    need = IngestNeed(readers, max(sizes, default=0), sum(sizes), spilled)
    while shrink and need.readers > 1 and need.bytes > budget:
        need = IngestNeed(need.readers - 1, need.largest, need.logs, spilled)
    return need


def over_budget(need: IngestNeed, memory_gb: float | None, requested: bool) -> MemoryBudgetError:
    """The refusal of an ingest whose ``need`` is over the budget: the figures, and what to do."""
    given = (
        f"the budget is {memory_gb:g} GiB (--memory-gb, analysis.memory_gb)"
        if memory_gb is not None
        else f"this machine allows {budget_bytes(None) / GIB:.1f} GiB "
        f"({MACHINE_SHARE:.0%} of its memory)"
    )
    how = "spilled to files" if need.spilled else "held until the store is written"
    fewer = " or fewer --workers" if requested and need.readers > 1 else ""
    return MemoryBudgetError(
        f"ingesting these logs needs {need.gib:.2f} GiB: {need.readers} reader process"
        f"{'es' if need.readers != 1 else ''}, the largest log {need.largest / 2**20:.1f} MiB, "
        f"{need.logs / 2**20:.1f} MiB of logs whose tables are {how}; {given}. "
        f"Give more (--memory-gb){fewer}"
    )


def readers_within(
    entries: list[LogEntry], workers: int | None, spilled: bool, memory_gb: float | None
) -> int:
    """How many processes read ``entries``: ``workers`` if given (refused, with the figures,
    where they would not fit the budget), else :func:`read_workers`' count, fewer where that
    many would not fit."""
    n = read_workers(entries, workers, spilled=spilled)
    return fit_readers(entries, n, workers is not None, spilled, memory_gb).readers


def estimate(entries: list[LogEntry], memory_gb: float | None, writer_only: bool = False) -> int:
    """The bytes a job ingesting ``entries`` should ask a scheduler for (Snakemake's
    ``mem_mb``), counted before it starts with the readers it would choose; at most the budget
    (over it, the job itself refuses with the figures). ``writer_only``: the job puts parts
    together, reading no log."""
    spilled = writer_only or spills([e.path for e in entries], memory_gb)
    n = 1 if writer_only else read_workers(entries, None, spilled=spilled)
    budget = budget_bytes(memory_gb)
    return min(_fewer(entries, n, True, spilled, budget).bytes, budget)
