"""Across the sweep: the scaling panels the analysis declared, what each lever did, and the
frameworks side by side."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FuncFormatter,
    PercentFormatter,
)

from iosweep.report.fmt import human_bytes
from iosweep.report.plots.base import (
    NODE_STYLES,
    Anon,
    bytes_axis,
    new_figure,
    series_color,
    size_legend,
    size_norm,
    with_rc,
)
from iosweep.report.plots.ops import draw_spatial, draw_temporal


@dataclass
class Panel:
    title: str
    metric: str
    kind: str  # bytes | seconds | share | count | rate
    alt: list[str] = field(default_factory=list)  # columns to sum if ``metric`` is absent


KIND_OF_UNIT = {
    "bytes": "bytes",
    "bytes/s": "rate",
    "s": "seconds",
    "share": "share",
    "count": "count",
    "samples/s": "count",
}


def panels_from(catalogue: list[Any]) -> list[Panel]:
    """The scaling panels the analysis declared (iosweep.analysis.findings.sweep.SCALING_METRICS)."""
    return [Panel(m.title, m.name, KIND_OF_UNIT.get(m.unit, "count")) for m in catalogue]


def drawable(df: pd.DataFrame, panels: list[Panel]) -> tuple[list[Panel], list[Panel]]:
    """(panels with values to draw, panels left out: no value, or zero everywhere)."""
    keep: list[Panel] = []
    left: list[Panel] = []
    for p in panels:
        v = panel_values(df, p)
        (keep if v is not None and v.notna().any() and (v.fillna(0) != 0).any() else left).append(p)
    return keep, left


def panel_values(df: pd.DataFrame, p: Panel) -> pd.Series | None:
    if p.metric in df:
        return pd.to_numeric(df[p.metric], errors="coerce")
    if p.alt and any(c in df for c in p.alt):
        return sum(pd.to_numeric(df[c], errors="coerce").fillna(0) for c in p.alt if c in df)
    return None


def _fmt_axis(ax, kind: str) -> None:
    if kind == "bytes":
        bytes_axis(ax.yaxis)
    elif kind == "rate":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: human_bytes(v) + "/s"))
    elif kind == "share":
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    elif kind == "seconds":
        ax.set_ylabel("s")


@with_rc
def scaling_figure(
    df: pd.DataFrame,
    x: str,
    series_cols: list[str],
    line_col: str | None,
    title: str,
    anon: Anon,
    panels: list[Panel],
) -> Figure:
    """One panel per metric against ``x``; colour per series (framework), line style per
    ``line_col`` (nodes when x is ranks); markers at the mean over repeats, bars min to max."""
    ncol = 4
    nrow = max(1, -(-len(panels) // ncol))
    fig = new_figure(15, 2.9 * nrow + 0.9)
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    xs_all = sorted({int(v) for v in df[x].dropna()})
    groups = list(df.groupby(series_cols, sort=True, dropna=False)) if series_cols else [((), df)]
    line_vals = sorted({v for v in df[line_col].dropna()}) if line_col else [None]
    handles = []
    for ax, p in zip(axes, panels, strict=False):
        vals_all = panel_values(df, p)
        if vals_all is None:  # not reached: panels holds only metrics with values
            continue
        for gi, (key, g) in enumerate(groups):
            name = " ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))
            color = series_color(name, gi)
            for li, lv in enumerate(line_vals):
                gg = g if lv is None else g[g[line_col] == lv]
                if gg.empty:
                    continue
                v = vals_all.loc[gg.index]
                st = v.groupby(gg[x]).agg(["mean", "min", "max", "count"]).dropna(subset=["mean"])
                if st.empty:
                    continue
                marker, ls = NODE_STYLES[li % len(NODE_STYLES)]
                xv = st.index.to_numpy(float)
                ax.plot(xv, st["mean"], marker=marker, ls=ls, color=color, ms=5, lw=1.5)
                if (st["count"] > 1).any():
                    ax.vlines(xv, st["min"], st["max"], color=color, lw=1.0, alpha=0.6)
                if p is panels[0]:
                    unit = {"nodes": "node", "ppn": "per node"}.get(line_col or "", line_col)
                    plural = "s" if unit == "node" and lv != 1 else ""
                    lab = name + (
                        f", {lv} {unit}{plural}" if lv is not None and len(line_vals) > 1 else ""
                    )
                    handles.append(
                        Line2D([], [], color=color, marker=marker, ls=ls, label=anon(lab))
                    )
        ax.set_title(p.title)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs_all, [str(v) for v in xs_all])
        ax.minorticks_off()
        ax.set_xlabel(x)
        _fmt_axis(ax, p.kind)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.25)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    if handles:
        fig.legend(
            handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=9
        )
    fig.suptitle(anon(title), fontsize=12)
    return fig


@with_rc
def levers_figure(series: list[Any], title: str, anon: Anon) -> Figure:
    """One panel per lever series: AU (left axis) and samples/s (right axis) at each of the
    lever's values."""
    n = len(series)
    ncol = min(n, 3)
    nrow = -(-n // ncol)
    fig = new_figure(5.2 * ncol, 3.4 * nrow + 0.6)
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    for ax, s in zip(axes, series, strict=False):
        xs = np.arange(len(s.values))
        au = np.array([np.nan if v is None else v for v in s.au], float)
        sps = np.array([np.nan if v is None else v for v in s.samples_per_s], float)
        ax.plot(xs, au, marker="o", color="#4575b4", label="AU")
        ax.set_ylim(0, 1.05)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylabel("AU", color="#4575b4")
        ax2 = ax.twinx()
        ax2.plot(xs, sps, marker="s", ls="--", color="#d73027", label="samples/s")
        ax2.set_ylim(bottom=0)
        ax2.set_ylabel("samples/s", color="#d73027")
        ax.set_xticks(xs, [str(v) for v in s.values])
        ax.set_xlabel(s.lever.replace("_", " "))
        key = ", ".join(
            f"{k} {v}"
            for k, v in s.key.items()
            if k in ("framework", "tracer", "workload", "ranks")
        )
        ax.set_title(anon(key), fontsize=9)
        ax.grid(alpha=0.25)
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(anon(title), fontsize=12)
    return fig


@with_rc
def frameworks_figure(items: list[dict[str, Any]], title: str, anon: Anon) -> Figure:
    """Columns: frameworks at one sweep point; rows: spatial plot of the main data class,
    temporal plot. Each item: {label, sample, cls, hosts, strategy, epochs, checkpoints}."""
    n = len(items)
    fig = new_figure(6.2 * n + 1, 8)
    axes = fig.subplots(2, n, squeeze=False, height_ratios=[1.1, 1])
    norm = size_norm(np.concatenate([it["sample"].length for it in items]))
    for j, it in enumerate(items):
        s = it["sample"]
        info = draw_spatial(axes[0, j], s, it["cls"], norm, it["hosts"], anon)
        axes[0, j].set_title(
            anon(
                f"{it['label']}\n{s.class_names[it['cls']]}: {info['files']} files, {it['strategy']}"
            )
        )
        draw_temporal(
            axes[1, j], s, norm, it["hosts"], anon, it.get("epochs"), it.get("checkpoints")
        )
    size_legend(fig, np.concatenate([it["sample"].length for it in items]))
    fig.suptitle(anon(title), fontsize=12)
    return fig
