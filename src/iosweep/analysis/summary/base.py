"""What every model of the hand-off shares: the base model (unknown keys rejected), the schema
versions and the names of the files the analysis writes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

#: schema version of summary.json; bump it when a field changes meaning or shape
SCHEMA = "iosweep.analysis.run/4"
SUMMARY_FILE = "summary.json"
#: the tables analyze_run writes beside summary.json, as ``<name>.parquet``
ANALYSIS_TABLES = (
    "files",
    "file_ranks",
    "ranks",
    "nodes",
    "sizes",
    "phases",
    "overlap",
    "ops_sample",
    "pipeline",
    "heatmap",
    "unoverlapped",
)
#: what analyze_sweep writes
SWEEP_FILES = (
    "sweep.csv",
    "sweep.parquet",
    "scaling.json",
    "insights_across.json",
    "overhead.json",
    "pipeline.json",
)


SWEEP_SCHEMA = "iosweep.analysis.sweep/1"


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
