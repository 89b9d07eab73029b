"""Sweep comparison: scaling figures, the trend table, tracer overhead, every metric per run."""

from __future__ import annotations

from typing import Any

import pandas as pd

from iosweep.analysis.summary import SweepPoint
from iosweep.report import fmt, plots
from iosweep.report.figures import NODES_CAPTION, SCALING_CAPTION
from iosweep.report.sections import Context
from iosweep.report.sections.overview import series_name, whole_int
from iosweep.report.tables import Column, Table, py, records_table
from iosweep.report.words import lever_series_text

# sweep metrics of training runs only: an application's logs (an MPI job's) have none
TRAINING_METRICS = frozenset(
    {
        "au",
        "samples_per_s",
        "wait_per_rank",
        "read_bandwidth_per_rank",
        "checkpoints",
        "checkpoint_writers",
        "checkpoint_duration_mean",
        "exposed_io_time_max",
        "exposed_share_max",
    }
)


def section(ctx: Context) -> dict[str, Any]:
    df = ctx.sweep.table
    if not ctx.training:
        df = df.drop(columns=[c for c in df.columns if c in TRAINING_METRICS])
    empty: dict[str, Any] = {
        "figures": [],
        "omitted": [],
        "table": None,
        "trends": {},
        "overhead": Table(OVERHEAD, []),
    }
    empty["training"] = ctx.training
    if df.empty or "ranks" not in df:
        return {**empty, "pipeline": pipeline_section(ctx)}
    figures, omitted = _figures(ctx, df)
    return {
        "pipeline": pipeline_section(ctx),
        "figures": figures,
        "omitted": omitted,
        "table": metric_table(df),
        "trends": trend_table(ctx),
        "overhead": overhead_table(ctx),
        "training": empty["training"],
    }


SCALE = [
    Column("ranks", "ranks", num=True),
    Column("nodes", "nodes", num=True),
    Column("au", "AU", fmt.share, num=True),
    Column("samples_per_s", "samples/s", fmt.number, num=True),
    Column(
        "bw_rank",
        "read bandwidth demanded per rank",
        lambda v: fmt.metric("bandwidth", v),
        num=True,
    ),
    Column("bw_node", "per node", lambda v: fmt.metric("bandwidth", v), num=True),
]


REPLAYS = [
    Column("run", "replay of run"),
    Column("calibrated", "calibrated", lambda v: {True: "yes", False: "no"}.get(v, "")),
    Column("ranks_of_run", "ranks: run", num=True),
    Column("ranks", "replay", num=True),
    Column("au_of_run", "AU: run", fmt.share, num=True),
    Column("au", "replay", fmt.share, num=True),
    Column("sps_of_run", "samples/s: run", fmt.number, num=True),
    Column("sps", "replay", fmt.number, num=True),
    Column("verdict_of_run", "verdict: run"),
    Column("verdict", "replay"),
]


def replay_table(ctx: Context) -> Table | None:
    """Each DLIO replay among the runs beside the run it replays (docs/replay.md)."""
    rows = []
    for r in ctx.runs:
        p = r.summary.pipeline
        rp = p.dlio.replay if p.dlio else None
        if rp is None:
            continue
        t = p.totals
        rows.append(
            {
                "run": ctx.anon(rp.of_run),
                "calibrated": rp.calibrated,
                "ranks_of_run": rp.ranks_of_run,
                "ranks": t.ranks if t else None,
                "au_of_run": rp.au_of_run,
                "au": t.au if t else None,
                "sps_of_run": rp.samples_per_s_of_run,
                "sps": t.samples_per_s if t else None,
                "verdict_of_run": rp.verdict_of_run or "",
                "verdict": p.verdict.kind if p.verdict else "",
            }
        )
    rows.sort(key=lambda x: (x["run"], x["ranks"] or 0))
    return records_table(rows, REPLAYS) if rows else None


def pipeline_section(ctx: Context) -> dict[str, Any]:
    """The input pipeline across the sweep: what the levers did, how far it scales fed."""
    pa = ctx.sweep.pipeline
    keys = [s.key for s in pa.scale]
    scale = []
    for s in pa.scale:
        if len(s.ranks) < 2:
            continue
        rows = [
            {"ranks": r, "nodes": n, "au": a, "samples_per_s": x, "bw_rank": b, "bw_node": bn}
            for r, n, a, x, b, bn in zip(
                s.ranks,
                s.nodes,
                s.au,
                s.samples_per_s,
                s.read_bandwidth_per_rank,
                s.read_bandwidth_per_node,
                strict=True,
            )
        ]
        fed = s.largest_fed
        scale.append(
            {
                "name": series_name(s.key, keys),
                "table": records_table(rows, SCALE),
                "fed": f"the largest point at or above {pa.au_threshold:.0%} AU: {fed.ranks} ranks on {fed.nodes} node(s)"
                if fed
                else f"no point reaches {pa.au_threshold:.0%} AU",
            }
        )
    figure = None
    if pa.levers:
        fig = plots.levers_figure(pa.levers, "What the input pipeline's levers did", ctx.anon)
        figure = ctx.figs.add(
            fig, "sweep/levers.png", "Levers of the input pipeline", LEVERS_CAPTION, ctx.anon
        )
    return {
        "levers": [lever_series_text(s) for s in pa.levers],
        "figure": figure,
        "scale": scale,
        "projection": pa.projection.text if pa.projection else "",
        "replays": replay_table(ctx),
    }


LEVERS_CAPTION = (
    "One panel per series of runs that differ only in one lever: accelerator utilisation "
    "(MLPerf-Storage-style, solid, left axis) and samples per second over all ranks (dashed, right "
    "axis) at each value of the lever."
)


