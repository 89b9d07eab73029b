"""The report's figures: written as PNG files beside the HTML and embedded as data URIs, with
their captions (the same text goes to Snakemake's report through ``figures/figures.json``)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iosweep.files import write_json
from iosweep.report import plots
from iosweep.report.settings import ReportSettings

FIGURE_SUBDIRS = ("sweep", "frameworks", "runs")

SPATIAL_CAPTION = (
    "File offset (y) against rank (x), one panel per file class. Each request is a vertical bar from "
    "its offset to its end, with a dot (read) or triangle (write) at its offset, coloured by its "
    "Darshan size bin (legend: bins and how many requests the figure draws in each; zero-byte reads "
    "at end of file grey). Within a rank's column each file has its own narrow sub-column, in path "
    "order, named above the first rank (up to 8 files): a shared file shows the same sub-columns for "
    "every rank, file-per-process a diagonal."
)
TEMPORAL_MARKS = "; shaded bands are epochs, dotted red lines checkpoints"  # training runs
TEMPORAL_CAPTION = (
    "Top: operations over time per rank (rank 0 on top), coloured by size bin: reads just below a "
    "rank's line, writes (triangles) just above{marks}. Middle: the same operations in each rank's order, without the time axis, so a "
    "burst that is one dot above can be read. Bottom: bytes moved per rank and time bin, every "
    "operation counted (not the sample)."
)
SIZES_CAPTION = (
    "Left: number of requests per power-of-two size bin (reads and writes, all files); zero-byte "
    "reads at end of file (hatched) are counted apart, not as a size. Right: cumulative fraction of "
    "requests up to each size, per file class and direction."
)
ACCOUNT_CAPTION = (
    "Where each second of a rank's time went, from the run's start to its last step: each "
    "second in exactly one slice, named by the evidence that covers it (the steps, the waits "
    "for each batch, evaluation and checkpoint regions); what nothing covers is unexplained, "
    "not filled with a guess."
)
OVERLAP_CAPTION = (
    "Each rank's I/O time, split into I/O that ran while the rank computed (hidden), I/O inside "
    "the epochs with no compute running (exposed: the rank waits for data) and I/O outside the "
    "epochs (start-up, test set, final checkpoint)."
)
NODES_RUN_CAPTION = "Bytes moved and I/O time per node (host) of this run."
SCALING_CAPTION = (
    "One panel per metric against the number of ranks (log scale), one colour per series of runs; "
    "where runs span several node counts each has its own line style. Markers are the mean over repeats, "
    "vertical bars the spread (min to max)."
)
NODES_CAPTION = (
    "The same metrics against the number of nodes, one line style per processes-per-node value."
)
FRAMEWORKS_CAPTION = (
    "The frameworks at the same number of ranks. Top: spatial pattern of the main data files; "
    "bottom: operations over time per rank, coloured by request size."
)


class Raw(str):
    """A string the report made itself (a data URI): exempt from anonymization, still escaped."""


@dataclass
class FigureRef:
    file: str  # relative to the HTML file
    title: str
    caption: str
    src: str  # data URI when embedded, else ""
    embedded: bool
    bytes: int
    entry: dict[str, Any]  # its row in figures.json


class FigureStore:
    """Writes figures under ``<html dir>/figures`` and embeds each in the HTML (see ``unembed``)."""

    def __init__(self, html_dir: Path, settings: ReportSettings):
        self.root = html_dir / "figures"
        self.settings = settings
        self.refs: list[FigureRef] = []
        for sub in FIGURE_SUBDIRS:  # figures of an earlier report must not linger
            d = self.root / sub
            if d.is_dir():
                for f in d.rglob("*.png"):
                    f.unlink()
                for f in sorted(d.rglob("*"), reverse=True):
                    if f.is_dir() and not any(f.iterdir()):
                        f.rmdir()
            # Always there, even if empty: the workflow declares each as an output directory.
            d.mkdir(parents=True, exist_ok=True)

    def add(self, fig, rel: str, title: str, caption: str, anon) -> FigureRef:
        png, texts = plots.render_png(fig, self.settings.figure_dpi)
        fig.clear()
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        entry = {
            "file": f"figures/{rel}",
            "title": anon(title),
            "caption": anon(caption),
            "embedded": True,
            "bytes": len(png),
            "texts": texts,
        }
        src = Raw("data:image/png;base64," + base64.b64encode(png).decode("ascii"))
        ref = FigureRef(f"figures/{rel}", title, caption, src, True, len(png), entry)
        self.refs.append(ref)
        return ref

    def unembed(self, nbytes: int) -> int:
        """Link instead of embed the last figures (the largest runs' first) until ``nbytes``
        of data URIs are freed; returns the bytes freed."""
        freed = 0
        for ref in reversed(self.refs):
            if freed >= nbytes:
                break
            if ref.embedded:
                freed += len(ref.src)
                ref.src, ref.embedded = Raw(""), False
                ref.entry["embedded"] = False
        return freed

    @property
    def linked(self) -> int:
        return sum(1 for r in self.refs if not r.embedded)

    def write_index(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_json(self.root / "figures.json", [r.entry for r in self.refs])
