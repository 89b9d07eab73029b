"""Many small files: how each file is read, said once for all files that are read alike.

A file's *stream* is its reads within one epoch by one rank (the rank's loader workers
included), in time order. Streams are grouped by shape: the first read (its size, at offset
0 or not), whether the reads between are contiguous, whether the stream ends with a zero-byte
read at end of file (Python's buffered reader asks once more). For each group: how many files,
by how many processes per stream, the range of the reads between, and how often the files are
opened per epoch: "19,968 files, each read once per epoch by one process: 4.1 kB at 0, then
60.0-64.0 kB contiguous reads, then 0 B at EOF" instead of a signature listing 20,000 names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import READ, RunData, category_matches
from iosweep.analysis.intervals import order_by, rank_of
from iosweep.units import human_bytes


def read_streams(rd: RunData, op_epoch: np.ndarray, cls: int) -> pd.DataFrame | None:
    """One row per (file, epoch, rank) stream of class ``cls`` reads (each rank's own)."""
    ops = rd.ops
    m = (ops.op == READ) & (ops.actor >= 0) & (rd.file_class[ops.file] == cls)
    idx = np.flatnonzero(m)
    if not len(idx):
        return None
    nf = max(len(rd.paths), 1)
    na = int(ops.actor.max()) + 1
    key = ((op_epoch[idx].astype(np.int64) + 1) * nf + ops.file[idx]) * na + ops.actor[idx]
    perm = order_by(key, rank_of(rd.time_rank()[idx]))
    order, k = idx[perm], key[perm]
    # Ten million reads at ImageNet scale: each temporary here is 10-80 MB, freed once used.
    del idx, key, perm
    off, ln = ops.offset[order], ops.length[order]
    new = np.r_[True, k[1:] != k[:-1]]
    del k
    starts = np.flatnonzero(new)
    last = np.r_[starts[1:] - 1, len(order) - 1]
    n = np.diff(np.r_[starts, len(order)])
    gap_ok = np.r_[True, off[1:] == off[:-1] + ln[:-1]]
    gap_ok[starts] = True
    eof = (ln[last] == 0) & (n > 1)
    middle = np.ones(len(order), bool)
    middle[starts] = False
    middle[last[eof]] = False
    # The body: the reads between, without the last of them (the file's remainder, shorter).
    tail = np.where(eof, last - 1, last)
    body = middle.copy()
    body[tail[tail > starts]] = False
    pid = ops.pid[order] if ops.pid is not None else np.zeros(len(order), np.int64)
    new_pid = np.r_[True, (pid[1:] != pid[:-1]) | new[1:]]
    del pid, new
    out = pd.DataFrame(
        {
            "file": ops.file[order][starts],
            "epoch": op_epoch[order][starts],
            "reads": n,
            "first_len": ln[starts],
            "first_at0": off[starts] == 0,
            "eof": eof,
            "contiguous": np.minimum.reduceat(gap_ok, starts),
            "mid_reads": np.add.reduceat(middle.astype(np.int64), starts),
            "body_reads": np.add.reduceat(body.astype(np.int64), starts),
            "procs": np.add.reduceat(new_pid.astype(np.int64), starts),
        }
    )
    del off, order, gap_ok, middle, new_pid
    out["mid_min"] = np.minimum.reduceat(np.where(body, ln, np.iinfo(np.int64).max), starts)
    out["mid_max"] = np.maximum.reduceat(np.where(body, ln, -1), starts)
    return out


def _opens_per_file(rd: RunData, cls: int) -> pd.Series:
    """Opens per file of the class: Darshan's counters, else DFTracer's open calls."""
    return opens_per_file(rd, cls, counted=bool(len(rd.counters)))


def opens_per_file(rd: RunData, cls: int, counted: bool) -> pd.Series:
    """Opens per file of the class from Darshan's counters where the run has any
    (``counted``), else from DFTracer's open calls."""
    c = rd.counters
    if counted:
        sel = c[(rd.file_class[c["file"].to_numpy()] == cls) & (c["actor"] >= 0)]
        return sel.groupby("file")["opens"].sum()
    ev = rd.app_events
    if ev.empty:
        return pd.Series(dtype=np.int64)
    opening = category_matches(ev["name"], r"^(f?open(at)?(64)?|creat(64)?)$")
    file = ev["file"].to_numpy()[opening]
    file = file[file >= 0]
    counts = np.bincount(file[rd.file_class[file] == cls], minlength=len(rd.paths))
    have = np.flatnonzero(counts)
    return pd.Series(counts[have], index=have)


SHAPE = ["first_len", "first_at0", "eof", "contiguous"]  # what a group of streams shares


def _describe(g: Any, opens_per_epoch: float | None) -> str:
    """A shape in words (``g``: its row of :func:`shape_groups`)."""
    procs = "one process" if g.procs == 1 else f"up to {int(g.procs)} processes"
    per = f"read once per epoch by {procs}"
    if opens_per_epoch is not None:
        per = (
            f"opened {'once' if round(opens_per_epoch, 1) == 1.0 else f'{opens_per_epoch:.1f} times'} "
            f"per epoch and read by {procs}"
        )
    parts = [f"{human_bytes(g.first_len)} at {'0' if g.first_at0 else 'an offset'}"]
    kind = "contiguous" if g.contiguous else "non-contiguous"
    lo, hi = _body_range(g)
    if lo is not None and hi is not None:
        size = human_bytes(lo) if lo == hi else f"{human_bytes(lo)}-{human_bytes(hi)}"
        parts.append(f"{size} {kind} reads (the last of a file shorter)")
    elif g.mid_reads > 0:
        parts.append(f"one {kind} read of the rest")
    if g.eof:
        parts.append("0 B at EOF")
    return f"{int(g.files):,} files, each {per}: " + ", then ".join(parts)


def _body_range(g: Any) -> tuple[int | None, int | None]:
    if pd.isna(g.body_min):
        return None, None
    return int(g.body_min), int(g.body_max)


def file_shapes(
    rd: RunData, op_epoch: np.ndarray, cls: str, limit: int = 5
) -> dict[str, Any] | None:
    """The read shapes of class ``cls``'s files, most files first."""
    if cls not in rd.class_names:
        return None
    ci = rd.class_names.index(cls)
    st = read_streams(rd, op_epoch, ci)
    if st is None:
        return None
    return shapes_of(st, _opens_per_file(rd, ci), cls, limit)


def shapes_of(st: pd.DataFrame, opens: pd.Series, cls: str, limit: int = 5) -> dict[str, Any]:
    """:func:`file_shapes` from the class's read streams (of every rank) and its opens per
    file."""
    return shapes_summary(shape_groups(st, opens), cls, limit)


@dataclass
class ShapeGroups:
    """The read streams of some files of a class grouped by shape (:data:`SHAPE`), with what
    the summary says of each group; the groups of disjoint sets of files add up with ``+``."""

    groups: pd.DataFrame  # one row per shape
    files: int
    streams: int

    def __add__(self, o: ShapeGroups) -> ShapeGroups:
        g = pd.concat([x for x in (self.groups, o.groups) if len(x)] or [self.groups])
        added = g.groupby(SHAPE, sort=True).agg(
            files=("files", "sum"),
            streams=("streams", "sum"),
            opened_files=("opened_files", "sum"),
            opens=("opens", "sum"),
            epochs=("epochs", "sum"),
            body_min=("body_min", "min"),
            body_max=("body_max", "max"),
            procs=("procs", "max"),
            mid_reads=("mid_reads", "max"),
            reads_min=("reads_min", "min"),
            reads_max=("reads_max", "max"),
        )
        return ShapeGroups(added.reset_index(), self.files + o.files, self.streams + o.streams)


def shape_groups(st: pd.DataFrame, opens: pd.Series) -> ShapeGroups:
    """The :class:`ShapeGroups` of some files' read streams (every rank's) and their opens per
    file."""
    epochs_read = st[st["epoch"] >= 0].groupby("file")["epoch"].nunique()
    rows = []
    for key, g in st.groupby(SHAPE, sort=True):
        files = g["file"].unique()
        fo = opens.reindex(files).dropna()
        body = g[g["body_reads"] > 0]
        rows.append(
            {
                **dict(zip(SHAPE, key, strict=True)),
                "files": len(files),
                "streams": len(g),
                "opened_files": len(fo),
                "opens": float(fo.sum()),
                "epochs": float(epochs_read.reindex(fo.index).fillna(0).sum()),
                "body_min": body["mid_min"].min() if len(body) else np.nan,
                "body_max": body["mid_max"].max() if len(body) else np.nan,
                "procs": int(g["procs"].max()),
                "mid_reads": int(g["mid_reads"].max()),
                "reads_min": int(g["reads"].min()),
                "reads_max": int(g["reads"].max()),
            }
        )
    columns = [
        *SHAPE,
        "files",
        "streams",
        "opened_files",
        "opens",
        "epochs",
        "body_min",
        "body_max",
        "procs",
        "mid_reads",
        "reads_min",
        "reads_max",
    ]
    return ShapeGroups(pd.DataFrame(rows, columns=columns), int(st["file"].nunique()), len(st))


def shapes_summary(sg: ShapeGroups, cls: str, limit: int = 5) -> dict[str, Any]:
    """The shapes of most files first (ties in shape order), at most ``limit``."""
    shapes = []
    for g in (
        sg.groups.sort_values("files", ascending=False, kind="stable").head(limit).itertuples()
    ):
        ope = float(g.opens / g.epochs) if g.opened_files and g.epochs > 0 else None
        lo, hi = _body_range(g)
        shapes.append(
            {
                "files": int(g.files),
                "streams": int(g.streams),
                "text": _describe(g, ope),
                "first_read": int(g.first_len),
                "first_at_0": bool(g.first_at0),
                "body_read_min": lo,
                "body_read_max": hi,
                "eof_read": bool(g.eof),
                "reads_per_stream_min": int(g.reads_min),
                "reads_per_stream_max": int(g.reads_max),
                "opens_per_file_per_epoch": ope,
            }
        )
    return {"class": cls, "files": sg.files, "streams": sg.streams, "shapes": shapes}
