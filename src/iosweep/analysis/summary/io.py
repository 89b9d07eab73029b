"""Writing and reading the hand-off's files through their models: a summary or sweep file of
another shape or version is an error naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from iosweep.analysis.summary.base import SCHEMA, SUMMARY_FILE, SWEEP_SCHEMA
from iosweep.analysis.summary.run import AnalysisFailure, RunSummary, Summary
from iosweep.analysis.summary.sweep import (
    SWEEP_MODELS,
    InsightsAcross,
    Overhead,
    PipelineAcross,
    Scaling,
)
from iosweep.files import json_safe, write_text


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


def write_sweep_file(
    model: Scaling | InsightsAcross | Overhead | PipelineAcross, out_dir: Path | str
) -> Path:
    """Write one sweep file (its name from :data:`SWEEP_MODELS`) atomically."""
    name = next(n for n, m in SWEEP_MODELS.items() if isinstance(model, m))
    d = json_safe(model.model_dump(mode="json", by_alias=True))
    return write_text(Path(out_dir) / name, json.dumps(d, indent=1) + "\n")


def read_sweep_file(path: Path | str) -> Scaling | InsightsAcross | Overhead | PipelineAcross:
    """One sweep file, checked against its model; SummaryError naming the file otherwise."""
    p = Path(path)
    model = SWEEP_MODELS.get(p.name)
    if model is None:
        raise SummaryError(f"{p}: not a sweep analysis file ({', '.join(SWEEP_MODELS)})")
    try:
        d = json.loads(p.read_text())
    except OSError as e:
        raise SummaryError(f"{p}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise SummaryError(f"{p}: not valid JSON: {e}") from None
    if not isinstance(d, dict) or d.get("schema") != SWEEP_SCHEMA:
        found = d.get("schema") if isinstance(d, dict) else None
        raise SummaryError(
            f"{p}: sweep schema {found!r}, this iosweep reads {SWEEP_SCHEMA!r}; "
            "rerun the sweep analysis to update it"
        )
    try:
        return model.model_validate(d)  # type: ignore[return-value]
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise SummaryError(f"{p}: {where}: {first['msg']} ({e.error_count()} problem(s))") from None
