"""The report's figures, drawn with matplotlib's Agg renderer (no pyplot, no global state).

Per-operation plots (spatial, temporal) read only the columns they need from a run's
``segments.parquet``. Above ``max_points`` operations they draw a deterministic sample:
each (file class, direction) stratum keeps at least a fair share (so rare operations such as
rank 0's checkpoint writes stay visible among millions of reads), and within a stratum
operations are taken evenly spaced in (rank, time) order. Every figure says when it is sampled.

Every text a figure draws goes through the anonymizer first (labels are built from paths and
host names); ``figure_texts`` lists what was drawn, so tests can check it.
"""

from __future__ import annotations

import functools
import io
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import (
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    PercentFormatter,
)

from iosweep.report.fmt import human_bytes
from iosweep.sampling import pick

Anon = Callable[[str], str]

# Small requests yellow, large dark purple: the colouring of the seed slides' plots.
SIZE_CMAP = "viridis_r"
FRAMEWORK_COLORS = {"pytorch": "#d95f02", "tensorflow": "#1b9e77"}
_OTHER_COLORS = ["#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
_NODE_STYLES = [
    ("o", "-"),
    ("s", "--"),
    ("^", ":"),
    ("D", "-."),
    ("v", (0, (5, 1))),
    ("P", (0, (1, 1))),
]
RC = {
    "text.parse_math": False,  # a '$' in a file name must not be read as TeX
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _with_rc(fn):
    """Draw under RC: texts take ``parse_math`` when they are created, not when drawn."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with mpl.rc_context(RC):
            return fn(*args, **kwargs)

    return wrapper


# --- operations ---------------------------------------------------------------------------
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


# --- helpers ------------------------------------------------------------------------------
def new_figure(w: float, h: float) -> Figure:
    fig = Figure(figsize=(w, h), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure_texts(fig: Figure) -> list[str]:
    """Every non-empty text the figure drew (titles, labels, tick labels, legends)."""
    return sorted({t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text()})


@_with_rc
def render_png(fig: Figure, dpi: int) -> tuple[bytes, list[str]]:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue(), figure_texts(fig)


# Darshan's request-size bins (SIZE_READ_0_100 ... SIZE_READ_1G_PLUS), zero-byte reads apart.
SIZE_EDGES = [1, 100, 1024, 10240, 102400, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30]
SIZE_LABELS = [
    "0 B (end of file)", "1-99 B", "100 B-1 KiB", "1-10 KiB", "10-100 KiB", "100 KiB-1 MiB",
    "1-4 MiB", "4-10 MiB", "10-100 MiB", "100 MiB-1 GiB", ">= 1 GiB",
]  # fmt: skip
SIZE_COLORS = ["#bdbdbd"] + [
    mpl.colormaps[SIZE_CMAP](x) for x in np.linspace(0.05, 1.0, len(SIZE_LABELS) - 1)
]


def size_bin(length: np.ndarray) -> np.ndarray:
    """0 for zero-byte requests, else 1 + Darshan's bin (bins hold their upper bound)."""
    length = np.asarray(length)
    return np.where(length > 0, 1 + np.searchsorted(np.array(SIZE_EDGES[1:]), length), 0)


def size_colors(length: np.ndarray) -> np.ndarray:
    return np.array(SIZE_COLORS, dtype=object)[size_bin(length)]


def size_legend(fig: Figure, length: np.ndarray, where: str = "outside right upper") -> None:
    """A legend of the size bins drawn, with how many requests each holds in the figure."""
    counts = np.bincount(size_bin(length), minlength=len(SIZE_LABELS))
    handles = [
        Line2D([], [], marker="s", ls="", color=SIZE_COLORS[i], label=f"{SIZE_LABELS[i]} ({c:,})")
        for i, c in enumerate(counts)
        if c
    ]
    if handles:
        style: dict[str, Any] = {
            "fontsize": 7,
            "title_fontsize": 7,
            "title": "request size (drawn)",
        }
        fig.legend(handles=handles, loc=where, **style)  # type: ignore[call-overload]


def size_norm(length: np.ndarray) -> LogNorm:
    hi = float(max(np.max(length) if len(length) else 2, 2))
    return LogNorm(vmin=1, vmax=hi)


def _bytes_fmt(x: float, _pos: Any = None) -> str:
    return human_bytes(x)


def _bytes_axis(axis) -> None:
    """Byte ticks at whole, round numbers (no "1 B, 1 B, 2 B" on a 4-byte axis)."""
    axis.set_major_locator(MaxNLocator(nbins=6, integer=True, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(FuncFormatter(_bytes_fmt))


def _count_log_axis(axis) -> None:
    # Plain numbers: math text is off (file names may hold '$'), so 10^3 would print raw.
    axis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _size_colorbar(fig: Figure, axes, norm: LogNorm, label: str = "request size") -> None:
    cb = fig.colorbar(ScalarMappable(norm=norm, cmap=SIZE_CMAP), ax=axes, pad=0.01, aspect=30)
    cb.set_label(label + " (0 B shown as 1 B)")
    cb.ax.yaxis.set_major_formatter(FuncFormatter(_bytes_fmt))


def series_color(name: str, i: int) -> str:
    return FRAMEWORK_COLORS.get(name.split(" ")[0], _OTHER_COLORS[i % len(_OTHER_COLORS)])


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


# --- spatial ------------------------------------------------------------------------------
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
    _bytes_axis(ax.yaxis)
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
        ax.text(0.0, 1.0, anon(f"sub-columns: {len(names)} files in path order, {names[0]} ... {names[-1]}"),
                transform=ax.transAxes, fontsize=6, va="bottom", color="#555555")  # fmt: skip
        return
    for name, x in zip(names, pos, strict=True):
        ax.text(first_rank + x, 1.0, anon(name), transform=ax.get_xaxis_transform(), rotation=90,
                fontsize=6, ha="center", va="bottom", color="#555555")  # fmt: skip


@_with_rc
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


# --- temporal -----------------------------------------------------------------------------
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
        np.ma.masked_equal(grid, 0), aspect="auto", cmap="magma_r", norm=norm, interpolation="nearest",
        extent=(t0, t1, len(ranks) - 0.5, -0.5),
    )  # fmt: skip
    if len(ranks) <= 32:
        ax.set_yticks(range(len(ranks)), [str(r) for r in ranks])
    ax.set_xlabel("time from run start (s)")
    ax.set_ylabel("rank")
    cb = fig.colorbar(img, ax=ax, pad=0.01, aspect=15)
    cb.set_label("bytes per time bin")
    cb.ax.yaxis.set_major_formatter(FuncFormatter(_bytes_fmt))


@_with_rc
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


# --- request sizes ------------------------------------------------------------------------
@_with_rc
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
            ax_h.bar([(k - 0.5) * width], [d.loc[0]], width=width, color="#d9d9d9",
                     edgecolor=color, hatch="//", label=f"0-byte {op}s (end of file)")  # fmt: skip
    bins = sorted(allc["bin"].unique())
    ax_h.set_xticks(
        bins, [human_bytes(0 if b == 0 else 2 ** (b - 1)) for b in bins], rotation=45, ha="right"
    )
    ax_h.set_yscale("log")
    ax_h.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=12))
    _count_log_axis(ax_h.yaxis)
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
            color=_OTHER_COLORS[i % len(_OTHER_COLORS)],
            label=anon(f"{cls} {op}s ({int(g['count'].sum()):,})"),
        )
    ax_c.set_xscale("log", base=2)
    ax_c.xaxis.set_major_locator(LogLocator(base=16))
    ax_c.xaxis.set_major_formatter(FuncFormatter(_bytes_fmt))
    ax_c.xaxis.set_minor_formatter(NullFormatter())
    ax_c.set_ylim(0, 1.02)
    ax_c.set_xlabel("request size (log2 bins, upper bound)")
    ax_c.set_ylabel("fraction of sized requests")
    ax_c.set_title("CDF per file class and direction")
    ax_c.legend(fontsize=7, loc="lower right")
    fig.suptitle(anon(title), fontsize=11)
    return fig


