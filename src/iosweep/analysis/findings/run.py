"""analyze_run: one trace store in, ``summary.json`` and Parquet tables out (see docs/analysis.md)."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from iosweep import memory
from iosweep.analysis import budget
from iosweep.analysis.data import RunData, load_run, unsized_io_calls
from iosweep.analysis.findings.rules import run_checks
from iosweep.analysis.findings.sample import sample_ops
from iosweep.analysis.findings.sections import (
    coverage_issues,
    file_tables,
    headline,
    imbalance_summary,
    ranks_summary,
    run_meta_summary,
    status_of,
    status_sections,
    volume_summary,
)
from iosweep.analysis.patterns.access import access_summary, classes_summary, per_epoch_reads
from iosweep.analysis.patterns.alignment import analyze_alignment
from iosweep.analysis.patterns.artefacts import fd_reuse, remove
from iosweep.analysis.patterns.checkpoints import checkpoint_summary
from iosweep.analysis.patterns.file_ranks import facts_of
from iosweep.analysis.patterns.files import RunFiles
from iosweep.analysis.patterns.layers import analyze_layers
from iosweep.analysis.patterns.metadata import analyze_metadata
from iosweep.analysis.patterns.mpiio import aggregator_ranks, analyze_mpiio
from iosweep.analysis.patterns.shapes import file_shapes
from iosweep.analysis.patterns.sizes import analyze_sizes
from iosweep.analysis.patterns.spatial import (
    classify_ops,
    counter_sums,
    spatial_summary,
)
from iosweep.analysis.patterns.temporal import (
    epoch_windows,
    heatmap,
    phases,
    signatures,
    temporal_summary,
)
from iosweep.analysis.patterns.volume import build_tables
from iosweep.analysis.pipeline.completeness import completeness_checks
from iosweep.analysis.pipeline.dlio import dlio_beside
from iosweep.analysis.pipeline.epochs import op_epochs, placement, rank_windows
from iosweep.analysis.pipeline.overlap import analyze_overlap
from iosweep.analysis.pipeline.phases import use_annotated_steps
from iosweep.analysis.pipeline.unoverlapped import analyze_unoverlapped
from iosweep.analysis.pipeline.waits import analyze_pipeline, pipeline_context
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.subset import select
from iosweep.analysis.summary import to_dict, validate, write_summary
from iosweep.analysis.timeline import export as timeline_export
from iosweep.files import atomic_write, json_safe
from iosweep.trace.store import open_store


def analyze_run(
    store_path: Path | str,
    out_dir: Path | str,
    settings: AnalysisSettings | None = None,
    phases: dict[str, list] | None = None,
    ranks: Collection[int] | None = None,
) -> dict[str, Any]:
    """Analyse one trace store; write ``out_dir/summary.json`` and the tables; return the
    summary. ``phases``: phase rules that replace, kind by kind, those the store was
    ingested with and the settings' (``iosweep analyze --phase``); ``ranks``: only these
    ranks (``--ranks``, :mod:`iosweep.analysis.subset`)."""
    settings = settings or AnalysisSettings()
    out_dir = Path(out_dir)
    # the need checked before anything but the chosen ranks' rows is read, or anything written
    subset = select(open_store(Path(store_path)), ranks) if ranks is not None else None
    budget.check(store_path, settings.memory_gb, subset)
    out_dir.mkdir(parents=True, exist_ok=True)
    memory.map_large_arrays()
    rd = load_run(Path(store_path), settings, phases, subset)
    memory.release()  # the Arrow tables read are gone; their pages need not stay
    mask, artefacts = fd_reuse(rd)
    remove(rd, mask, artefacts)
    summary, tables = _analyze(rd)
    timeline = rd.cache.pop("timeline", None)
    summary["timeline"] = timeline_export.Timeline.record_of(timeline)
    summary["artefacts"] = artefacts
    summary["store_relative"] = os.path.relpath(Path(store_path).resolve(), out_dir.resolve())
    for name, df in tables.items():
        write_parquet(df, out_dir / f"{name}.parquet")
    summary["tables"] = {name: f"{name}.parquet" for name in tables}
    model = validate(json_safe(summary), str(out_dir))
    if timeline:
        timeline_export.write(rd.meta, timeline, to_dict(model), out_dir / timeline_export.FILE)
    write_summary(model, out_dir)  # last: its presence means done
    return to_dict(model)


def _status(rd: RunData, t) -> tuple[str, bool, list[dict[str, Any]], list[str]]:
    """(analysis status, incomplete, issues, limitations) of the run's trace."""
    issues = [asdict(i) for i in rd.issues] + coverage_issues(rd.meta, rd.actor_kind, t.ranks)
    return status_of(
        rd.meta,
        str(rd.store),
        issues,
        bool(len(rd.ops) or len(rd.counters)),
        t.dxt_available,
        bool(len(rd.counters)),
        rd.shared_records,
        list(rd.limitations),
    )