def _figures(ctx: Context, df: pd.DataFrame) -> tuple[list, list[str]]:
    ok = (
        df[df["analysis_status"].isin(["complete", "partial", "untraced"])]
        if "analysis_status" in df
        else df
    )
    catalogue = [
        m for m in ctx.sweep.scaling.catalogue if ctx.training or m.name not in TRAINING_METRICS
    ]
    panels, left = plots.drawable(ok, plots.panels_from(catalogue))
    figures = []
    series_cols = [c for c in ("framework", "tracer") if c in ok and ok[c].nunique() > 1] or (
        ["framework"] if "framework" in ok else []
    )
    for extra in ("workload", "loader_workers", "staging", "epochs", "steps", "batch_size"):
        if extra in ok and ok[extra].nunique() > 1:
            series_cols.append(extra)
    multi_nodes = "nodes" in ok and ok["nodes"].nunique() > 1
    if len(ok) and ok["ranks"].notna().any() and panels:
        fig = plots.scaling_figure(
            ok,
            "ranks",
            series_cols,
            "nodes" if multi_nodes else None,
            "How I/O changes with the number of ranks",
            ctx.anon,
            panels,
        )
        figures.append(
            ctx.figs.add(
                fig, "sweep/scaling_ranks.png", "Scaling against ranks", SCALING_CAPTION, ctx.anon
            )
        )
    if multi_nodes and "ppn" in ok and panels:
        fig = plots.scaling_figure(
            ok,
            "nodes",
            series_cols,
            "ppn",
            "How I/O changes with the number of nodes",
            ctx.anon,
            panels,
        )
        figures.append(
            ctx.figs.add(
                fig, "sweep/scaling_nodes.png", "Scaling against nodes", NODES_CAPTION, ctx.anon
            )
        )
    return figures, [p.title for p in left]


OVERHEAD = [
    Column("point", "point"),
    Column("tracer", "tracer"),
    Column("traced_run_time_mean", "traced", fmt.seconds, num=True),
    Column("baseline_run_time_mean", "untraced", fmt.seconds, num=True),
    Column("runs", "runs (traced / untraced)", num=True),
    Column("overhead", "overhead", fmt.share, num=True),
    Column("verdict", "verdict"),
]


def overhead_table(ctx: Context) -> Table:
    """Traced run time against the untraced baseline (tracer: none) of the same point."""
    rows = []
    for o in ctx.sweep.overhead.points:
        rows.append(
            {
                **o.model_dump(),
                "point": ", ".join(f"{k} {v}" for k, v in o.point.items() if v is not None),
                "runs": f"{o.traced_runs} / {o.baseline_runs}",
                "verdict": o.verdict,
            }
        )
    return records_table(rows, OVERHEAD)


def point_name(p: SweepPoint | dict[str, Any]) -> str:
    """{ranks: 4, nodes: 1} -> "4r/1n" (nodes left out when unknown)."""
    ranks = py(p.ranks if isinstance(p, SweepPoint) else p.get("ranks"))
    nodes = py(p.nodes if isinstance(p, SweepPoint) else p.get("nodes"))
    name = f"{whole_int(ranks)}r" if ranks is not None else "?r"
    return name + (f"/{whole_int(nodes)}n" if nodes is not None else "")


def trend_table(ctx: Context) -> dict[str, Any]:
    """Rows: metrics; columns: series (framework, ...), each the means along its points, the
    trend where one could be fitted (and how it compares with the ideal), else why not."""
    series = ctx.sweep.scaling.series
    keys = [s.key for s in series]
    heads = [series_name(s.key, keys) for s in series]
    points = [", ".join(point_name(p) for p in s.points) for s in series]
    rows = []
    for spec in ctx.sweep.scaling.catalogue:
        cells = []
        for sr in series:
            m = sr.metrics.get(spec.name)
            if not m:
                cells.append({"text": fmt.MISSING, "trend": "", "note": ""})
                continue
            e = m.exponent
            word = m.trend if m.trend != "noisy" else ""
            judged = f" ({m.judgement})" if m.judgement else ""
            cells.append(
                {
                    "text": " → ".join(
                        fmt.with_unit(v, spec.unit if spec.unit != "samples/s" else "count")
                        for v in m.mean
                    ),
                    "trend": (word + judged + ("" if e is None else f", slope {e:+.2f}"))
                    if word
                    else "",
                    "note": m.note,
                }
            )
        if any(c["text"] != fmt.MISSING for c in cells):
            rows.append({"metric": spec.title, "cells": cells})
    return {"heads": heads, "points": points, "rows": rows} if rows else {}


def metric_table(df: pd.DataFrame) -> dict[str, Any]:
    """Every metric (rows) for every run (columns), in sweep order."""
    df = df.copy()
    sort = [c for c in ("framework", "tracer", "ranks", "nodes", "rep") if c in df]
    if sort:
        df = df.sort_values(sort, kind="stable")
    heads = [
        " ".join(
            x
            for x in (
                str(py(row.get("framework")) or ""),
                point_name({"ranks": row.get("ranks"), "nodes": row.get("nodes")}),
                f"rep{whole_int(py(row.get('rep')) or 0)}",
            )
            if x
        )
        for _, row in df.iterrows()
    ]
    skip = {"run_id", "summary_path", "framework", "ranks", "nodes", "rep"}
    rows = [
        {"metric": c, "cells": [fmt.metric(c, py(v)) for v in df[c]]}
        for c in df.columns
        if c not in skip
    ]
    return {
        "heads": heads,
        "rows": rows,
        "run_ids": df["run_id"].astype(str).tolist() if "run_id" in df else [],
    }
