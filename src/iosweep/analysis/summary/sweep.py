"""The sweep analysis's models (``results/sweep/``): scaling, insights across the sweep,
tracer overhead and the input pipeline across the sweep."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from iosweep.analysis.summary.base import Model
from iosweep.analysis.summary.pipeline import Lever

Scalar = str | int | float | bool | None


class SweepPoint(Model):
    """One point of a series: the runs (repeats) at one scale."""

    ranks: int | float | None
    nodes: int | float | None
    ppn: int | float | None = None
    reps: int = 1
    run_ids: list[str] = Field(default_factory=list)


class MetricSeries(Model):
    """One metric along a series' points: mean and spread over repeats, and its trend."""

    total: bool  # adds up over ranks (bytes, files, opens ...)
    mean: list[float | None]
    std: list[float | None]
    min: list[float | None]
    max: list[float | None]
    ratio: list[float | None] | None  # mean / mean at the first point
    exponent: float | None  # slope of log(mean) over log(ranks); None: not fitted
    trend: str | None  # flat, sublinear, linear, superlinear, shrinks; noisy: not fitted
    note: str = ""  # why no trend was fitted
    judgement: str = ""  # against the ideal: ideal, as expected, better/worse than ideal
    unit: str | None = None  # for the metrics of SCALING_METRICS
    title: str | None = None


class MetricSpec(Model):
    name: str
    title: str
    unit: str
    ideal: str
    better: str


class ScalingSeries(Model):
    key: dict[str, Scalar]  # the parameters every run of the series shares
    points: list[SweepPoint]
    metrics: dict[str, MetricSeries]


class Scaling(Model):
    schema_: Literal["iosweep.analysis.sweep/1"] = Field(
        default="iosweep.analysis.sweep/1", alias="schema"
    )
    metrics: list[str]
    totals: list[str] = Field(default_factory=list)
    catalogue: list[MetricSpec] = Field(default_factory=list)  # the metrics to plot, in order
    series: list[ScalingSeries]


class Scale(Model):
    """Where in a series: ranks and nodes."""

    ranks: int | float | None
    nodes: int | float | None


class InsightChange(Model):
    fired_share: list[float]  # per point: share of its runs where the insight fired
    status: Literal["always", "never", "appears", "disappears", "intermittent"]
    appears_at: Scale | None
    disappears_at: Scale | None


class InsightsSeries(Model):
    key: dict[str, Scalar]
    points: list[Scale]
    insights: dict[str, InsightChange]


class InsightsAcross(Model):
    schema_: Literal["iosweep.analysis.sweep/1"] = Field(
        default="iosweep.analysis.sweep/1", alias="schema"
    )
    series: list[InsightsSeries]


class OverheadPoint(Model):
    """A traced point against the untraced runs (tracer: none) of the same point."""

    point: dict[str, Scalar]  # the sweep point, without the tracer
    tracer: str
    traced_run_time_mean: float
    baseline_run_time_mean: float
    traced_runs: int
    baseline_runs: int
    traced_min: float
    traced_max: float
    baseline_min: float
    baseline_max: float
    overhead: float | None
    fired: bool  # only with repeats and run times that do not overlap
    verdict: str
    threshold: float


class Overhead(Model):
    schema_: Literal["iosweep.analysis.sweep/1"] = Field(
        default="iosweep.analysis.sweep/1", alias="schema"
    )
    points: list[OverheadPoint]


class LeverPoint(Model):
    """One value of a lever in a series: what its runs measured, and what the rate model,
    fed the series' other runs, predicted for it (iosweep.analysis.pipeline.advice)."""

    value: Scalar
    runs: int
    samples_per_s: float | None  # mean over the repeats, all ranks, whole epochs
    samples_per_s_min: float | None
    samples_per_s_max: float | None
    change: float | None  # against the value before it: mean / mean - 1
    steady_samples_per_s: float | None  # measured in steady state (the model's own measure)
    predicted: float | None  # steady samples/s predicted from the other runs (leave-one-out)
    error: float | None  # predicted / steady measured - 1
    bottleneck: str = ""  # the prediction's
    predicted_from: str = ""  # the run it was predicted from


class LeverSeries(Model):
    """Runs that differ only in one lever of the input pipeline."""

    lever: Literal["loader_workers", "staging"]
    key: dict[str, Scalar]  # what the runs share
    values: list[Scalar]
    au: list[float | None]
    compute_share: list[float | None]
    samples_per_s: list[float | None]
    reps: list[int]
    text: str
    points: list[LeverPoint] = Field(default_factory=list)
    best: Scalar = None  # the value with the best mean samples/s
    advice: str = ""  # what the measurements say to do, the model's prediction beside them
    beyond: str = ""  # the model's prediction past the largest value, where the best is there


class RunLevers(Model):
    """A run's levers as the sweep's measurements leave them (iosweep.analysis.pipeline.advice)."""

    run_id: str
    levers: list[Lever]


class ScaleSeries(Model):
    key: dict[str, Scalar]
    ranks: list[int]
    nodes: list[int]
    au: list[float | None]
    samples_per_s: list[float | None]
    read_bandwidth_per_rank: list[float | None]  # what the job demanded, bytes/s
    read_bandwidth_per_node: list[float | None]
    largest_fed: Scale | None  # the largest point at or above the AU threshold


class Projection(Model):
    run_id: str
    demand_per_rank: float  # bytes/s a fully fed rank would read
    fs_bandwidth: float
    fs_bandwidth_source: str
    ranks_at_bandwidth: float
    opens_per_rank: float | None
    fs_metadata_rate: float | None
    ranks_at_metadata: float | None
    text: str


class PipelineAcross(Model):
    """The input pipeline across the sweep (iosweep.analysis.pipeline.levers)."""

    schema_: Literal["iosweep.analysis.sweep/1"] = Field(
        default="iosweep.analysis.sweep/1", alias="schema"
    )
    levers: list[LeverSeries]
    scale: list[ScaleSeries]
    projection: Projection | None
    au_threshold: float
    # each run's levers where the sweep measured the parameter one of them turns
    advised: list[RunLevers] = Field(default_factory=list)


#: the JSON files of the sweep analysis and their models
SWEEP_MODELS: dict[str, type[Model]] = {
    "scaling.json": Scaling,
    "insights_across.json": InsightsAcross,
    "overhead.json": Overhead,
    "pipeline.json": PipelineAcross,
}
