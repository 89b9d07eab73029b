"""Sweep comparison: scaling figures, the trend table, tracer overhead, every metric per run."""

from __future__ import annotations

from typing import Any

import pandas as pd

from iosweep.analysis.summary import SweepPoint
from iosweep.report import fmt, plots
from iosweep.report.figures import NODES_CAPTION, SCALING_CAPTION
from iosweep.report.sections import Context
from iosweep.report.sections.overview import _int, series_name
from iosweep.report.tables import Column, Table, py, records_table


def section(ctx: Context) -> dict[str, Any]:
    df = ctx.sweep.table
    if df.empty or "ranks" not in df:
        return {"figures": [], "table": None, "trends": {}, "overhead": Table(OVERHEAD, [])}
    return {
        "figures": _figures(ctx, df),
        "table": metric_table(df),
        "trends": trend_table(ctx),
        "overhead": overhead_table(ctx),
    }


def _figures(ctx: Context, df: pd.DataFrame) -> list:
    ok = df[df["analysis_status"].isin(["complete", "partial"])] if "analysis_status" in df else df
    figures = []
    series_cols = [c for c in ("framework", "tracer") if c in ok and ok[c].nunique() > 1] or (
        ["framework"] if "framework" in ok else []
    )
    for extra in ("epochs", "steps", "batch_size"):
        if extra in ok and ok[extra].nunique() > 1:
            series_cols.append(extra)
    multi_nodes = "nodes" in ok and ok["nodes"].nunique() > 1
    if len(ok) and ok["ranks"].notna().any():
        fig = plots.scaling_figure(
            ok,
            "ranks",
            series_cols,
            "nodes" if multi_nodes else None,
            "How I/O changes with the number of ranks",
            ctx.anon,
        )
        figures.append(
            ctx.figs.add(
                fig, "sweep/scaling_ranks.png", "Scaling against ranks", SCALING_CAPTION, ctx.anon
            )
        )
    if multi_nodes and "ppn" in ok:
        fig = plots.scaling_figure(
            ok, "nodes", series_cols, "ppn", "How I/O changes with the number of nodes", ctx.anon
        )
        figures.append(
            ctx.figs.add(
                fig, "sweep/scaling_nodes.png", "Scaling against nodes", NODES_CAPTION, ctx.anon
            )
        )
    return figures


OVERHEAD = [
    Column("point", "point"),
    Column("tracer", "tracer"),
    Column("traced_run_time_mean", "traced", fmt.seconds, num=True),
    Column("baseline_run_time_mean", "untraced", fmt.seconds, num=True),
    Column("runs", "runs (traced / untraced)", num=True),
    Column("overhead", "overhead", fmt.share, num=True),
    Column("verdict", ""),
]


def overhead_table(ctx: Context) -> Table:
    """Traced run time against the untraced baseline (tracer: none) of the same point."""
    rows = []
    for o in ctx.sweep.overhead.points:
        rows.append(
            {
                **o.model_dump(),
                "point": ", ".join(
                    f"{k} {o.point[k]}"
                    for k in ("framework", "nodes", "ppn", "ranks")
                    if o.point.get(k) is not None
                ),
                "runs": f"{o.traced_runs} / {o.baseline_runs}",
                "verdict": "above threshold" if o.fired else "",
            }
        )
    return records_table(rows, OVERHEAD)


def point_name(p: SweepPoint | dict[str, Any]) -> str:
    """{ranks: 4, nodes: 1} -> "4r/1n" (nodes left out when unknown)."""
    ranks = py(p.ranks if isinstance(p, SweepPoint) else p.get("ranks"))
    nodes = py(p.nodes if isinstance(p, SweepPoint) else p.get("nodes"))
    name = f"{_int(ranks)}r" if ranks is not None else "?r"
    return name + (f"/{_int(nodes)}n" if nodes is not None else "")


def trend_table(ctx: Context) -> dict[str, Any]:
    """Rows: metrics; columns: series (framework, ...), each the means along its points."""
    series = ctx.sweep.scaling.series
    keys = [s.key for s in series]
    heads = [series_name(s.key, keys) for s in series]
    points = [", ".join(point_name(p) for p in s.points) for s in series]
    rows = []
    for p in plots.SCALING_PANELS:
        cells = []
        for sr in series:
            m = sr.metrics.get(p.metric)
            if not m:
                cells.append({"text": fmt.MISSING, "trend": "", "slope": ""})
                continue
            e = m.exponent
            cells.append(
                {
                    "text": " → ".join(fmt.metric(p.metric, v) for v in m.mean),
                    "trend": m.trend or "",
                    "slope": "" if e is None else f"{e:+.2f}",
                }
            )
        if any(c["text"] != fmt.MISSING for c in cells):
            rows.append({"metric": p.title, "cells": cells})
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
                f"rep{_int(py(row.get('rep')) or 0)}",
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
