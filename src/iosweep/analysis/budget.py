"""The memory a run's analysis needs, told before it starts, against a budget.

The analysis holds a run's segments and counter records in memory (numpy columns, the
(rank, file) tables built from them): its peak grows with both. Counted from the store's
Parquet footers (nothing read), the need is known in a millisecond; a run that would not fit
the budget (``analysis.memory_gb``, default: the machine's memory, or the cgroup's limit
under SLURM) is refused with the figures, instead of being killed by the kernel hours into a
sweep with nothing said. The workflow asks the scheduler for the same figure (the analysis
rule's ``mem_mb``).

The costs are measured, not derived (``benchmarks/bench_segments_scale.py`` and
``benchmarks/bench_analysis.py``; docs/analysis.md, "Memory"): the ImageNet-shaped run peaked
at 4.56 GB with 10.2 M segments and 2.56 M counter records and at 12.3 GB with 30.7 M and
7.69 M (530-570 B a counter record beyond 250 B a segment); a run of 10 M segments and 157 k
records over 128 ranks at 2.49 GB. The figures below are a little above all three; an
application event is taken to cost what a segment does (not measured apart). A run of another
shape can need less, which is why a budget given by hand is a ceiling the user may raise.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from iosweep.analysis.subset import RankSubset

# (the machine's memory and the budget are the memory module's: the ingest keeps to it too)
from iosweep.memory import (  # noqa: F401
    GIB,
    MACHINE_SHARE,
    MemoryBudgetError,
    budget_bytes,
    cgroup_limit,
    machine_bytes,
)

# Peak resident bytes of analyze_run, measured (see the module's docstring)
PER_SEGMENT = 250
PER_COUNTER_RECORD = 650
PER_APP_EVENT = 250
BASE = GIB // 2  # the interpreter, numpy, pandas, pyarrow and the analysis' own modules


@dataclass(frozen=True)
class Need:
    """What a run's analysis holds at its peak, from the store's row counts."""

    segments: int
    counter_records: int
    app_events: int

    @property
    def bytes(self) -> int:
        return (
            BASE
            + PER_SEGMENT * self.segments
            + PER_COUNTER_RECORD * self.counter_records
            + PER_APP_EVENT * self.app_events
        )

    @property
    def gib(self) -> float:
        return self.bytes / GIB


def _rows(path: Path) -> int:
    return pq.ParquetFile(path).metadata.num_rows if path.exists() else 0


def need_of(store: Path | str, subset: RankSubset | None = None) -> Need:
    """The store's analysis need (of a rank ``subset``'s rows only); FileNotFoundError when it
    is not a store (yet)."""
    store = Path(store)
    meta = store / "run.json"
    if not meta.exists():
        raise FileNotFoundError(errno.ENOENT, "not a trace store (yet): no run.json", str(meta))
    if subset is not None:
        return Need(*(subset.count(t) for t in ("segments", "counters", "app_events")))
    return Need(
        _rows(store / "segments.parquet"),
        _rows(store / "counters.parquet"),
        _rows(store / "app_events.parquet"),
    )


def own_memory(field: str = "VmRSS") -> int:
    """This process's resident memory now (``VmRSS``) or at its peak (``VmHWM``), in bytes;
    0 where /proc does not say."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak() -> bool:
    """Start this process's ``VmHWM`` again from its resident memory now (Linux's clear_refs
    "5"), so that the peak of a step is its own; False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def over_peak(step: str, peak: int, memory_gb: float | None, verb: str = "peaked at") -> str | None:
    """What to say when ``step`` peaked at (``verb``: or needs, counted before it runs)
    ``peak`` bytes, over a budget given by hand (``memory_gb``): the figure a job of this run
    must ask for. None within it, or with no budget given (the machine's share is not a
    request anyone made)."""
    if memory_gb is None or peak <= budget_bytes(memory_gb):
        return None
    return (
        f"{step} {verb} {peak / GIB:.2f} GiB, over the budget of {memory_gb:g} GiB "
        f"(--memory-gb, analysis.memory_gb): a job analysing this run needs "
        f"{to_mb(peak):,} MB"
    )


def cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check(store: Path | str, memory_gb: float | None, subset: RankSubset | None = None) -> Need:
    """The store's need (of a rank ``subset``); MemoryBudgetError, with the figures, where it
    is over the budget."""
    need = need_of(store, subset)
    if need.bytes > budget_bytes(memory_gb):
        raise over_budget(f"{store}", need, memory_gb)
    return need


def over_budget(what: str, need: Need, memory_gb: float | None) -> MemoryBudgetError:
    """The refusal of ``what`` (a run, its ranks, a rank) whose ``need`` is over the budget,
    with the figures and what to do."""
    budget = budget_bytes(memory_gb)
    given = (
        f"analysis.memory_gb (--memory-gb) is {memory_gb:g} GiB"
        if memory_gb is not None
        else f"this machine allows {budget / GIB:.1f} GiB ({MACHINE_SHARE:.0%} of its memory)"
    )
    return MemoryBudgetError(
        f"{what}: {need.segments:,} segments, {need.counter_records:,} counter records and "
        f"{need.app_events:,} application events need about {need.gib:.4g} GiB to analyse "
        f"(measured: {PER_SEGMENT} B a segment, {PER_COUNTER_RECORD} B a counter record), "
        f"and {given}; a run is analysed in parts of whole ranks, so a rank must fit. Analyse "
        f"it where {need.gib:.0f} GiB are free (a SLURM job with --mem={int(need.gib) + 1}G; "
        "the workflow asks for it), or raise --memory-gb if this run's shape needs less."
    )


def mem_mb(store: Path | str) -> int:
    """The analysis job's memory request for a scheduler (Snakemake's ``mem_mb``)."""
    return to_mb(need_of(store).bytes)


def to_mb(nbytes: int) -> int:
    """``nbytes`` as a scheduler's memory request: MB (MiB, as Snakemake's ``mem_mb``),
    rounded up."""
    return -(-nbytes // 2**20)
