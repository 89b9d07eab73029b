"""The hand-off from the analysis to the report: the one definition of ``summary.json``.

:class:`RunSummary` is what :func:`iosweep.analysis.run.analyze_run` writes for one run and
:class:`AnalysisFailure` what ``iosweep analyze`` writes for a store it could not analyse.
Both are written with :func:`write_summary` and read with :func:`read_summary`, which check
the shape (pydantic, unknown keys rejected) and the schema version, so a report never reads
a summary of another shape by accident.

This module imports nothing else from iosweep but its file helpers: the report imports it (and only it) from the
analysis package, a contract ``make lint`` checks.

Sections whose inner shape varies with the data (per-class maps, the headline metrics that
the sweep table takes as columns) are typed as mappings; their keys are documented in
docs/analysis.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from iosweep.files import json_safe, write_text

#: schema version of summary.json; bump it when a field changes meaning or shape
SCHEMA = "iosweep.analysis.run/2"
SUMMARY_FILE = "summary.json"
#: the tables analyze_run writes beside summary.json, as ``<name>.parquet``
TABLES = (
    "files",
    "file_ranks",
    "ranks",
    "nodes",
    "sizes",
    "phases",
    "overlap",
    "ops_sample",
)
#: what analyze_sweep writes
SWEEP_FILES = (
    "sweep.csv",
    "sweep.parquet",
    "scaling.json",
    "insights_across.json",
    "overhead.json",
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Issue(_Model):
    """Something wrong or missing in a run's logs (iosweep.trace.schema.Issue)."""

    source: str
    kind: str
    message: str
    severity: Literal["error", "warning"] = "error"


class RankHost(_Model):
    rank: int
    host: str


class RunInfo(_Model):
    """How the run was made, from its trace store's ``run.json``: what the report states
    about provenance without opening the store."""

    clock_zero: float | None = None  # Unix seconds that time 0.0 of every time stands for
    command: list[str] = Field(default_factory=list)
    ranks: list[RankHost] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)
    manifest: dict[str, Any] = Field(default_factory=dict)  # the run manifest as written


class RunWindow(_Model):
    start: float | None
    end: float | None
    run_time: float


class Ranks(_Model):
    count: int
    kind: Literal["rank", "process"]
    with_io: int
    nodes: int
    hosts: list[str]
    per_node: dict[str, int]


class Trace(_Model):
    segments: int
    counter_records: int
    dxt_available: bool
    completeness: float | None
    excluded_ops: int
    unattributed: dict[str, int | float]


class Epoch(_Model):
    epoch: int
    start: float
    end: float


class Temporal(_Model):
    signatures: dict[str, Any]
    same_sequence: dict[str, Any]
    signature_groups: dict[str, Any]
    phases: dict[str, Any]
    epochs: list[Epoch]


class Spatial(_Model):
    ops: int
    ops_by_category: dict[str, int]
    share_by_category: dict[str, float | None]
    patterns: dict[str, int]


class Stat(_Model):
    min: float
    mean: float
    median: float
    max: float
    sum: float


class Imbalance(_Model):
    bytes: float | None
    bytes_cv: float | None = None
    io_time: float | None
    io_time_max: float | None = None
    io_time_median: float | None = None
    stragglers: list[int]


class OpsSample(_Model):
    """What ``ops_sample.parquet`` stands for: ``shown`` of ``total`` analysed operations
    (``excluded``: on files the analysis left out); classes in plotting order."""

    total: int
    shown: int
    excluded: int
    class_order: list[str]


class Insight(_Model):
    id: str
    severity: Literal["high", "warn", "info"]
    title: str
    message: str
    numbers: dict[str, Any] = Field(default_factory=dict)
    recommendation: str = ""
    class_: str | None = Field(default=None, alias="class")


class RunSummary(_Model):
    """One run's analysis (``summary.json``); every fact the report states about the run."""

    schema_: Literal["iosweep.analysis.run/2"] = Field(
        default="iosweep.analysis.run/2", alias="schema"
    )
    run_id: str
    params: dict[str, Any]
    store: str
    store_relative: str | None = None
    tracer: str
    status: str  # the run's own: ok | partial | failed | skipped
    analysis_status: Literal["complete", "partial", "empty", "untraced"]
    empty: bool
    incomplete: bool
    issues: list[Issue]
    limitations: list[str]
    settings: dict[str, Any]
    run: RunWindow
    run_meta: RunInfo
    ranks: Ranks
    trace: Trace
    classes: dict[str, dict[str, Any]]  # per file class: files, bytes, access, spatial
    access: dict[str, dict[str, str | None]]  # class -> direction -> strategy
    spatial: Spatial
    sizes: dict[str, Any]
    metadata: dict[str, Any]
    temporal: Temporal
    nodes: list[dict[str, Any]]
    checkpoints: dict[str, Any]
    overlap: dict[str, Any]
    volume: dict[str, Stat | None]
    imbalance: Imbalance
    headline: dict[str, Any]  # flat metrics: one column each in the sweep table
    insights: list[Insight]
    ops_sample: OpsSample
    tables: dict[str, str]  # table name -> file beside summary.json


class AnalysisFailure(_Model):
    """What ``iosweep analyze`` writes for a store it could not analyse."""

    schema_: Literal["iosweep.analysis.run/2"] = Field(
        default="iosweep.analysis.run/2", alias="schema"
    )
    run_id: str
    error: str
    analysis_status: Literal["error"] = "error"


Summary = RunSummary | AnalysisFailure


class SummaryError(ValueError):
    """A summary.json that is missing, unreadable, or not of this version's shape."""


def to_dict(summary: Summary) -> dict[str, Any]:
    """The summary as summary.json holds it."""
    # pydantic writes NaN and infinities as they are; summary.json holds null
    return json_safe(summary.model_dump(mode="json", by_alias=True, exclude_none=False))


def validate(d: dict[str, Any], source: str = "summary") -> Summary:
    """The model for a summary mapping; SummaryError naming ``source`` and the bad field."""
    if not isinstance(d, dict):
        raise SummaryError(f"{source}: not a JSON object")
    schema = d.get("schema")
    if schema != SCHEMA:
        raise SummaryError(
            f"{source}: summary schema {schema!r}, this iosweep reads {SCHEMA!r}; "
            "rerun the analysis (iosweep analyze, or the workflow) to update it"
        )
    model: type[RunSummary] | type[AnalysisFailure] = (
        AnalysisFailure if d.get("analysis_status") == "error" else RunSummary
    )
    try:
        return model.model_validate(d)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SummaryError(
            f"{source}: {where}: {first['msg']} ({e.error_count()} problem(s))"
        ) from None


def write_summary(summary: Summary | dict[str, Any], out_dir: Path | str) -> Path:
    """Check, then write ``out_dir/summary.json`` atomically (its presence means done)."""
    model = summary if isinstance(summary, BaseModel) else validate(summary, str(out_dir))
    return write_text(Path(out_dir) / SUMMARY_FILE, json.dumps(to_dict(model), indent=1) + "\n")


def read_summary(path: Path | str) -> Summary:
    """The summary in ``path`` (summary.json, or the analysis directory holding it)."""
    p = Path(path)
    if p.is_dir():
        p = p / SUMMARY_FILE
    try:
        d = json.loads(p.read_text())
    except OSError as e:
        raise SummaryError(f"{p}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise SummaryError(f"{p}: not valid JSON: {e}") from None
    return validate(d, str(p))
