"""A part analysed on its own, and the parts' results put together into the run's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from iosweep import memory
from iosweep.analysis.classify import classify_paths
from iosweep.analysis.data import RunData, StringCodes, class_names, load_run
from iosweep.analysis.parts import tables
from iosweep.analysis.parts.plan import Part
from iosweep.analysis.patterns.artefacts import fd_reuse, remove
from iosweep.analysis.patterns.files import RunFiles
from iosweep.analysis.patterns.sizes import add_size_counts, size_counts, sizes_of
from iosweep.analysis.patterns.spatial import classify_ops
from iosweep.analysis.patterns.volume import Tables, finish_tables, tables_part
from iosweep.analysis.pipeline.epochs import op_epochs, rank_windows, run_windows, windows_of
from iosweep.analysis.pipeline.phases import use_annotated_steps
from iosweep.analysis.pipeline.waits import (
    PipelineFacts,
    pipeline_context,
    pipeline_facts,
    pipeline_summary,
    rank_epoch_table,
)
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.subset import select
from iosweep.trace.store import open_store

SIZES, PIPELINE = "size_counts.parquet", "pipeline.parquet"


def part_data(
    store: Path, part: Part, settings: AnalysisSettings, phases: dict[str, list] | None = None
) -> RunData:
    """The part's data, as the whole run's is analysed: tracer artefacts out, annotated
    steps in."""
    subset = select(open_store(store), part.ranks, unranked=part.unranked)
    rd = load_run(store, settings, phases, subset)
    remove(rd, *fd_reuse(rd))
    use_annotated_steps(rd)
    return rd


def analyze_part(
    store: Path,
    part: Part,
    out: Path,
    settings: AnalysisSettings,
    phases: dict[str, list] | None = None,
) -> None:
    """The part's results under ``out`` (one folder per part)."""
    memory.map_large_arrays()
    rd = part_data(store, part, settings, phases)
    if "timing" in rd.cache:
        raise PartsError(
            f"{store}: the run's steps come from its trace's annotations, which a part of its "
            "ranks cannot place in the run's epochs yet: analyse it whole"
        )
    tp = tables_part(rd, classify_ops(rd))
    out.mkdir(parents=True, exist_ok=True)
    size_counts(rd).to_parquet(out / SIZES, index=False)
    op_epoch = op_epochs(rd, rank_windows(rd), run_epochs(store))
    rank_epoch_table(rd, op_epoch).to_parquet(out / PIPELINE, index=False)
    facts = {
        "ranks": part.ranks,
        "actor_host": {str(a): h for a, h in rd.actor_host.items()},
        "run_start": rd.run_start,
        "run_end": rd.run_end,
        "has_steps": not rd.steps.empty,
        "pipeline": asdict(pipeline_facts(rd)),
    }
    tables.write_part(tp, rd.paths, facts, out)


class PartsError(ValueError):
    """The run cannot be analysed in parts (yet)."""


def run_epochs(store: Path) -> pd.DataFrame:
    """The run's epochs, from every rank's steps: a part's ranks that logged no steps of
    their own read in them."""
    steps = open_store(store).table("steps", ["rank", "epoch", "step", "start", "end"])
    windows = windows_of(steps.to_pandas().rename(columns={"rank": "actor"}))
    return run_windows(windows) if not windows.empty else windows


@dataclass
class Combined:
    """The run's results put together from its parts'."""

    run: RunFiles
    run_start: float
    run_end: float
    tables: Tables
    sizes: tuple[pd.DataFrame, dict[str, Any]]  # the sizes table and summary
    pipeline: tuple[pd.DataFrame, dict[str, Any]]  # the (rank, epoch) table and summary


def combine(store: Path, parts: list[Path], settings: AnalysisSettings) -> Combined:
    """The run's results from its parts' (folders of :func:`analyze_part`)."""
    meta = open_store(store).meta
    if meta.phases:
        settings = replace(settings, phases={**settings.phases, **meta.phases})
    paths = StringCodes()
    tp = tables.combine(parts, paths)
    facts = [tables.facts(p) for p in parts]
    actor_host = {int(a): h for f in facts for a, h in f["actor_host"].items()}
    run = RunFiles(
        paths.values,
        classify_paths(pa.array(paths.values, pa.string()), settings),
        class_names(settings, meta, any(f["has_steps"] for f in facts)),
        dict(sorted(actor_host.items())),
        settings,
    )
    start = min(f["run_start"] for f in facts)
    end = max(f["run_end"] for f in facts)
    t = finish_tables(tp, run, max(0.0, end - start))
    counts = add_size_counts([pd.read_parquet(p / SIZES) for p in parts])
    sizes = sizes_of(counts, t.file_rank, run.class_names, settings)
    pipeline = _pipeline(parts, facts, (start, end), meta.params, t.files, sizes[1], settings)
    return Combined(run, start, end, t, sizes, pipeline)


def _pipeline(
    parts: list[Path],
    facts: list[dict[str, Any]],
    span: tuple[float, float],
    params: dict[str, Any],
    files: pd.DataFrame,
    sizes: dict[str, Any],
    settings: AnalysisSettings,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The pipeline's (rank, epoch) table and summary from the parts' rows and facts."""
    rows = [pd.read_parquet(p / PIPELINE) for p in parts]
    t = pd.concat([r for r in rows if len(r)] or rows[:1], ignore_index=True)
    t = t.sort_values(["rank", "epoch"], ignore_index=True)
    pf = [PipelineFacts(**f["pipeline"]) for f in facts]
    spans = [f.io_span for f in pf if f.io_span is not None]
    combined = replace(
        pf[0],  # the timing and the reason come from the run's manifest and meta
        has_steps=any(f.has_steps for f in pf),
        timed=any(f.timed for f in pf),
        run_start=span[0],
        run_end=span[1],
        io_span=(min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None,
    )
    dataset = files.loc[files["class"] == "dataset", "size"]
    context = pipeline_context(params, float(np.median(dataset)) if len(dataset) else None, sizes)
    return t, pipeline_summary(t, combined, context, settings)
