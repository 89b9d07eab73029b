"""What every figure shares: matplotlib's Agg renderer with the report's style (no pyplot, no
global state), rendering to PNG with the texts drawn, request-size bins and colours, axes."""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import (
    FuncFormatter,
    MaxNLocator,
    NullFormatter,
)

from iosweep.report.fmt import human_bytes

Anon = Callable[[str], str]


# Small requests yellow, large dark purple: the colouring of the seed slides' plots.
SIZE_CMAP = "viridis_r"


FRAMEWORK_COLORS = {"pytorch": "#d95f02", "tensorflow": "#1b9e77"}


OTHER_COLORS = ["#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]


NODE_STYLES = [
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


def with_rc(fn):
    """Draw under RC: texts take ``parse_math`` when they are created, not when drawn."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with mpl.rc_context(RC):
            return fn(*args, **kwargs)

    return wrapper


def new_figure(w: float, h: float) -> Figure:
    fig = Figure(figsize=(w, h), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure_texts(fig: Figure) -> list[str]:
    """Every non-empty text the figure drew (titles, labels, tick labels, legends)."""
    return sorted({t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text()})


@with_rc
def render_png(fig: Figure, dpi: int) -> tuple[bytes, list[str]]:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue(), figure_texts(fig)


# Darshan's request-size bins (SIZE_READ_0_100 ... SIZE_READ_1G_PLUS), zero-byte reads apart.
SIZE_EDGES = [1, 100, 1024, 10240, 102400, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30]


SIZE_LABELS = [
    "0 B (end of file)",
    "1-99 B",
    "100 B-1 KiB",
    "1-10 KiB",
    "10-100 KiB",
    "100 KiB-1 MiB",
    "1-4 MiB",
    "4-10 MiB",
    "10-100 MiB",
    "100 MiB-1 GiB",
    ">= 1 GiB",
]


SIZE_COLORS = ["#bdbdbd"] + [
    mpl.colormaps[SIZE_CMAP](x) for x in np.linspace(0.05, 1.0, len(SIZE_LABELS) - 1)
]


def size_bin(length: np.ndarray) -> np.ndarray:
    """0 for zero-byte requests, else 1 + Darshan's bin (bins hold their upper bound)."""
    length = np.asarray(length)
    return np.where(length > 0, 1 + np.searchsorted(np.array(SIZE_EDGES[1:]), length), 0)


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


def bytes_fmt(x: float, _pos: Any = None) -> str:
    return human_bytes(x)


def bytes_axis(axis) -> None:
    """Byte ticks at whole, round numbers (no "1 B, 1 B, 2 B" on a 4-byte axis)."""
    axis.set_major_locator(MaxNLocator(nbins=6, integer=True, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(FuncFormatter(bytes_fmt))


def count_log_axis(axis) -> None:
    # Plain numbers: math text is off (file names may hold '$'), so 10^3 would print raw.
    axis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def series_color(name: str, i: int) -> str:
    return FRAMEWORK_COLORS.get(name.split(" ")[0], OTHER_COLORS[i % len(OTHER_COLORS)])
