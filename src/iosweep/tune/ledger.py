"""The ledger file (``<results>/tune/steps/step~K.json`` after each step, ``ledger.json``
at the end) and one step of the workflow: read the step's runs, advance the ledger."""

from __future__ import annotations

from pathlib import Path

from iosweep.analysis.summary import (
    AnalysisFailure,
    LedgerError,
    RunSummary,
    SummaryError,
    TuneLedger,
    UntriedLever,
    read_ledger,
    read_summary,
    write_ledger,
)
from iosweep.tune.points import TunePlan
from iosweep.tune.steps import advance, measure

__all__ = ["LedgerError", "new_ledger", "next_workers", "read_ledger", "run_step", "write_ledger"]


def new_ledger(plan: TunePlan, min_gain: float) -> TuneLedger:
    return TuneLedger(
        workload=plan.workload.name,
        framework=plan.start.framework,
        start=plan.settings(plan.start.loader_workers or 0),
        target_au=plan.target_au,
        budget=plan.budget,
        repeats=plan.repeats,
        min_gain=min_gain,
        untried=[UntriedLever(lever=lever, why=why) for lever, why in plan.untried],
    )


def next_workers(path: Path | str) -> int | None:
    """The loader workers of the point a step file asks for next (None: the tune stopped)."""
    return read_ledger(path).next


def run_step(
    plan: TunePlan,
    previous: Path | str | None,
    summaries: list[Path | str],
    out: Path | str,
    min_gain: float,
) -> TuneLedger:
    """Advance the ledger of ``previous`` (the start: a new one) with the step whose runs'
    analyses are ``summaries`` (in repeat order); write it to ``out``."""
    ledger = read_ledger(previous) if previous else new_ledger(plan, min_gain)
    workers = plan.start.loader_workers if ledger.next is None else ledger.next
    assert workers is not None
    runs: list[tuple[str, RunSummary | AnalysisFailure | None, str]] = []
    for run_id, path in zip(plan.run_ids(workers), summaries, strict=True):
        try:
            runs.append((run_id, read_summary(path), ""))
        except (OSError, SummaryError, ValueError) as e:
            runs.append((run_id, None, f"its analysis cannot be read: {e}"))
    ledger = advance(ledger, plan.settings(workers), measure(workers, runs))
    write_ledger(ledger, out)
    return ledger
