"""A run's summary figures: its time account, request sizes, nodes, I/O against compute
(from its summary and tables)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import (
    FuncFormatter,
    LogLocator,
    NullFormatter,
)

from iosweep.report.fmt import human_bytes
from iosweep.report.plots.base import (
    OTHER_COLORS,
    Anon,
    bytes_axis,
    bytes_fmt,
    count_log_axis,
    new_figure,
    with_rc,
)


@with_rc
def sizes_figure(sizes: pd.DataFrame, title: str, anon: Anon) -> Figure | None:
    """Request-size histogram (log2 bins, all files) and CDF per file class and direction."""
    if sizes is None or sizes.empty or "binning" not in sizes:
        return None
    lg = sizes[sizes["binning"] == "log2"]
    if lg.empty:
        return None
    fig = new_figure(12, 3.8)
    ax_h, ax_c = fig.subplots(1, 2)
    allc = lg[lg["class"] == "all"] if (lg["class"] == "all").any() else lg
    width = 0.4
    for k, (op, color) in enumerate((("read", "#3b528b"), ("write", "#b2182b"))):
        d = allc[allc["op"] == op].groupby("bin")["count"].sum()
        if d.empty:
            continue
        sized = d[d.index > 0]
        ax_h.bar(
            sized.index.to_numpy() + (k - 0.5) * width,
            sized.to_numpy(),
            width=width,
            color=color,
            label=f"{op}s",
        )
        if 0 in d.index:  # zero-byte reads at end of file: counted apart, not a size
            ax_h.bar(
                [(k - 0.5) * width],
                [d.loc[0]],
                width=width,
                color="#d9d9d9",
                edgecolor=color,
                hatch="//",
                label=f"0-byte {op}s (end of file)",
            )
    bins = sorted(allc["bin"].unique())
    ax_h.set_xticks(
        bins, [human_bytes(0 if b == 0 else 2 ** (b - 1)) for b in bins], rotation=45, ha="right"
    )
    ax_h.set_yscale("log")
    ax_h.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=12))
    count_log_axis(ax_h.yaxis)
    ax_h.set_xlabel("request size (at least)")
    ax_h.set_ylabel("requests")
    ax_h.set_title("Request sizes, all files")
    ax_h.legend(fontsize=8, loc="upper right")
    per = lg[lg["class"] != "all"] if (lg["class"] != "all").any() else lg
    styles = {"read": "-", "write": "--"}
    for i, ((cls, op), g) in enumerate(per.groupby(["class", "op"], sort=True)):
        g = g[g["bin"] > 0].sort_values("bin")  # sizes only: zero-byte reads are no size
        if g.empty:
            continue
        x = np.concatenate([[g["bin_lower"].iloc[0]], g["bin_upper"].to_numpy()]).astype(float)
        y = np.concatenate([[0.0], g["count"].cumsum().to_numpy() / g["count"].sum()])
        ax_c.step(
            np.maximum(x, 1),
            y,
            where="post",
            ls=styles.get(op, "-"),
            color=OTHER_COLORS[i % len(OTHER_COLORS)],
            label=anon(f"{cls} {op}s ({int(g['count'].sum()):,})"),
        )
    ax_c.set_xscale("log", base=2)
    ax_c.xaxis.set_major_locator(LogLocator(base=16))
    ax_c.xaxis.set_major_formatter(FuncFormatter(bytes_fmt))
    ax_c.xaxis.set_minor_formatter(NullFormatter())
    ax_c.set_ylim(0, 1.02)
    ax_c.set_xlabel("request size (log2 bins, upper bound)")
    ax_c.set_ylabel("fraction of sized requests")
    ax_c.set_title("CDF per file class and direction")
    ax_c.legend(fontsize=7, loc="lower right")
    fig.suptitle(anon(title), fontsize=11)
    return fig


@with_rc
def nodes_figure(nodes: pd.DataFrame, title: str, anon: Anon) -> Figure | None:
    if nodes is None or len(nodes) < 2 or "host" not in nodes:
        return None
    fig = new_figure(10, 3.2)
    ax_b, ax_t = fig.subplots(1, 2)
    hosts = [anon(str(h)) for h in nodes["host"]]
    x = np.arange(len(hosts))
    for k, (col, color) in enumerate((("bytes_read", "#3b528b"), ("bytes_written", "#b2182b"))):
        if col in nodes:
            ax_b.bar(
                x + (k - 0.5) * 0.4,
                nodes[col].to_numpy(float),
                width=0.4,
                color=color,
                label=col.replace("_", " "),
            )
    ax_b.set_xticks(x, hosts)
    bytes_axis(ax_b.yaxis)
    ax_b.set_title("Bytes per node")
    ax_b.legend(fontsize=8, loc="upper right")
    for k, (col, color) in enumerate((("io_time_max", "#5e3c99"), ("io_time_sum", "#e66101"))):
        if col in nodes:
            ax_t.bar(
                x + (k - 0.5) * 0.4,
                nodes[col].to_numpy(float),
                width=0.4,
                color=color,
                label={"io_time_max": "slowest rank", "io_time_sum": "sum over ranks"}[col],
            )
    ax_t.set_xticks(x, hosts)
    ax_t.set_ylabel("seconds")
    ax_t.set_title("I/O time per node")
    ax_t.legend(fontsize=8, loc="upper right")
    fig.suptitle(anon(title), fontsize=11)
    return fig


@with_rc
def overlap_figure(ov: pd.DataFrame, title: str, anon: Anon) -> Figure | None:
    """Per rank, its I/O time split into: overlapped with compute, exposed (inside epochs, no
    compute running), and outside the epochs (start-up, test set, checkpoints after training)."""
    need = {"rank", "epoch", "io_time", "overlapped_io_time", "exposed_io_time"}
    if ov is None or ov.empty or not need <= set(ov.columns):
        return None
    inside = ov[ov["epoch"] >= 0].groupby("rank")[["overlapped_io_time", "exposed_io_time"]].sum()
    outside = ov[ov["epoch"] < 0].groupby("rank")["io_time"].sum()
    ranks = sorted(set(inside.index) | set(outside.index))
    if not ranks:
        return None
    inside = inside.reindex(ranks).fillna(0)
    outside = outside.reindex(ranks).fillna(0)
    parts = (
        (inside["overlapped_io_time"].to_numpy(), "#91bfdb", "overlapped with compute"),
        (inside["exposed_io_time"].to_numpy(), "#d73027", "exposed (in epochs, no compute)"),
        (outside.to_numpy(), "#bdbdbd", "outside epochs"),
    )
    return rank_bars(ranks, parts, "I/O time (s)", anon(title), ncol=3)


def rank_bars(
    ranks: list, parts: Iterable[tuple[np.ndarray, str, str]], xlabel: str, title: str, ncol: int
) -> Figure:
    """One horizontal bar per rank stacked from ``parts`` (values, colour, label), the
    first rank on top; a part that is zero on every rank is left out of the bar and legend.
    The thin edges keep a slice of a few pixels visible."""
    fig = new_figure(10, min(max(2.6, 1.4 + 0.35 * len(ranks)), 9))
    ax = fig.subplots()
    y = np.arange(len(ranks))
    left = np.zeros(len(ranks))
    for vals, color, label in parts:
        if vals.sum() <= 0:
            continue
        ax.barh(
            y, vals, left=left, color=color, label=label, height=0.6, edgecolor="#737373", lw=0.3
        )
        left = left + vals
    if len(ranks) <= 32:
        ax.set_yticks(y, [str(r) for r in ranks])
    ax.invert_yaxis()
    ax.set_ylabel("rank")
    ax.set_xlabel(xlabel)
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=ncol, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    return fig


# the time account's slices, in the order a bar draws them, with their colours and words
ACCOUNT_SLICES = (
    ("startup", "#bdbdbd", "start-up"),
    ("compute", "#1a9850", "compute"),
    ("collectives", "#a6d96a", "collectives"),
    ("wait_phase_start", "#fc8d59", "data wait at an epoch's start"),
    ("wait_steady", "#d73027", "data wait, steady state"),
    ("evaluation", "#91bfdb", "evaluation"),
    ("checkpoint", "#4575b4", "checkpoint"),
    ("unexplained", "#ffffbf", "unexplained"),
)


@with_rc
def account_figure(per_rank: list, title: str, anon: Anon) -> Figure | None:
    """One stacked bar per rank: each second of its window in exactly one slice (the time
    account, as HTA's temporal breakdown draws a rank's time)."""
    if not per_rank:
        return None
    ranks = [a.rank for a in per_rank]
    parts = (
        (np.array([a.seconds.get(kind, 0.0) for a in per_rank]), color, label)
        for kind, color, label in ACCOUNT_SLICES
    )
    xlabel = "seconds from the run's start to the rank's last step"
    return rank_bars(ranks, parts, xlabel, anon(title), ncol=4)
