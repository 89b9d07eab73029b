"""Per-operation figures (spatial: offset against rank; temporal: start against rank, with the
epochs, checkpoints and a heatmap) from the analysis' ops sample (``ops_sample.parquet``).
Above ``max_points`` operations they draw a deterministic sample: each (file class,
direction) stratum keeps at least a fair share (so rare operations such as rank 0's
checkpoint writes stay visible among millions of reads), and within a stratum operations
are taken evenly spaced in (rank, time) order. Every figure says when it is sampled."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FuncFormatter,
    MaxNLocator,
)

from iosweep.report.plots.base import (
    SIZE_COLORS,
    Anon,
    bytes_axis,
    bytes_fmt,
    new_figure,
    size_bin,
    size_legend,
    size_norm,
    with_rc,
)
from iosweep.sampling import pick


@dataclass
class OpsSample:
    """Operations of one run (or a sample of them), as numpy arrays."""

    rank: np.ndarray
    file: np.ndarray  # index into paths
    cls: np.ndarray  # index into class_names
    write: np.ndarray  # bool
    offset: np.ndarray
    length: np.ndarray
    start: np.ndarray
    end: np.ndarray
    paths: list[str]
    class_names: list[str]
    total: int  # operations on analysed files in the store
    excluded: int = 0  # operations on files the analysis left out (e.g. /dev, std streams)

    @property
    def shown(self) -> int:
        return len(self.rank)

    @property
    def sampled(self) -> bool:
        return self.shown < self.total

    def note(self) -> str:
        if not self.sampled:
            return ""
        return (
            f"Sampled: {self.shown:,} of {self.total:,} operations shown ({self.shown / self.total:.1%}), "
            "evenly spaced in (rank, time) order within each file class and direction; "
            "rare classes (such as checkpoint writes) are kept whole."
        )

    def subset(self, mask: np.ndarray) -> OpsSample:
        return OpsSample(
            self.rank[mask],
            self.file[mask],
            self.cls[mask],
            self.write[mask],
            self.offset[mask],
            self.length[mask],
            self.start[mask],
            self.end[mask],
            self.paths,
            self.class_names,
            int(mask.sum()),
        )


def ops_sample(df: pd.DataFrame, total: int, excluded: int, max_points: int) -> OpsSample | None:
    """The analysis's ``ops_sample`` table as arrays; above ``max_points`` rows it is thinned
    with the analysis's own rule (:func:`iosweep.sampling.pick`). None when it holds no operation."""
    if df is None or df.empty:
        return None
    path = df["path"].astype("category")
    cls = df["class"].astype("category")
    keep = pick(
        df["rank"].to_numpy(np.int64),
        df["start"].to_numpy(np.float64),
        cls.cat.codes.to_numpy(np.int64) * 2 + df["write"].to_numpy(np.int64),
        max_points,
    )
    return OpsSample(
        rank=df["rank"].to_numpy(np.int32)[keep],
        file=path.cat.codes.to_numpy(np.int32)[keep],
        cls=cls.cat.codes.to_numpy(np.int16)[keep],
        write=df["write"].to_numpy(bool)[keep],
        offset=df["offset"].to_numpy(np.int64)[keep],
        length=df["length"].to_numpy(np.int64)[keep],
        start=df["start"].to_numpy(np.float64)[keep],
        end=df["end"].to_numpy(np.float64)[keep],
        paths=[str(v) for v in path.cat.categories],
        class_names=[str(v) for v in cls.cat.categories],
        total=int(total),
        excluded=int(excluded),
    )


def _scatter_ops(ax, x, y, colors, write, write_size: int) -> None:
    """Reads as dots, writes as black-edged triangles, on one colour scale (request size)."""
    for flag, marker in ((False, "o"), (True, "^")):
        k = write == flag
        if k.any():
            ax.scatter(
                x[k],
                y[k],
                c=colors[k],
                s=write_size if flag else 10,
                marker=marker,
                edgecolors="black" if flag else "none",
                linewidths=0.4,
                rasterized=True,
                zorder=3,
            )


def _rank_axis_labels(
    ranks: np.ndarray, hosts: dict[int, str], anon: Anon
) -> tuple[list[int], list[str]]:
    ticks = sorted(int(r) for r in np.unique(ranks))
    if len(ticks) > 32:  # let matplotlib thin them
        return [], []
    multi = len({hosts.get(r, "") for r in ticks}) > 1
    return ticks, [anon(f"{r} · {hosts.get(r, '?')}") if multi else str(r) for r in ticks]


def _node_bounds(ranks: list[int], hosts: dict[int, str]) -> list[float]:
    """Positions between consecutive ranks on different hosts."""
    return [(a + b) / 2 for a, b in itertools.pairwise(ranks) if hosts.get(a) != hosts.get(b)]


