"""Frameworks side by side: the frameworks' runs at the same number of ranks, in one figure
and one table."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.summary import Epoch
from iosweep.report import fmt, plots
from iosweep.report.data import RunView
from iosweep.report.figures import FRAMEWORKS_CAPTION
from iosweep.report.sections import Context
from iosweep.report.words import checkpoint_marks, checkpoint_sentence


def hosts(run: RunView) -> dict[int, str]:
    ranks = run.table("ranks")
    if ranks is not None and {"rank", "host"} <= set(ranks.columns):
        return {int(r): str(h) for r, h in zip(ranks["rank"], ranks["host"], strict=True)}
    return {r.rank: r.host for r in run.meta.ranks}


def strategies(run: RunView) -> dict[str, str]:
    """class -> "read shared-whole, write single-rank" for figure titles."""
    out = {}
    for cls, acc in run.summary.access.items():
        parts = [f"{d} {s}" for d, s in acc.items() if s]
        if parts:
            out[cls] = ", ".join(parts)
    return out


def epochs(run: RunView) -> pd.DataFrame | None:
    """The run's epoch windows, as the analysis placed them."""
    ep: list[Epoch] = run.summary.temporal.epochs
    if not ep:
        return None
    return pd.DataFrame([e.model_dump() for e in ep])[["epoch", "start", "end"]]


def marks(run: RunView) -> list[dict[str, Any]]:
    return [m.model_dump() for m in checkpoint_marks(run.summary)]


def main_class(sample: plots.OpsSample) -> int:
    """The class with the most operations other than checkpoints: the data being read."""
    counts = np.bincount(sample.cls, minlength=len(sample.class_names))
    order = sorted(
        range(len(counts)),
        key=lambda i: (sample.class_names[i] in ("checkpoint", "other"), -counts[i]),
    )
    return order[0]


def section(ctx: Context) -> dict[str, Any]:
    by_fw: dict[str, list[RunView]] = defaultdict(list)
    for r in ctx.runs:
        if r.has_io and r.framework:
            by_fw[r.framework].append(r)
    if len(by_fw) < 2:
        return {
            "frameworks": sorted(by_fw),
            "figure": None,
            "rows": [],
            "point": None,
            # a report of applications' logs only (MPI jobs) has no frameworks to speak of
            "shown": ctx.training,
        }
    common = set.intersection(*[{r.ranks for r in rs} for rs in by_fw.values()])
    ranks = max((x for x in common if x), default=None)
    chosen = []
    for _fw, rs in sorted(by_fw.items()):
        cand = [r for r in rs if r.ranks == ranks] if ranks else rs
        cand = cand or rs
        chosen.append(min(cand, key=lambda r: (-(r.ranks or 0), r.nodes or 0, r.rep)))
    return {
        "frameworks": sorted(by_fw),
        "figure": _figure(ctx, chosen),
        "rows": _rows(chosen),
        "heads": [r.label for r in chosen],
        "slugs": [r.slug for r in chosen],
        "shown": True,
    }


def _figure(ctx: Context, chosen: list[RunView]):
    items: list[dict[str, Any]] = []
    for r in chosen:
        s = ctx.sample(r)
        if s is None:
            continue
        ci = main_class(s)
        items.append(
            {
                "label": r.label,
                "sample": s,
                "cls": ci,
                "hosts": hosts(r),
                "strategy": strategies(r).get(s.class_names[ci], ""),
                "epochs": epochs(r),
                "checkpoints": marks(r),
            }
        )
    if len(items) < 2:
        return None
    note = " ".join(it["sample"].note() for it in items if it["sample"].sampled)
    fig = plots.frameworks_figure(
        items, "Frameworks side by side: who reads which file, and when", ctx.anon
    )
    return ctx.figs.add(
        fig,
        "frameworks/frameworks.png",
        "Frameworks side by side",
        FRAMEWORKS_CAPTION + (" " + note if note else ""),
        ctx.anon,
    )


def _strategy_cells(r: RunView, d: str) -> str:
    acc = r.summary.access
    return "; ".join(f"{c}: {a.get(d)}" for c, a in acc.items() if a.get(d)) or fmt.MISSING


def _read_evidence(r: RunView, key: str) -> str:
    vals = []
    for c, v in r.summary.classes.items():
        a = v.access.get("read")
        spread = getattr(a.evidence, key) if a else None
        if spread is not None:
            vals.append(f"{c}: {spread.max:.0f}")
    return "; ".join(vals) or fmt.MISSING


def _rows(runs: list[RunView]) -> list[dict[str, Any]]:
    def h(r: RunView, k: str) -> Any:
        return r.summary.headline.get(k)

    spec = [
        ("read strategy per class", lambda r: _strategy_cells(r, "read")),
        ("write strategy per class", lambda r: _strategy_cells(r, "write")),
        ("files read per rank (max)", lambda r: _read_evidence(r, "files_per_rank")),
        ("ranks reading each file (max)", lambda r: _read_evidence(r, "ranks_per_file")),
        ("files traced", lambda r: fmt.number(h(r, "files"))),
        ("bytes read per rank", lambda r: fmt.human_bytes(h(r, "bytes_read_per_rank"))),
        ("read requests", lambda r: fmt.number(h(r, "reads"))),
        ("median read size", lambda r: fmt.human_bytes(h(r, "read_size_median"))),
        ("small read share (< 1 MiB)", lambda r: fmt.share(h(r, "small_read_share"))),
        ("opens per rank", lambda r: fmt.number(h(r, "opens_per_rank"))),
        ("checkpoints", lambda r: checkpoint_sentence(r.summary) or fmt.MISSING),
        ("I/O time, slowest rank", lambda r: fmt.seconds(h(r, "io_time_max"))),
        ("run time", lambda r: fmt.seconds(h(r, "run_time"))),
    ]
    return [{"name": n, "cells": [f(r) for r in runs]} for n, f in spec]
