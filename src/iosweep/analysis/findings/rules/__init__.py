"""The rules iosweep judges a run by, in the spirit of Drishti's, each reporting its numbers.

Every rule in :data:`RULES` is a function of a run's :class:`Context` that gives one
:class:`Outcome` per thing it judges (a direction, a place), whatever the run: ``found``
(with the :class:`~iosweep.analysis.summary.Insight` the report prints: ``high`` for data
lost or a likely bottleneck, ``warn``, ``info``), ``passed`` (the measured value and the
threshold), ``not-applicable`` (why: no such I/O, or under a floor) or ``not-checked``
(which data were missing). The summary holds the insights in RULES order and every outcome
as its ``checks``; docs/analysis.md tables each rule's basis and thresholds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from iosweep.analysis.findings.rules.base import Context, Outcome, Rule
from iosweep.analysis.findings.rules.interfaces import (
    mpiio_independent,
    mpiio_nonblocking,
    mpiio_overhead,
    mpiio_use,
    stdio_share,
)
from iosweep.analysis.findings.rules.ranks import (
    file_per_process_at_scale,
    imbalance,
    metadata_heavy,
    mpiio_aggregators,
    shared_file_imbalance,
    single_rank_checkpoint,
)
from iosweep.analysis.findings.rules.requests import (
    misaligned_requests,
    random_access,
    redundant_reads,
    redundant_writes,
    small_requests,
)
from iosweep.analysis.findings.rules.time import exposed_io, io_bound
from iosweep.analysis.findings.rules.trace import (
    input_bound,
    no_io_or_truncated,
    trace_incomplete,
)
from iosweep.analysis.settings import AnalysisSettings

RULES: list[Rule] = [
    input_bound,
    trace_incomplete,
    no_io_or_truncated,
    small_requests,
    random_access,
    metadata_heavy,
    redundant_reads,
    redundant_writes,
    file_per_process_at_scale,
    single_rank_checkpoint,
    misaligned_requests,
    mpiio_overhead,
    mpiio_independent,
    mpiio_nonblocking,
    mpiio_use,
    mpiio_aggregators,
    imbalance,
    shared_file_imbalance,
    stdio_share,
    io_bound,
    exposed_io,
]

__all__ = ["RULES", "Context", "Outcome", "run_checks"]


def run_checks(
    summary: Mapping[str, Any],
    files: pd.DataFrame,
    ranks: pd.DataFrame,
    s: AnalysisSettings,
    spreads: dict[str, pd.DataFrame] | None = None,
) -> tuple[list[dict], list[dict]]:
    """(insights, checks) of every rule, in RULES order, as summary.json holds them."""
    ctx = Context(summary, files, ranks, s, spreads)
    outcomes = [(rule.__name__, o) for rule in RULES for o in rule(ctx)]
    insights = [o.insight.model_dump(by_alias=True) for _, o in outcomes if o.insight]
    checks = [o.check.model_copy(update={"rule": r}).model_dump(by_alias=True) for r, o in outcomes]
    return insights, checks
