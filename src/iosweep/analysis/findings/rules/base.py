"""What every rule shares: the :class:`Context` it reads and the :class:`Outcome` s it gives.

A rule gives one outcome per thing it judges (a direction, a place): ``found`` carries the
:class:`~iosweep.analysis.summary.Insight` that the report prints; ``passed``,
``not-applicable`` and ``not-checked`` carry the measured value against the threshold, the
floor, or what was missing, so that a reader never has to guess why a rule said nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.summary import Check, Insight

Numbers = dict[str, tuple[Any, str]]  # name -> (value, unit): every number carries its unit


@dataclass(frozen=True)
class Outcome:
    check: Check
    insight: Insight | None = None


def make_insight(
    id_: str,
    severity: str,
    title: str,
    message: str,
    numbers: Numbers,
    recommendation: str,
    cls: str | None = None,
) -> Insight:
    """An insight; ``numbers`` maps each name to (value, unit)."""
    return Insight.model_validate(
        {
            "id": id_,
            "severity": severity,
            "title": title,
            "message": message,
            "numbers": {k: v for k, (v, _) in numbers.items()},
            "units": {k: u for k, (_, u) in numbers.items()},
            "recommendation": recommendation,
            "class": cls,
        }
    )


def _check(id_: str, title: str, outcome: str, reason: str, numbers: Numbers, sev=None) -> Check:
    return Check.model_validate(
        {
            "id": id_,
            "title": title,
            "outcome": outcome,
            "severity": sev,
            "reason": reason,
            "numbers": {k: v for k, (v, _) in numbers.items()},
            "units": {k: u for k, (_, u) in numbers.items()},
        }
    )


def found(check_id: str, title: str, insight: Insight) -> Outcome:
    """The rule fired: its check states the insight's message and numbers."""
    numbers: Numbers = {k: (v, insight.units[k]) for k, v in insight.numbers.items()}
    c = _check(check_id, title, "found", insight.message, numbers, insight.severity)
    return Outcome(c, insight)


def passed(check_id: str, title: str, reason: str, numbers: Numbers | None = None) -> Outcome:
    """Checked and fine: ``reason`` gives the measured value and the threshold it is under."""
    return Outcome(_check(check_id, title, "passed", reason, numbers or {}))


def not_applicable(
    check_id: str, title: str, reason: str, numbers: Numbers | None = None
) -> Outcome:
    """The rule does not apply: no such I/O, or too little of it to matter (the floor)."""
    return Outcome(_check(check_id, title, "not-applicable", reason, numbers or {}))


def not_checked(check_id: str, title: str, reason: str, numbers: Numbers | None = None) -> Outcome:
    """The rule could not be decided: ``reason`` says which data were missing."""
    return Outcome(_check(check_id, title, "not-checked", reason, numbers or {}))


def files(n: int) -> str:
    return f"{n:,} file" + ("" if n == 1 else "s")


def span(v: pd.Series) -> str:
    lo, hi = int(v.min()), int(v.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


@dataclass(frozen=True)
class Context:
    """What the rules look at: the run's summary so far, its files and ranks tables, and
    per direction the spread between the ranks of each file two ranks or more moved bytes
    of (:mod:`iosweep.analysis.patterns.file_ranks`; None: no (rank, file) rows)."""

    summary: Mapping[str, Any]
    files: pd.DataFrame
    ranks: pd.DataFrame
    settings: AnalysisSettings
    spreads: dict[str, pd.DataFrame] | None = None

    @property
    def training_job(self) -> bool:
        """A training job (a framework named, or training steps recorded): deep-learning
        advice fits it; any other job (an MPI application's logs) gets its own field's."""
        params = self.summary.get("params") or {}
        return bool(params.get("framework")) or bool(
            (self.summary.get("placement") or {}).get("known")
        )

    @property
    def n_ranks(self) -> int:
        return int(self.summary["ranks"]["count"])

    @property
    def who(self) -> str:
        """ "rank", or "process" when the store knows no ranks."""
        return str(self.summary["ranks"].get("kind", "rank"))

    @property
    def whos(self) -> str:
        return {"rank": "ranks", "process": "processes"}.get(self.who, self.who + "s")

    @property
    def has_io(self) -> bool:
        return self.summary.get("analysis_status") not in ("empty", "untraced", None)

    @property
    def io_share(self) -> float | None:
        """The busiest rank's share of the run in I/O: whether the I/O matters at all."""
        return (self.summary.get("headline") or {}).get("io_share_max")

    def none_of(self, what: str) -> str:
        """ "no reads" ("no writes"), said of the analysed paths where the trace saw I/O on
        others (terminal output, excluded paths): the counters do count those."""
        tr = self.summary.get("trace") or {}
        if not (tr.get("excluded_ops") or tr.get("excluded_records")):
            return f"no {what}"
        left = ", ".join(tr.get("excluded_paths") or [])
        return f"no {what} on the analysed paths (I/O on {left or 'excluded paths'} left out)"

    @property
    def unknown_ranks(self) -> list[int]:
        """Ranks whose figures are not known (no trace, or counters with impossible values):
        a comparison of ranks leaves them out, never counts them as 0."""
        return list(self.summary["ranks"].get("unknown") or [])

    @property
    def concentrated(self) -> dict[str, Any]:
        """The reduced shared records whose bytes Darshan's variance puts on a few ranks
        (``trace.shared_records``: analysis.shared.SharedRecords); empty when none: where
        not, the ranks' bytes on those files are not known."""
        sr = (self.summary.get("trace") or {}).get("shared_records") or {}
        return sr if sr.get("concentrated") else {}

    @property
    def layers(self) -> str:
        """The file-level layers analysed, in words ("POSIX and STDIO", "DFS"): the counters
        a figure comes from."""
        named = [la["module"] for la in self.summary.get("layers") or [] if la.get("analysed")]
        return " and ".join(named) if named else "POSIX and STDIO"

    def io_matters(self) -> bool:
        share = self.io_share
        return share is not None and share > self.settings.io_time_share


Rule = Callable[[Context], list[Outcome]]

NO_IO = "no I/O was analysed in this run"


def when_no_io(c: Context, check_id: str, title: str) -> list[Outcome] | None:
    """The outcome of any I/O rule on a run with nothing analysed, else None."""
    if c.has_io:
        return None
    return [not_applicable(check_id, title, NO_IO)]