@dataclass
class EpochFacts:
    """What the epochs tell: each operation's epoch, per class the sharing within epochs, and
    the dataset's file shapes; computed while the per-op process ids are still there."""

    op_epoch: np.ndarray
    per_epoch: dict[str, dict[str, Any]]
    shapes: dict[str, Any] | None
    placement: dict[str, Any]


def _epoch_facts(rd: RunData) -> EpochFacts:
    windows = rank_windows(rd)
    op_epoch = op_epochs(rd, windows)
    per_epoch = {}
    for ci, cname in enumerate(rd.class_names):
        pe = per_epoch_reads(rd, op_epoch, ci)
        if pe:
            per_epoch[cname] = pe
    return EpochFacts(
        op_epoch, per_epoch, file_shapes(rd, op_epoch, "dataset"), placement(rd, op_epoch, windows)
    )


def _analyze(rd: RunData) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    s = rd.settings
    meta = rd.meta
    use_annotated_steps(rd)
    # the timeline first: it needs every operation's process and thread, freed below
    timeline = timeline_export.collect(rd) if s.timeline["enabled"] else None
    rd.ops.thread = None
    sp = classify_ops(rd)
    rd.cache.pop("time_rank", None)
    t = build_tables(rd, sp)
    # Free what later steps do not use: the stream sort and the per-op columns only the
    # tables needed (ten million segments: ~400 MB).
    sp.order = sp.key = np.empty(0, np.int64)
    rd.ops.host = rd.ops.module = None
    memory.release()
    ef = _epoch_facts(rd)
    unov_table, unov = analyze_unoverlapped(rd)
    rd.ops.pid = None
    rd.cache.pop("time_rank", None)
    file_size = np.zeros(len(rd.paths), np.int64)
    if len(t.files):
        file_size[t.files["file"].to_numpy()] = t.files["size"].to_numpy()
    status, incomplete, issues, limitations = _status(rd, t)

    ranks = t.ranks
    md = analyze_metadata(rd, ranks)
    windows = epoch_windows(rd)
    # what the summary takes from the (rank, file) rows, as a run analysed in parts does
    mpiio = analyze_mpiio(rd, ranks, t.file_rank)
    checkpoints = checkpoint_summary(rd, t.file_rank, windows)
    facts = facts_of(t.file_rank, t.files, len(rd.class_names), aggregator_ranks(mpiio, ranks), s)
    t.file_rank = None
    size_table, size_summary = analyze_sizes(rd, facts)
    ph = phases(rd, windows)
    ov_table, ov_summary = analyze_overlap(rd)
    rd.cache.pop("io_spans", None)  # the ranks table and the overlap were its readers
    sig = (
        signatures(rd, sp, file_size)
        if len(rd.ops)
        else {"per_rank": {}, "same_sequence": {}, "groups": {}}
    )
    del sp
    memory.release()
    classes = classes_summary(rd.class_names, rd.n_ranks, rd.settings, t.files, facts, ef.per_epoch)
    pipe_table, pipe = analyze_pipeline(
        rd,
        ef.op_epoch,
        pipeline_context(
            rd.meta.params, (classes.get("dataset") or {}).get("size_median"), size_summary
        ),
    )
    pipe["unoverlapped"] = unov
    pipe["dlio"] = dlio_beside(rd.meta, pipe_table, pipe)
    checks = completeness_checks(
        rd.meta,
        bool(len(rd.ops) or len(rd.counters)),
        int(classes.get("dataset", {}).get("bytes_read", 0)),
        int(classes.get("dataset", {}).get("files", 0)),
        pipe,
        checkpoints,
    )
    sh = rd.shared_records
    summary: dict[str, Any] = {
        **status_sections(meta, rd.store, (status, incomplete, issues, limitations), checks),
        "settings": s.to_dict(),
        "run": {"start": rd.run_start, "end": rd.run_end, "run_time": rd.run_time},
        "ranks": ranks_summary(rd.n_ranks, rd.actor_kind, rd.actor_host, ranks),
        "trace": {
            "segments": len(rd.ops),
            # the records of the log: a spread shared record is one, not one per rank
            "counter_records": len(rd.counters) - sh.spread * max(sh.ranks - 1, 0),
            "dxt_available": t.dxt_available,
            "completeness": t.completeness,
            "excluded_ops": rd.excluded_ops,
            "excluded_records": rd.excluded_records,
            "excluded_paths": rd.excluded_paths,
            "unsized_io_calls": unsized_io_calls(rd.app_events),
            "unattributed": rd.unattributed,
            "shared_records": sh.to_json(),
        },
        "classes": classes,
        "access": access_summary(classes),
        "spatial": spatial_summary(counter_sums(rd), facts.ops_by_category, facts.patterns),
        "sizes": size_summary,
        "metadata": md,
        "temporal": temporal_summary(sig, ph, windows),
        "nodes": t.nodes.to_dict(orient="records"),
        "checkpoints": checkpoints,
        "overlap": ov_summary,
        "pipeline": pipe,
        "file_shapes": ef.shapes,
        "placement": ef.placement,
    }
    summary["run_meta"] = run_meta_summary(meta)
    summary["volume"] = volume_summary(ranks)
    summary["imbalance"] = imbalance_summary(ranks)
    summary["mpiio"] = mpiio
    summary["layers"] = analyze_layers(rd)
    summary["alignment"] = analyze_alignment(rd)
    summary["headline"] = headline(rd.n_ranks, rd.run_time, summary, t, facts)
    summary["insights"], summary["checks"] = run_checks(
        summary, t.files, ranks, s, facts.spreads if facts.rows else None
    )
    summary["headline"]["insights"] = len(summary["insights"])
    present = set(t.files["class"].astype(str))
    files, file_ranks, bounded = file_tables(t.files, facts, RunFiles.of(rd), s.table_max_files)
    # the full files table (half a GB at a million files) is done with: not held through
    # the temporaries of the sample and the heatmap
    t.files = pd.DataFrame()
    del facts
    memory.release()
    sample, info = sample_ops(rd, present, s.plot_sample_ops)
    summary["ops_sample"] = asdict(info)
    summary["file_tables"] = bounded
    tables = {
        "ops_sample": sample,
        "files": files,
        "file_ranks": file_ranks,
        "ranks": ranks,
        "nodes": t.nodes,
        "sizes": size_table,
        "phases": ph,
        "overlap": ov_table,
        "pipeline": pipe_table,
        "unoverlapped": unov_table,
        "heatmap": heatmap(rd),
    }
    rd.cache["timeline"] = timeline
    return summary, tables


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    table = df.reset_index(drop=True)
    atomic_write(
        path,
        lambda p: table.to_parquet(p, index=False, compression="zstd"),
        need=int(table.memory_usage(deep=True).sum()),  # uncompressed: an upper bound
    )