def draw_spatial(
    ax, s: OpsSample, cls: int, norm: LogNorm, hosts: dict[int, str], anon: Anon
) -> dict[str, Any]:
    """File offset against rank for one file class; each file its own narrow column per rank."""
    m = s.cls == cls
    files_here = np.unique(s.file[m])
    order = sorted(files_here, key=lambda i: s.paths[i])
    pos = np.zeros(len(s.paths), np.float64)
    nf = len(order)
    for j, fi in enumerate(order):
        pos[fi] = ((j + 0.5) / nf - 0.5) * 0.8 if nf > 1 else 0.0
    x = s.rank[m] + pos[s.file[m]]
    off = s.offset[m].astype(np.float64)
    ln = s.length[m].astype(np.float64)
    known = off >= 0
    colors = np.array([mpl.colors.to_rgba(c) for c in SIZE_COLORS])[size_bin(ln)]
    w = s.write[m]
    # Extent of each request as a vertical bar, its start as a dot (reads) or triangle (writes).
    ax.vlines(
        x[known],
        off[known],
        off[known] + ln[known],
        colors=colors[known],
        linewidth=2.5,
        alpha=0.8,
        rasterized=True,
    )
    _scatter_ops(ax, x[known], off[known], colors[known], w[known], write_size=14)
    ranks = np.unique(s.rank)
    ticks, labels = _rank_axis_labels(ranks, hosts, anon)
    if ticks:
        ax.set_xticks(ticks, labels, rotation=30 if any("·" in lb for lb in labels) else 0)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for b in _node_bounds([int(r) for r in ranks], hosts):
        ax.axvline(b, color="grey", lw=0.8, ls="--")
    ax.set_xlim(float(ranks.min()) - 0.6, float(ranks.max()) + 0.6)
    bytes_axis(ax.yaxis)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("rank")
    ax.set_ylabel("file offset")
    _label_files(ax, [s.paths[i] for i in order], pos[order], float(ranks.min()), anon)
    return {"files": nf, "ops": int(m.sum()), "unknown_offsets": int((~known).sum())}


def _label_files(ax, paths: list[str], pos: np.ndarray, first_rank: float, anon: Anon) -> None:
    """Name each file's sub-column above the first rank's column (up to 8 files; else the
    first and last in path order)."""
    names = [p.rsplit("/", 1)[-1] or p for p in paths]
    if len(names) > 8:
        ax.text(
            0.0,
            1.0,
            anon(f"sub-columns: {len(names)} files in path order, {names[0]} ... {names[-1]}"),
            transform=ax.transAxes,
            fontsize=6,
            va="bottom",
            color="#555555",
        )
        return
    for name, x in zip(names, pos, strict=True):
        ax.text(
            first_rank + x,
            1.0,
            anon(name),
            transform=ax.get_xaxis_transform(),
            rotation=90,
            fontsize=6,
            ha="center",
            va="bottom",
            color="#555555",
        )


@with_rc
def spatial_figure(
    s: OpsSample, hosts: dict[int, str], strategies: dict[str, str], title: str, anon: Anon
) -> Figure:
    present = [i for i in range(len(s.class_names)) if (s.cls == i).any()]
    n = max(len(present), 1)
    fig = new_figure(min(4.2 * n + 1.2, 16), 4.2)
    axes = fig.subplots(1, n, squeeze=False)[0]
    norm = size_norm(s.length)
    for ax, ci in zip(axes, present, strict=False):
        info = draw_spatial(ax, s, ci, norm, hosts, anon)
        name = s.class_names[ci]
        strat = strategies.get(name, "")
        ax.set_title(
            anon(
                f"{name}: {info['files']} file{'s' if info['files'] != 1 else ''}"
                + (f", {strat}" if strat else "")
            ),
            pad=42 if info["files"] <= 8 else 12,
        )
    size_legend(fig, s.length)
    fig.suptitle(anon(title), fontsize=11)
    return fig


def draw_temporal(
    ax,
    s: OpsSample,
    norm: LogNorm,
    hosts: dict[int, str],
    anon: Anon,
    epochs: pd.DataFrame | None = None,
    checkpoints: list[dict[str, Any]] | None = None,
) -> None:
    """Operations over time per rank: reads just below a rank's line, writes just above."""
    if epochs is not None and len(epochs):
        spans = zip(epochs["epoch"], epochs["start"], epochs["end"], strict=True)
        for i, (epoch, start, end) in enumerate(spans):
            ax.axvspan(start, end, color="#000000", alpha=0.05 if i % 2 == 0 else 0.09, lw=0)
            ax.text(
                (start + end) / 2,
                0.99,
                f"epoch {epoch}",
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="top",
                fontsize=7,
                color="#555555",
            )
    for ev in checkpoints or []:
        ax.axvline(ev["start"], color="#b2182b", lw=0.9, ls=":", zorder=1)
    if checkpoints:
        ax.annotate(
            "checkpoint",
            xy=(checkpoints[0]["start"], 0.01),
            xycoords=ax.get_xaxis_transform(),
            xytext=(-2, 0),
            textcoords="offset points",
            color="#b2182b",
            fontsize=7,
            ha="right",
            va="bottom",
            rotation=90,
        )
    y = s.rank + np.where(s.write, 0.18, -0.18)
    colors = np.array([mpl.colors.to_rgba(c) for c in SIZE_COLORS])[size_bin(s.length)]
    ax.hlines(y, s.start, s.end, colors=colors, linewidth=4, rasterized=True)
    _scatter_ops(ax, s.start, y, colors, s.write, write_size=16)
    ranks = np.unique(s.rank)
    ticks, labels = _rank_axis_labels(ranks, hosts, anon)
    if ticks:
        ax.set_yticks(ticks, labels)
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    for b in _node_bounds([int(r) for r in ranks], hosts):
        ax.axhline(b, color="grey", lw=0.8, ls="--")
    ax.set_ylim(float(ranks.max()) + 0.6, float(ranks.min()) - 0.6)  # rank 0 on top
    ax.set_xlabel("time from run start (s)")
    ax.set_ylabel("rank")
    ax.legend(
        handles=[
            Line2D([], [], marker="o", ls="", color="grey", label="read (below the rank's line)"),
            Line2D(
                [],
                [],
                marker="^",
                ls="",
                color="grey",
                markeredgecolor="black",
                label="write (above)",
            ),
        ],
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncol=2,
        fontsize=7,
        frameon=False,
    )


