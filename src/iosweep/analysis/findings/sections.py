"""The summary's sections made from a run's tables, metadata and other sections, not from
its operations: the same for a run analysed whole (:mod:`.run`) or in parts
(:mod:`iosweep.analysis.parts`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.analysis.patterns.file_ranks import FileRankFacts, busiest_files
from iosweep.analysis.patterns.files import RunFiles
from iosweep.analysis.patterns.volume import Tables, widen, with_shares
from iosweep.analysis.shared import SharedRecords
from iosweep.analysis.summary import SCHEMA
from iosweep.trace.schema import Issue, RunMeta


def status_of(
    meta: RunMeta,
    store: str,
    issues: list[dict[str, Any]],
    traced: bool,
    dxt_available: bool,
    counted: bool,
    shared: SharedRecords,
    limitations: list[str],
    left_out: list[str],
) -> tuple[str, bool, list[dict[str, Any]], list[str]]:
    """(analysis status, incomplete, issues, limitations) of a run's trace from what was
    found reading it (``issues`` beside the store's own, ``limitations`` of what was read),
    whether it holds I/O (``traced``), DXT segments and counter records (``counted``), and
    the paths left out of the analysis that the trace saw I/O on (``left_out``)."""
    issues = [asdict(i) for i in meta.issues] + issues
    incomplete = bool(meta.incomplete) or any(i["severity"] == "error" for i in issues)
    if meta.tracer == "none" and not traced:
        status = "untraced"
    elif not traced and left_out:  # (a log of terminal output: whole, nothing to analyse)
        status = "empty"
        issues.append(
            asdict(
                Issue(
                    store,
                    "empty",
                    "no I/O on the analysed paths: the trace's I/O is all on paths left out "
                    f"({', '.join(left_out)})",
                    "warning",
                )
            )
        )
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
    n_ranks: int,
    kind: str,
    actor_host: dict[int, str],
    ranks: pd.DataFrame,
    unknown: list[int],
) -> dict[str, Any]:
    """The run's ranks (or processes, ``kind``), their hosts and how many did I/O; the nodes
    unknown (None, never 0) where a rank's host is (logs without host names: an MPI job's
    counters, a log with no records); ``unknown``: the ranks whose figures are not known
    (no trace, or counters that held impossible values)."""
    hosts = sorted({h for h in actor_host.values() if h})
    known = bool(actor_host) and all(actor_host.values())
    return {
        "count": n_ranks,
        "kind": kind,
        "with_io": int((ranks[["reads", "writes"]].sum(axis=1) > 0).sum()) if len(ranks) else 0,
        "nodes": len(hosts) if known else None,
        "hosts": hosts,
        "per_node": {h: sum(1 for v in actor_host.values() if v == h) for h in hosts},
        "unknown": unknown,
    }


def _file_ranks_table(run: RunFiles, file_rank: pd.DataFrame) -> pd.DataFrame:
    fr = with_shares(widen(file_rank)).rename(columns={"actor": "rank"})
    fr.insert(2, "path", np.asarray(run.paths, dtype=object)[fr["file"].to_numpy()])
    fr["class"] = np.asarray(run.class_names, dtype=object)[fr["class"].to_numpy()]
    fr.insert(1, "host", fr["rank"].map(run.actor_host).fillna("").to_numpy(object))
    return fr


def file_tables(
    files: pd.DataFrame, facts: FileRankFacts, run: RunFiles, max_files: int
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The files and (rank, file) tables as written: cut to the ``max_files`` files that moved
    the most bytes (ties by path) and at most ``max_files`` of their (rank, file) rows (most
    bytes first), so that they stay bounded at a million files; and what they stand for,
    counted over every file (the report states it without reading the tables)."""
    moved = files["bytes_read"] + files["bytes_written"]
    info = {
        "files": len(files),
        "zero_byte_files": int((moved == 0).sum()),
        "file_rank_rows": facts.rows,
        "counter_only_ops": facts.counter_only_ops,
        "max_files": max_files,
    }
    files = busiest_files(files, max_files)
    fr = facts.busiest  # the rows of each part's busiest files: the run's are among them
    fr = fr[fr["file"].isin(files["file"])]
    if len(fr) > max_files:  # the same bound on (rank, file) rows
        moved_fr = (fr["bytes_read"] + fr["bytes_written"]).to_numpy()
        # ties by rank, then path (not by path code: codes depend on how rows were read)
        by_path = np.empty(len(run.paths), np.int64)
        by_path[pc.sort_indices(pa.array(run.paths, pa.string())).to_numpy()] = np.arange(
            len(run.paths)
        )
        path_rank = by_path[fr["file"].to_numpy()]
        top = np.lexsort((path_rank, fr["actor"].to_numpy(), -moved_fr))[:max_files]
        fr = fr.iloc[np.sort(top)]
    info["files_kept"] = len(files)
    info["file_rank_rows_kept"] = len(fr)
    return files, _file_ranks_table(run, fr), info


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
    # a figure measured another way keeps the run complete for its question; the check stays
    missing = [c for c in checks if not c.get("measured_by")]
    if missing and state == "complete":
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