# --- nodes --------------------------------------------------------------------------------
@_with_rc
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
    _bytes_axis(ax_b.yaxis)
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


# --- I/O against compute ---------------------------------------------------------------
@_with_rc
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
    fig = new_figure(10, min(max(2.6, 1.4 + 0.35 * len(ranks)), 9))
    ax = fig.subplots()
    y = np.arange(len(ranks))
    left = np.zeros(len(ranks))
    parts = (
        (inside["overlapped_io_time"].to_numpy(), "#91bfdb", "overlapped with compute"),
        (inside["exposed_io_time"].to_numpy(), "#d73027", "exposed (in epochs, no compute)"),
        (outside.to_numpy(), "#bdbdbd", "outside epochs"),
    )
    for vals, color, label in parts:
        ax.barh(y, vals, left=left, color=color, label=label, height=0.6)
        left = left + vals
    if len(ranks) <= 32:
        ax.set_yticks(y, [str(r) for r in ranks])
    ax.invert_yaxis()
    ax.set_ylabel("rank")
    ax.set_xlabel("I/O time (s)")
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=3, fontsize=8, frameon=False)
    fig.suptitle(anon(title), fontsize=11)
    return fig


# --- sweep scaling ------------------------------------------------------------------------
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
    """The scaling panels the analysis declared (iosweep.analysis.sweep.SCALING_METRICS)."""
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
        _bytes_axis(ax.yaxis)
    elif kind == "rate":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: human_bytes(v) + "/s"))
    elif kind == "share":
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    elif kind == "seconds":
        ax.set_ylabel("s")


@_with_rc
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
                marker, ls = _NODE_STYLES[li % len(_NODE_STYLES)]
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


@_with_rc
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


# --- frameworks side by side --------------------------------------------------------------
@_with_rc
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