def draw_order(ax, s: OpsSample, hosts: dict[int, str], anon: Anon) -> None:
    """Each rank's operations in their order (no time axis): bursts that are one dot on a
    long time axis spread out, so their sequence and sizes can be read."""
    order = np.lexsort((s.start, s.rank))
    rank = s.rank[order]
    first = np.r_[True, rank[1:] != rank[:-1]]
    idx = np.arange(len(order)) - np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    y = rank + np.where(s.write[order], 0.18, -0.18)
    colors = np.array([mpl.colors.to_rgba(c) for c in SIZE_COLORS])[size_bin(s.length[order])]
    _scatter_ops(ax, idx, y, colors, s.write[order], write_size=16)
    ranks = np.unique(s.rank)
    ticks, labels = _rank_axis_labels(ranks, hosts, anon)
    if ticks:
        ax.set_yticks(ticks, labels)
    ax.set_ylim(float(ranks.max()) + 0.6, float(ranks.min()) - 0.6)
    ax.set_xlabel("operation of the rank, in time order" + (" (sampled)" if s.sampled else ""))
    ax.set_ylabel("rank")


def draw_heatmap(ax, hm: pd.DataFrame, fig: Figure) -> None:
    """Bytes moved per rank and time bin (all operations, not the sample)."""
    ranks = np.sort(hm["rank"].unique())
    nb = int(hm["bin"].max()) + 1
    grid = np.zeros((len(ranks), nb))
    grid[np.searchsorted(ranks, hm["rank"]), hm["bin"]] = hm["bytes_read"] + hm["bytes_written"]
    t0, t1 = float(hm["t0"].min()), float(hm["t1"].max())
    pos = grid[grid > 0]
    norm = (
        LogNorm(vmin=max(float(pos.min()), 1.0), vmax=max(float(pos.max()), 2.0))
        if len(pos)
        else None
    )
    img = ax.imshow(
        np.ma.masked_equal(grid, 0),
        aspect="auto",
        cmap="magma_r",
        norm=norm,
        interpolation="nearest",
        extent=(t0, t1, len(ranks) - 0.5, -0.5),
    )
    if len(ranks) <= 32:
        ax.set_yticks(range(len(ranks)), [str(r) for r in ranks])
    ax.set_xlabel("time from run start (s)")
    ax.set_ylabel("rank")
    cb = fig.colorbar(img, ax=ax, pad=0.01, aspect=15)
    cb.set_label("bytes per time bin")
    cb.ax.yaxis.set_major_formatter(FuncFormatter(bytes_fmt))


@with_rc
def temporal_figure(
    s: OpsSample,
    hosts: dict[int, str],
    title: str,
    anon: Anon,
    epochs: pd.DataFrame | None = None,
    checkpoints: list[dict[str, Any]] | None = None,
    heat: pd.DataFrame | None = None,
) -> Figure:
    """Three views: operations over time per rank, the same operations in each rank's order,
    and bytes per rank and time bin (when the analysis gave the heatmap)."""
    nr = len(np.unique(s.rank))
    per = min(max(2.6, 1.4 + 0.38 * nr), 6)
    rows = 3 if heat is not None and len(heat) else 2
    fig = new_figure(12, per * rows + 0.8)
    axes = fig.subplots(rows, 1)
    norm = size_norm(s.length)
    draw_temporal(axes[0], s, norm, hosts, anon, epochs, checkpoints)
    axes[0].set_title("over time", fontsize=9)
    draw_order(axes[1], s, hosts, anon)
    axes[1].set_title("in order", fontsize=9)
    if rows == 3:
        draw_heatmap(axes[2], heat, fig)
        axes[2].set_title("bytes per rank and time bin (every operation)", fontsize=9)
    size_legend(fig, s.length)
    fig.suptitle(anon(title), fontsize=11)
    return fig