# what a job that starts its own ranks should do instead (README: "Ranks the job starts itself")
LAUNCH_HINT = (
    "to have the launcher start every rank, run it with `launch: torchrun` and its ranks per "
    "node as `procs_per_node` (Lightning and accelerate then start no process of their own; "
    "a script calling mp.spawn must leave the processes to torchrun)"
)


def self_started_issues(meta: RunMeta) -> list[dict[str, Any]]:
    """Ranks the job started itself (the manifest's ``self_started``): found and counted, or
    in its process group and never seen."""
    own = (meta.manifest or {}).get("self_started") or {}
    out: list[dict[str, Any]] = []
    if own.get("ranks"):
        names = ", ".join(f"rank {r}" for r in own["ranks"])
        out.append(
            asdict(
                Issue(
                    names,
                    "self-started-rank",
                    (
                        f"the job started {len(own['ranks'])} rank(s) itself ({names}) beside the "
                        f"{own.get('launched')} its launcher started: found when they joined its process "
                        f"group, they are traced and counted as ranks; {LAUNCH_HINT}"
                    ),
                    "warning",
                )
            )
        )
    if own.get("unseen"):
        out.append(
            asdict(
                Issue(
                    "process group",
                    "self-started-rank",
                    (
                        f"the job's process group has {own.get('world_size')} ranks, but ranks "
                        f"{own['unseen']} were never seen (another host, or a process without iosweep's "
                        f"hooks): they are missing from the analysis; {LAUNCH_HINT}"
                    ),
                    "warning",
                )
            )
        )
    return out


def untraced_ranks(meta: RunMeta, actor_kind: str, ranks: pd.DataFrame) -> list[int]:
    """Ranks the run should have that left no trace (``ranks``: the ranks table): their
    figures are not known (never 0)."""
    expected = {r.rank for r in meta.ranks}
    if not expected and isinstance(meta.params.get("ranks"), int):
        expected = set(range(meta.params["ranks"]))
    if meta.tracer == "none" or not expected or actor_kind != "rank":
        return []
    traced = {p.rank for p in meta.processes if p.rank >= 0}
    if not meta.processes:
        traced = set(
            ranks.loc[(ranks["reads"] + ranks["writes"] + ranks["opens"]) > 0, "rank"].tolist()
        )
    return sorted(expected - traced)


def coverage_issues(meta: RunMeta, actor_kind: str, ranks: pd.DataFrame) -> list[dict[str, Any]]:
    """Ranks the run should have that left no trace (``ranks``: the ranks table), and ranks
    the job started itself."""
    out: list[dict[str, Any]] = self_started_issues(meta)
    missing = untraced_ranks(meta, actor_kind, ranks)
    expected_n = len(meta.ranks) or meta.params.get("ranks")
    already = {(i.source, i.kind) for i in meta.issues}
    for r in missing:
        if not any(k in ("missing-log", "failed-rank") and str(r) in src for src, k in already):
            out.append(
                asdict(Issue(f"rank {r}", "missing-log", f"rank {r} of {expected_n} left no trace"))
            )
    return out


def run_meta_summary(meta: RunMeta) -> dict[str, Any]:
    """What the report states about how the run was made (from the store's run.json). The
    manifest's step records stay in the store (its steps table): a record a rank and step
    (101 k, 16 MB at 100 M segments) copied into summary.json cost every reader of it."""
    return {
        "clock_zero": meta.clock_zero,
        "command": list(meta.command),
        "ranks": [{"rank": r.rank, "host": r.host} for r in meta.ranks],
        "versions": dict(meta.versions),
        "manifest": {k: v for k, v in (meta.manifest or {}).items() if k != "steps"},
    }


def volume_summary(ranks: pd.DataFrame) -> dict[str, Any]:
    """The ranks' volume and time: min, mean, median, max and sum over ranks."""

    def st(col: str) -> dict[str, float] | None:
        v = ranks[col].to_numpy(np.float64) if not ranks.empty else np.zeros(0)
        if not len(v) or np.isnan(v).any():  # (a share of a run of unknown length)
            return None
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


def headline(
    n_ranks: int, run_time: float | None, sm: Mapping[str, Any], t: Tables, facts: FileRankFacts
) -> dict[str, Any]:
    """The run's figures at a glance (the sweep table's columns), from the summary ``sm``,
    the tables and what the (rank, file) rows give; ``run_time`` None: not known."""
    ranks = t.ranks
    n = max(n_ranks, 1)
    h: dict[str, Any] = {
        "ranks": n_ranks,
        "nodes": sm["ranks"]["nodes"],
        "run_time": run_time,
        "files": len(t.files),
        **{k: facts.totals[k] for k in ("bytes_read", "bytes_written", "reads", "writes")},
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
    # a rank's share over 1 is no share (finish_ranks: NaN), and then neither is the max
    share = float(ranks["io_share"].max(skipna=False)) if len(ranks) and run_time else None
    h["io_share_max"] = share if share is not None and share <= 1 else None
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


def _pipeline_headline(sm: Mapping[str, Any]) -> dict[str, Any]:
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
