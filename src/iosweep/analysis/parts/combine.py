"""The run's results put together from its parts' (folders of
:func:`iosweep.analysis.parts.run.analyze_part`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from iosweep.analysis.classify import classify_paths
from iosweep.analysis.data import StringCodes, class_names
from iosweep.analysis.parts import tables
from iosweep.analysis.parts.run import (
    DATASET,
    EOF_READS,
    EPOCH_PAIRS,
    METADATA_EVENTS,
    OPENS_CALLED,
    OPENS_COUNTED,
    OVERLAP,
    PHASE_RANKS,
    PHASES,
    PIPELINE,
    PLACE_COUNTS,
    PLACE_SPANS,
    SHAPE_STREAMS,
    SIGNATURES,
    SIZES,
    UNOVERLAPPED,
    UNOVERLAPPED_RANKS,
    PartsError,
)
from iosweep.analysis.patterns.access import access_summary, classes_summary, per_epoch_of
from iosweep.analysis.patterns.files import RunFiles
from iosweep.analysis.patterns.metadata import metadata_summary
from iosweep.analysis.patterns.shapes import shapes_of
from iosweep.analysis.patterns.sizes import add_size_counts, sizes_of
from iosweep.analysis.patterns.spatial import add_counter_sums, spatial_summary
from iosweep.analysis.patterns.temporal import (
    epoch_windows_of,
    phases_of,
    signature_groups,
    temporal_summary,
)
from iosweep.analysis.patterns.volume import Tables, finish_tables
from iosweep.analysis.pipeline.epochs import placement_of
from iosweep.analysis.pipeline.overlap import COLUMNS as OVERLAP_COLUMNS
from iosweep.analysis.pipeline.overlap import overlap_summary
from iosweep.analysis.pipeline.overlap import unavailable as overlap_unavailable
from iosweep.analysis.pipeline.unoverlapped import COLUMNS as UNOVERLAPPED_COLUMNS
from iosweep.analysis.pipeline.unoverlapped import UNAVAILABLE as UNOVERLAPPED_UNAVAILABLE
from iosweep.analysis.pipeline.unoverlapped import unoverlapped_summary
from iosweep.analysis.pipeline.waits import PipelineFacts, pipeline_context, pipeline_summary
from iosweep.analysis.settings import AnalysisSettings
from iosweep.trace.store import open_store


@dataclass
class Combined:
    """The run's results put together from its parts'."""

    run: RunFiles
    run_start: float
    run_end: float
    tables: Tables
    sizes: tuple[pd.DataFrame, dict[str, Any]]  # the sizes table and summary
    pipeline: tuple[pd.DataFrame, dict[str, Any]]  # the (rank, epoch) table and summary
    overlap: tuple[pd.DataFrame, dict[str, Any]]  # the (rank, epoch) table and summary
    unoverlapped: pd.DataFrame  # per process (its summary is the pipeline's)
    phases: pd.DataFrame
    summary: dict[str, Any]  # the summary's sections built in parts so far


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
    summary: dict[str, Any] = {
        "spatial": spatial_summary(
            add_counter_sums([f["counter_sums"] for f in facts]), t.file_rank
        ),
        "metadata": _metadata(parts, facts, t.ranks, max(0.0, end - start)),
    }
    counts = add_size_counts([pd.read_parquet(p / SIZES) for p in parts])
    sizes = sizes_of(counts, t.file_rank, run.class_names, settings)
    pipeline = _pipeline(parts, facts, (start, end), meta.params, t.files, sizes[1], settings)
    pairs = pd.concat([tables.read_frame(p / EPOCH_PAIRS, paths) for p in parts])
    per_epoch = {}
    for ci, name in enumerate(run.class_names):
        pe = per_epoch_of(pairs[pairs["cls"] == ci])
        if pe:
            per_epoch[name] = pe
    classes = classes_summary(
        run.class_names, len(meta.ranks), settings, t.files, t.file_rank, per_epoch
    )
    summary |= {"classes": classes, "access": access_summary(classes)}
    summary["file_shapes"] = _shapes(parts, facts, paths, run)
    overlap = _overlap(parts, facts, tp.ops > 0, meta.params)
    unoverlapped, pipeline[1]["unoverlapped"] = _unoverlapped(parts, facts)
    summary["placement"] = placement_of(
        sum(pd.read_parquet(p / PLACE_COUNTS) for p in parts),
        pd.concat([pd.read_parquet(p / PLACE_SPANS) for p in parts], ignore_index=True),
        facts[0]["epochs_known"],
        max(0.0, end - start),
    )
    steps = open_store(store).table("steps", ["epoch", "step", "start", "end"]).to_pandas()
    phases = phases_of(
        _with_part([pd.read_parquet(p / PHASES) for p in parts]),
        _with_part([pd.read_parquet(p / PHASE_RANKS) for p in parts]),
        run.class_names,
        settings.phase_gap_s,
        epoch_windows_of(steps),
    )
    windows = epoch_windows_of(steps)
    summary["temporal"] = temporal_summary(_signatures(parts, paths, t), phases, windows)
    return Combined(run, start, end, t, sizes, pipeline, overlap, unoverlapped, phases, summary)


def _signatures(parts: list[Path], paths: StringCodes, t: Tables) -> dict[str, Any]:
    """The ranks' signatures from the parts', once the run's file sizes confirm where each
    part took end of file to be (PartsError where they do not)."""
    if not t.dxt_available:  # no operations: nothing to sign
        return {"per_rank": {}, "same_sequence": {}, "groups": {}}
    size = np.zeros(max(len(paths), 1), np.int64)
    size[t.files["file"].to_numpy()] = t.files["size"].to_numpy()
    per_rank: dict[str, Any] = {}
    shapes: dict[str, dict[int, str]] = {}
    for p in parts:
        eof = tables.read_frame(p / EOF_READS, paths)
        early = eof[size[eof["file"].to_numpy()] > eof["offset"].to_numpy()]
        if len(early):
            raise PartsError(
                f"{p}: a zero-byte read of {paths.values[int(early['file'].iloc[0])]} at "
                f"{int(early['offset'].iloc[0])} is at the end of the file as this part's "
                "ranks see it, not as the run's do: analyse the run whole"
            )
        part = json.loads((p / SIGNATURES).read_text())
        per_rank |= part["per_rank"]
        for scope, by in part["shapes"].items():
            shapes.setdefault(scope, {}).update({int(a): h for a, h in by.items()})
    return signature_groups(per_rank, shapes)


def _with_part(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The parts' frames as one, each row with its part's number (``part``)."""
    return pd.concat([f.assign(part=i) for i, f in enumerate(frames)], ignore_index=True)


