"""analyze_run: one trace store in, ``summary.json`` and Parquet tables out (see docs/analysis.md)."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from iosweep import memory
from iosweep.analysis import budget
from iosweep.analysis.data import RunData, load_run, unsized_io_calls
from iosweep.analysis.findings.rules import run_checks
from iosweep.analysis.findings.sample import sample_ops
from iosweep.analysis.patterns.access import access_summary, classes_summary, per_epoch_reads
from iosweep.analysis.patterns.alignment import analyze_alignment
from iosweep.analysis.patterns.artefacts import fd_reuse, remove
from iosweep.analysis.patterns.checkpoints import checkpoint_summary
from iosweep.analysis.patterns.layers import analyze_layers
from iosweep.analysis.patterns.metadata import analyze_metadata
from iosweep.analysis.patterns.mpiio import analyze_mpiio
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
from iosweep.analysis.patterns.volume import build_tables, widen, with_shares
from iosweep.analysis.pipeline.completeness import completeness_checks
from iosweep.analysis.pipeline.dlio import dlio_beside
from iosweep.analysis.pipeline.epochs import op_epochs, placement, rank_windows
from iosweep.analysis.pipeline.overlap import analyze_overlap
from iosweep.analysis.pipeline.phases import use_annotated_steps
from iosweep.analysis.pipeline.unoverlapped import analyze_unoverlapped
from iosweep.analysis.pipeline.waits import analyze_pipeline, pipeline_context
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.shared import SharedRecords
from iosweep.analysis.subset import select
from iosweep.analysis.summary import SCHEMA, to_dict, validate, write_summary
from iosweep.analysis.timeline import export as timeline_export
from iosweep.files import atomic_write, json_safe
from iosweep.trace.schema import Issue, RunMeta
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
    summary["timeline"] = (
        timeline.record() if timeline else {"file": "", "cut": "analysis.timeline.enabled: false"}
    )
    summary["artefacts"] = artefacts
    summary["store_relative"] = os.path.relpath(Path(store_path).resolve(), out_dir.resolve())
    for name, df in tables.items():
        _write_parquet(df, out_dir / f"{name}.parquet")
    summary["tables"] = {name: f"{name}.parquet" for name in tables}
    model = validate(json_safe(summary), str(out_dir))
    if timeline:
        timeline_export.write(rd, timeline, to_dict(model), out_dir / timeline_export.FILE)
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


def status_of(
    meta: RunMeta,
    store: str,
    issues: list[dict[str, Any]],
    traced: bool,
    dxt_available: bool,
    counted: bool,
    shared: SharedRecords,
    limitations: list[str],
) -> tuple[str, bool, list[dict[str, Any]], list[str]]:
    """(analysis status, incomplete, issues, limitations) of a run's trace from what was
    found reading it (``issues`` beside the store's own, ``limitations`` of what was read),
    whether it holds I/O (``traced``), DXT segments and counter records (``counted``)."""
    issues = [asdict(i) for i in meta.issues] + issues
    incomplete = bool(meta.incomplete) or any(i["severity"] == "error" for i in issues)
    if meta.tracer == "none" and not traced:
        status = "untraced"
    elif not traced:
        status = "empty"
        incomplete = True
        issues.append(
            asdict(Issue(store, "empty", "the store holds no I/O: no segments and no counters"))
        )
    else:
        status = "partial" if incomplete else "complete"
    if not dxt_available and traced:
        limitations.append(
            "no per-operation trace (DXT): spatial and temporal patterns, offsets "
            "overlap and phases are not available; figures come from counters"
        )
    if not counted and traced:
        limitations.append("no Darshan counters: metadata from traced events only, if any")
    if shared.spread:
        limitations.append(
            f"Darshan reduced {shared.spread} file(s) shared by all {shared.ranks} ranks to one "
            "record each: per rank, figures on them are exact for the fastest and the slowest "
            "rank (Darshan's FASTEST/SLOWEST_RANK counters) and an equal share of the rest for "
            "the others"
        )
    return status, incomplete, issues, limitations


def ranks_summary(
    n_ranks: int, kind: str, actor_host: dict[int, str], ranks: pd.DataFrame
) -> dict[str, Any]:
    """The run's ranks (or processes, ``kind``), their hosts and how many did I/O."""
    hosts = sorted({h for h in actor_host.values() if h})
    return {
        "count": n_ranks,
        "kind": kind,
        "with_io": int((ranks[["reads", "writes"]].sum(axis=1) > 0).sum()) if len(ranks) else 0,
        "nodes": len(hosts),
        "hosts": hosts,
        "per_node": {h: sum(1 for v in actor_host.values() if v == h) for h in hosts},
    }


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
    size_table, size_summary = analyze_sizes(rd, t.file_rank)
    windows = epoch_windows(rd)
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
    classes = classes_summary(
        rd.class_names, rd.n_ranks, rd.settings, t.files, t.file_rank, ef.per_epoch
    )
    checkpoints = checkpoint_summary(rd, t.file_rank, windows)
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
        "spatial": spatial_summary(counter_sums(rd), t.file_rank),
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
    summary["mpiio"] = analyze_mpiio(rd, ranks, t.file_rank)
    summary["layers"] = analyze_layers(rd)
    summary["alignment"] = analyze_alignment(rd)
    summary["headline"] = _headline(rd, summary, t, ranks)
    summary["insights"], summary["checks"] = run_checks(summary, t.files, ranks, s, t.file_rank)
    summary["headline"]["insights"] = len(summary["insights"])
    present = set(t.files["class"].astype(str))
    files, file_ranks, file_tables = _bounded_file_tables(rd, t, s.table_max_files)
    # the full per-file tables (half a GB at a million files) are done with: not held
    # through the temporaries of the sample and the heatmap
    t.files = t.file_rank = pd.DataFrame()
    memory.release()
    sample, info = sample_ops(rd, present, s.plot_sample_ops)
    summary["ops_sample"] = asdict(info)
    summary["file_tables"] = file_tables
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


def _file_ranks_table(rd: RunData, file_rank: pd.DataFrame) -> pd.DataFrame:
    fr = with_shares(widen(file_rank)).rename(columns={"actor": "rank"})
    fr.insert(2, "path", np.asarray(rd.paths, dtype=object)[fr["file"].to_numpy()])
    fr["class"] = np.asarray(rd.class_names, dtype=object)[fr["class"].to_numpy()]
    fr.insert(1, "host", fr["rank"].map(rd.actor_host).fillna("").to_numpy(object))
    return fr


def _bounded_file_tables(
    rd: RunData, t, max_files: int
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The files and (rank, file) tables as written: cut to the ``max_files`` files that moved
    the most bytes (ties by path) and at most ``max_files`` of their (rank, file) rows (most
    bytes first), so that they stay bounded at a million files; and what they stand for,
    counted over every file (the report states it without reading the tables)."""
    files, fr = t.files, t.file_rank
    moved = files["bytes_read"] + files["bytes_written"]
    info = {
        "files": len(files),
        "zero_byte_files": int((moved == 0).sum()),
        "file_rank_rows": len(fr),
        # operations Darshan counted for which DXT holds no segment (e.g. STDIO)
        "counter_only_ops": int((fr["ctr_ops"] - fr["seg_ops"]).clip(lower=0).sum()),
        "max_files": max_files,
    }
    if len(files) > max_files:
        # Arrow's top-k, not a sort of a million paths as Python strings (paths are unique,
        # so the order is total and the choice exact)
        order = pa.table({"m": -moved.to_numpy(), "p": pa.array(files["path"], pa.string())})
        keys = [("m", "ascending"), ("p", "ascending")]
        keep = pc.select_k_unstable(order, k=max_files, sort_keys=keys).to_numpy()
        files = files.iloc[np.sort(keep)]
        fr = fr[fr["file"].isin(files["file"])]
    if len(fr) > max_files:  # the same bound on (rank, file) rows
        moved_fr = (fr["bytes_read"] + fr["bytes_written"]).to_numpy()
        top = np.lexsort((fr["file"].to_numpy(), fr["actor"].to_numpy(), -moved_fr))[:max_files]
        fr = fr.iloc[np.sort(top)]
    info["files_kept"] = len(files)
    info["file_rank_rows_kept"] = len(fr)
    return files, _file_ranks_table(rd, fr), info


def status_sections(
    meta: RunMeta,
    store: Path,
    status: tuple[str, bool, list[dict[str, Any]], list[str]],
    checks: list[dict[str, Any]],
) -> dict[str, Any]:
    """The summary's first keys: the run, its analysis status (:func:`status_of`) made
    partial by the completeness ``checks`` that failed, each also an issue."""
    state, incomplete, issues, limitations = status
    for c in checks:
        why = f": {c['why']}" if c["why"] else ""
        issues.append(asdict(Issue("trace", "trace-incomplete", c["message"] + why, "warning")))
    if checks and state == "complete":
        state, incomplete = "partial", True
    return {
        "schema": SCHEMA,
        "run_id": meta.run_id,
        "params": meta.params,
        "store": str(Path(store).resolve()),
        "tracer": meta.tracer,
        "status": meta.status,
        "analysis_status": state,
        "empty": state in ("empty", "untraced"),
        "incomplete": incomplete,
        "trace_complete": not incomplete and state == "complete",
        "completeness": checks,
        "issues": issues,
        "limitations": limitations,
    }


def coverage_issues(meta: RunMeta, actor_kind: str, ranks: pd.DataFrame) -> list[dict[str, Any]]:
    """Ranks the run should have that left no trace (``ranks``: the ranks table)."""
    out: list[dict[str, Any]] = []
    if meta.tracer == "none":
        return out
    expected = {r.rank for r in meta.ranks}
    if not expected and isinstance(meta.params.get("ranks"), int):
        expected = set(range(meta.params["ranks"]))
    if not expected or actor_kind != "rank":
        return out
    traced = {p.rank for p in meta.processes if p.rank >= 0}
    if not meta.processes:
        traced = set(
            ranks.loc[(ranks["reads"] + ranks["writes"] + ranks["opens"]) > 0, "rank"].tolist()
        )
    missing = sorted(expected - traced)
    already = {(i.source, i.kind) for i in meta.issues}
    for r in missing:
        if not any(k in ("missing-log", "failed-rank") and str(r) in src for src, k in already):
            out.append(
                asdict(
                    Issue(f"rank {r}", "missing-log", f"rank {r} of {len(expected)} left no trace")
                )
            )
    return out


def run_meta_summary(meta: RunMeta) -> dict[str, Any]:
    """What the report states about how the run was made (from the store's run.json)."""
    return {
        "clock_zero": meta.clock_zero,
        "command": list(meta.command),
        "ranks": [{"rank": r.rank, "host": r.host} for r in meta.ranks],
        "versions": dict(meta.versions),
        "manifest": meta.manifest,
    }


def volume_summary(ranks: pd.DataFrame) -> dict[str, Any]:
    """The ranks' volume and time: min, mean, median, max and sum over ranks."""

    def st(col: str) -> dict[str, float] | None:
        if ranks.empty:
            return None
        v = ranks[col].to_numpy(np.float64)
        return {
            "min": float(v.min()),
            "mean": float(v.mean()),
            "median": float(np.median(v)),
            "max": float(v.max()),
            "sum": float(v.sum()),
        }

    return {
        c: st(c)
        for c in (
            "bytes_read",
            "bytes_written",
            "reads",
            "writes",
            "io_time",
            "io_busy_time",
            "bandwidth",
            "io_share",
        )
    }


def imbalance_summary(ranks: pd.DataFrame) -> dict[str, Any]:
    """How unevenly the ranks move bytes and spend I/O time, and the stragglers."""

    if len(ranks) < 2:
        return {"bytes": None, "io_time": None, "stragglers": []}

    def spread(v: np.ndarray) -> float | None:
        mx = v.max()
        return float((mx - v.min()) / mx) if mx > 0 else None

    b = (ranks["bytes_read"] + ranks["bytes_written"]).to_numpy(np.float64)
    tm = ranks["io_time"].to_numpy(np.float64)
    return {
        "bytes": spread(b),
        "bytes_cv": float(b.std() / b.mean()) if b.mean() > 0 else None,
        "bytes_max": float(b.max()),
        "io_time": spread(tm),
        "io_time_max": float(tm.max()),
        "io_time_median": float(np.median(tm)),
        "stragglers": ranks.loc[ranks["straggler"], "rank"].astype(int).tolist(),
    }


def _headline(rd: RunData, sm: dict[str, Any], t, ranks: pd.DataFrame) -> dict[str, Any]:
    fr = t.file_rank
    n = max(rd.n_ranks, 1)
    h: dict[str, Any] = {
        "ranks": rd.n_ranks,
        "nodes": sm["ranks"]["nodes"],
        "run_time": rd.run_time,
        "files": len(t.files),
        "bytes_read": int(fr["bytes_read"].sum()),
        "bytes_written": int(fr["bytes_written"].sum()),
        "reads": int(fr["reads"].sum()),
        "writes": int(fr["writes"].sum()),
    }
    h["bytes_read_per_rank"] = h["bytes_read"] / n
    h["bytes_written_per_rank"] = h["bytes_written"] / n
    if len(ranks):
        h["bytes_read_per_rank_min"] = int(ranks["bytes_read"].min())
        h["bytes_read_per_rank_max"] = int(ranks["bytes_read"].max())
    for cname, c in sm["classes"].items():
        h[f"{cname}_bytes_read"] = c["bytes_read"]
        h[f"{cname}_bytes_written"] = c["bytes_written"]
        h[f"{cname}_bytes_read_per_rank"] = c["bytes_read"] / n
        h[f"{cname}_files"] = c["files"]
    io = ranks["io_time"].to_numpy() if len(ranks) else np.zeros(0)
    moved = h["bytes_read"] + h["bytes_written"]
    h["io_time_max"] = float(io.max()) if len(io) else 0.0
    h["io_time_mean"] = float(io.mean()) if len(io) else 0.0
    h["io_busy_time_total"] = float(ranks["io_busy_time"].sum()) if len(ranks) else 0.0
    h["io_share_max"] = float(ranks["io_share"].max()) if len(ranks) and rd.run_time > 0 else None
    h["bandwidth_aggregate"] = moved / h["io_time_max"] if h["io_time_max"] > 0 else None
    h["bandwidth_per_rank_mean"] = float(ranks["bandwidth"].mean()) if len(ranks) else None
    allr = sm["sizes"]["by_class"].get("all", {})
    h["small_read_share"] = allr.get("read", {}).get("small_share")
    h["small_write_share"] = allr.get("write", {}).get("small_share")
    h["read_size_median"] = allr.get("read", {}).get("median")
    sh = sm["spatial"]["share_by_category"]
    h["random_share"] = sh.get("random")
    h["contiguous_share"] = sh.get("contiguous")
    md = sm["metadata"]
    for k in ("opens", "stats", "seeks", "fsyncs"):
        h[k] = md["totals"][k]
    h["opens_per_rank"] = md["totals"]["opens"] / n
    h["metadata_ops"] = sum(md["totals"][k] for k in ("opens", "stats", "seeks", "fsyncs"))
    # What the busiest rank (or each writer) did itself: a total over N ranks hides a rank 0
    # that does fixed extra work (checkpoints, logs) behind a per-rank mean that shrinks with N.
    if len(ranks):
        writers = ranks[ranks["bytes_written"] > 0]
        h["opens_per_rank_max"] = int(ranks["opens"].max())
        h["ranks_writing"] = len(writers)
        h["bytes_written_per_writer"] = (
            float(writers["bytes_written"].mean()) if len(writers) else 0.0
        )
    h["meta_time"] = md["meta_time"]
    h["meta_time_share"] = md["meta_time_share"]
    h["imbalance_bytes"] = sm["imbalance"]["bytes"]
    h["imbalance_io_time"] = sm["imbalance"]["io_time"]
    h["stragglers"] = len(sm["imbalance"]["stragglers"])
    ck = sm["checkpoints"]
    h["checkpoints"] = ck.get("n_checkpoints")
    h["checkpoint_writers"] = ck.get("n_writers")
    h["checkpoint_duration_mean"] = ck.get("duration_mean")
    ov = sm["overlap"]
    h["exposed_io_time_max"] = ov.get("exposed_io_time_in_epochs_max")
    h["exposed_share_max"] = ov.get("exposed_share_of_epochs_max")
    h["phases"] = sm["temporal"]["phases"]["count"]
    h["trace_completeness"] = sm["trace"]["completeness"]
    h.update(_pipeline_headline(sm))
    return h


def _pipeline_headline(sm: dict[str, Any]) -> dict[str, Any]:
    """The input pipeline's figures as sweep-table columns (absent without step timestamps)."""
    p = sm["pipeline"]
    if not p.get("available"):
        return {}
    t = p["totals"]
    shapes = sm.get("file_shapes") or {}
    ds = sm["classes"].get("dataset") or {}
    epoch_s = t["epoch_time_per_rank"] or 0.0
    files_read = (ds.get("per_epoch") or {}).get("files_per_epoch") or []
    return {
        "au": t["au"],
        "compute_share": t["compute_share"],
        "wait_per_rank": t["wait_per_rank"],
        "samples_per_s": t["samples_per_s"],
        "read_bandwidth_per_rank": t["read_bandwidth_per_rank"],
        "files_per_s": (sum(files_read) / (epoch_s or np.nan)) if files_read and epoch_s else None,
        "dataset_files_read_per_epoch": (sum(files_read) / len(files_read)) if files_read else None,
        "verdict": p["verdict"]["kind"],
        "dataset_file_streams": shapes.get("streams"),
    }


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    table = df.reset_index(drop=True)
    atomic_write(
        path,
        lambda p: table.to_parquet(p, index=False, compression="zstd"),
        need=int(table.memory_usage(deep=True).sum()),  # uncompressed: an upper bound
    )
