"""The tune's ledger (``<results>/tune/ledger.json``, written by :mod:`iosweep.tune`): each
point tune measured, what the rate model predicted for it beforehand, what was measured,
and whether it was kept; why it stopped; what it recommends. docs/analysis.md "Tuning"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from iosweep.analysis.summary.base import Model
from iosweep.analysis.summary.pipeline import RatePrediction
from iosweep.files import write_json

Outcome = Literal["start", "accepted", "rejected", "failed"]
Stop = Literal[
    "",  # going on: `next` names the point to measure
    "nothing-to-tune",  # the start meets the target, or its loop does not wait for data
    "cannot-tune",  # the start cannot be judged (too short, start-up only, undecided)
    "start-failed",  # no run of the start measured anything
    "target-met",
    "no-gain",  # no lever predicts a gain above the spread of repeats
    "no-prediction",  # no rate model to predict from
    "budget-spent",
]


class TuneMeasurement(Model):
    """One point's runs (its repeats), measured: steady-state samples/s over all ranks (what
    the rate model predicts), its spread, AU, and the runs that failed with their reasons."""

    loader_workers: int
    run_ids: list[str]
    ok: int  # runs that measured a steady state
    samples_per_s: float | None = None  # mean over the runs that measured
    samples_per_s_min: float | None = None
    samples_per_s_max: float | None = None
    epoch_samples_per_s: float | None = None  # whole epochs (start-up and first steps in)
    au: float | None = None
    wait_share: float | None = None  # the data wait's share of the step time
    verdict: str = ""  # the verdict kind of the first run that measured
    verdict_title: str = ""
    failures: list[str] = Field(default_factory=list)  # "<run id>: <why>"
    # the rate model of its runs (their predictions averaged), what later steps predict from
    model: list[RatePrediction] = Field(default_factory=list)
    model_reason: str = ""  # why there is none

    @property
    def spread(self) -> float:
        """The repeats' range over their mean (0 with one run)."""
        if not self.samples_per_s or self.samples_per_s_min is None:
            return 0.0
        assert self.samples_per_s_max is not None
        return (self.samples_per_s_max - self.samples_per_s_min) / self.samples_per_s


class TunePrediction(Model):
    """What the rate model predicted for a point before it was run."""

    loader_workers: int
    samples_per_s: float  # all ranks, steady state
    au: float
    bottleneck: str
    gain: float  # over the best point measured when it was predicted: 0.25 = +25%
    from_runs: list[str]  # the runs whose rate model it is (the measured point nearest it)


class TuneStep(Model):
    step: int  # 0: the start
    lever: str  # "" at the start; else e.g. "loader workers 0 -> 2"
    settings: dict[str, Any]  # the point's settings (the sweep's dimensions and parameters)
    prediction: TunePrediction | None = None
    measured: TuneMeasurement
    error: float | None = None  # (predicted - measured) / measured, samples/s
    outcome: Outcome
    why: str


class UntriedLever(Model):
    lever: str
    why: str


class TuneLedger(Model):
    schema_: Literal["iosweep.tune.ledger/1"] = Field(
        default="iosweep.tune.ledger/1", alias="schema"
    )
    workload: str
    framework: str
    start: dict[str, Any]  # the start point's settings
    target_au: float
    budget: int  # reruns allowed
    repeats: int
    min_gain: float  # analysis.lever_min_gain
    steps: list[TuneStep] = Field(default_factory=list)
    untried: list[UntriedLever] = Field(default_factory=list)
    next: int | None = None  # loader workers of the point to measure next (None: stopped)
    next_prediction: TunePrediction | None = None
    stop: Stop = ""
    stop_reason: str = ""
    best_step: int | None = None  # the step whose point is recommended
    gain: float | None = None  # its samples/s over the start's, measured: 0.9 = +90%
    recommendation: str = ""

    @property
    def reruns(self) -> int:
        return max(0, len(self.steps) - 1)


class LedgerError(ValueError):
    """A ledger file that cannot be read; the message names it."""


def read_ledger(path: Path | str) -> TuneLedger:
    p = Path(path)
    try:
        return TuneLedger.model_validate(json.loads(p.read_text()))
    except (OSError, ValueError, ValidationError) as e:
        raise LedgerError(f"{p}: not a tune ledger: {e}") from None


def write_ledger(ledger: TuneLedger, path: Path | str) -> Path:
    return write_json(Path(path), ledger.model_dump(mode="json", by_alias=True))