def _metadata(
    parts: list[Path], facts: list[dict[str, Any]], ranks: pd.DataFrame, run_time: float
) -> dict[str, Any]:
    """The metadata summary (the ranks' metadata columns from the events where the run has
    no counters)."""
    found = [p / METADATA_EVENTS for p in parts if (p / METADATA_EVENTS).exists()]
    events = (
        pd.concat([pd.read_parquet(f) for f in found]).set_index("rank").sort_index()
        if found
        else None
    )
    counted = sum(f["counter_records"] for f in facts) > 0
    return metadata_summary(ranks, events, counted, run_time)


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


def _shapes(
    parts: list[Path], facts: list[dict[str, Any]], paths: StringCodes, run: RunFiles
) -> dict[str, Any] | None:
    """The dataset's read shapes from the parts' read streams and opens per file."""
    streams = [
        tables.read_frame(p / SHAPE_STREAMS, paths) for p in parts if (p / SHAPE_STREAMS).exists()
    ]
    if DATASET not in run.class_names or not streams:
        return None
    counted = sum(f["counter_records"] for f in facts) > 0
    name = OPENS_COUNTED if counted else OPENS_CALLED
    opens = pd.concat([tables.read_frame(p / name, paths) for p in parts if (p / name).exists()])
    per_file = opens.groupby("file")["opens"].sum()
    return shapes_of(pd.concat(streams, ignore_index=True), per_file, DATASET)


def _overlap(
    parts: list[Path], facts: list[dict[str, Any]], has_ops: bool, params: dict[str, Any]
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The overlap of I/O and compute from the parts' (rank, epoch) rows."""
    seen = {s for f in facts for s in f["compute_sources"]}
    sources = [s for s in ("steps", "app_events") if s in seen]
    if not sources or not has_ops:
        return pd.DataFrame(columns=OVERLAP_COLUMNS), overlap_unavailable(has_ops, params)
    rows = pd.concat([pd.read_parquet(p / OVERLAP) for p in parts], ignore_index=True)
    rows = rows.sort_values("rank", kind="stable", ignore_index=True)
    return rows, overlap_summary(rows, sources)


def _unoverlapped(
    parts: list[Path], facts: list[dict[str, Any]]
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The unoverlapped I/O (DFAnalyzer's figures): its per-process table and summary from
    the parts' processes and ranks."""
    if not any(f["compute_events"] for f in facts):
        return pd.DataFrame(columns=UNOVERLAPPED_COLUMNS), dict(UNOVERLAPPED_UNAVAILABLE)
    table = pd.concat([pd.read_parquet(p / UNOVERLAPPED) for p in parts], ignore_index=True)
    table = table.sort_values(["rank", "pid"], ignore_index=True)
    ranks = pd.concat([pd.read_parquet(p / UNOVERLAPPED_RANKS) for p in parts], ignore_index=True)
    per_rank = ranks.sort_values("rank").to_dict(orient="records")
    return table, unoverlapped_summary(table, per_rank)
