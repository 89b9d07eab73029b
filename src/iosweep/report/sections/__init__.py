"""The report's sections, one module each, in page order: ``overview``, ``sweep``,
``tune``, ``frameworks``, ``runs``, ``provenance``. Each turns the analyses (through a :class:`Context`)
into the values its template partial (``report/templates/<section>.html.j2``) prints.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from iosweep.analysis.summary import Lever, TuneLedger
from iosweep.report import plots
from iosweep.report.data import RunView, SweepView
from iosweep.report.figures import FigureStore
from iosweep.report.settings import ReportSettings


@dataclass
class Context:
    """What every section reads: the runs, the sweep analysis, settings, the figure store and
    the anonymizer (figures' texts pass it too)."""

    runs: list[RunView]
    sweep: SweepView
    settings: ReportSettings
    figs: FigureStore
    anon: Any  # str -> str
    config: dict | None
    problems: list[dict[str, str]]
    tune: TuneLedger | None = None  # the tune's ledger, where the report has one
    _samples: dict[str, plots.OpsSample | None] = field(default_factory=dict, repr=False)

    @property
    def training(self) -> bool:
        """Whether any run is a training run; a report of applications' logs only (MPI jobs)
        leaves out what only training runs have (pipeline, frameworks, checkpoints)."""
        return any(r.training for r in self.runs)

    def levers(self, run: RunView) -> list[str]:
        """The run's levers to try as its sweep's measurements leave them (a lever measured
        no better is gone, the best value measured leads), else its verdict's."""
        v = run.summary.pipeline.verdict
        return [lv.text for lv in self._advised.get(run.run_id, v.levers if v else [])]

    @functools.cached_property
    def _advised(self) -> dict[str, list[Lever]]:
        """Run id -> its levers as the sweep's measurements leave them (pipeline.json)."""
        return {a.run_id: a.levers for a in self.sweep.pipeline.advised}

    def sample(self, run: RunView) -> plots.OpsSample | None:
        """The analysis's sample of the run's operations (``ops_sample.parquet``)."""
        if run.slug not in self._samples:
            info = run.summary.ops_sample
            df = run.table("ops_sample") if run.has_io else None
            self._samples[run.slug] = plots.ops_sample(
                df, info.total, info.excluded, self.settings.max_points_per_plot
            )
        return self._samples[run.slug]
