"""Volume and speed: the (rank x file), per-file, per-rank and per-node tables.

Figures merge the two sources a tracer may give: DXT segments (every operation) and Darshan
counters (totals per file and process, also for modules DXT does not trace, such as STDIO).
Where both exist for a (rank, file) the larger value is kept, so a truncated side never hides
I/O the other side saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis import intervals
from iosweep.analysis.data import READ, RunData
from iosweep.analysis.patterns.files import (
    RunFiles,
    files_table,
    hosts_of,
    labels,
    node_reads,
    nodes_table,
)
from iosweep.analysis.patterns.metadata import KINDS, per_file_from_app_events
from iosweep.analysis.patterns.spatial import CATEGORIES, Spatial, fractions
from iosweep.analysis.settings import AnalysisSettings
from iosweep.columns import distinct
from iosweep.trace.schema import SIZE_BIN_LOWER, SIZE_BINS

# Per (rank, file) metrics that add up over operations, processes and files, in the column
# order of file_ranks.parquet and ranks.parquet.
SUMMED_METRICS = (
    "reads",
    "writes",
    "bytes_read",
    "bytes_written",
    "read_time",
    "write_time",
    "opens",
    "stats",
    "seeks",
    "fsyncs",
    "meta_time",
)


@dataclass
class Tables:
    # one row per (actor, file), actor -1 = unattributed; None where the run was analysed in
    # parts, whose rows are never together (iosweep.analysis.parts)
    file_rank: pd.DataFrame | None
    files: pd.DataFrame  # one row per file
    ranks: pd.DataFrame  # one row per actor (>= 0)
    nodes: pd.DataFrame  # one row per host
    dxt_available: bool
    completeness: float | None  # traced POSIX ops / counted POSIX ops


def build_tables(rd: RunData, sp: Spatial) -> Tables:
    """The (rank, file), files, ranks and nodes tables of a run, from its segments (reduced
    per stream in ``sp``'s order) and counters."""
    return finish_tables(tables_part(rd, sp), RunFiles.of(rd), rd.run_time)


@dataclass
class TablesPart:
    """What the tables take from some ranks' data (all of a run's, or a part's,
    :mod:`iosweep.analysis.parts`): their (rank, file) rows before what depends on a file's
    size (:func:`sized`), their byte ranges merged per (rank, file, direction) as (stream key,
    lo, hi), their rank rows (:func:`rank_rows`), and their traced and counted POSIX reads
    and writes."""

    file_rank: pd.DataFrame
    spans: tuple[np.ndarray, np.ndarray, np.ndarray]
    ranks: pd.DataFrame
    ops: int  # segments
    posix_traced: int
    posix_counted: int


def tables_part(rd: RunData, sp: Spatial) -> TablesPart:
    """The tables' part of ``rd``'s data (``sp``: its operations in stream order)."""
    ops = rd.ops
    nf = max(len(rd.paths), 1)
    seg, spans = _segment_streams(rd, sp)
    ctr, ctr_posix_ops = _counter_streams(rd, nf)
    # DFTracer: no counters, metadata calls traced one by one (Darshan's are counters)
    meta = per_file_from_app_events(rd, nf) if not len(rd.counters) else None
    streams = _Aligned(seg, ctr, nf)
    del seg, ctr
    cols = _merge_streams(rd, streams, meta)
    _coverage_and_pattern(cols, streams)
    _size_bins(rd, cols, streams)
    del streams
    # One frame, built once from the final columns: the streams' own columns never join it
    # (at a million files each column of it is 20 MB, and a wide frame held them all twice).
    # copy=False: one block per column, no consolidated copy of the whole table
    fr = pd.DataFrame({c: cols.pop(c) for c in list(cols)}, copy=False)
    return TablesPart(
        fr,
        spans,  # only the files and nodes tables use the merged ranges
        rank_rows(rd, fr, ops),
        len(ops),
        _posix_segments(rd),
        ctr_posix_ops,
    )


def finish_tables(part: TablesPart, run: RunFiles, run_time: float) -> Tables:
    """The tables of a run from its :class:`TablesPart` (its parts' put together, file and
    rank codes the run's)."""
    ranks = finish_ranks(part.ranks, run_time, run.settings)
    fr, files, reads = finish_files(part.file_rank, part.spans, run, hosts_of(ranks))
    return Tables(
        fr,
        files,
        ranks,
        nodes_table(ranks, reads),
        part.ops > 0,
        completeness_of(part.ops, part.posix_traced, part.posix_counted),
    )


def completeness_of(ops: int, posix_traced: int, posix_counted: int) -> float | None:
    """Traced (DXT) POSIX operations over those the counters saw; None without both."""
    if ops and posix_counted > 0:
        return min(1.0, posix_traced / posix_counted)
    return None


def finish_files(
    fr: pd.DataFrame, spans: tuple[np.ndarray, ...], run: RunFiles, hosts: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """Every (rank, file) row of some files (the run's, or of a pass over them) with what
    depends on their sizes, their rows of the files table, and what their hosts read of them
    (:func:`node_reads`)."""
    sized(fr, run.nf, run.settings.whole_file_coverage)
    # column selection copies nothing (pandas' copy-on-write)
    fr = fr[_FILE_RANK_COLUMNS + [c for c in fr.columns if c not in _FILE_RANK_COLUMNS]]
    return fr, files_table(fr, spans, run), node_reads(fr, spans, run, hosts)


_FILE_RANK_COLUMNS = [
    "actor",
    "file",
    "class",
    *SUMMED_METRICS,
    "file_size",
    "extent",
    "read_coverage",
    "write_coverage",
    "read_coverage_frac",
    "read_whole",
    "write_whole",
    "coverage_source",
    "pattern",
    *[f"ops_{c}" for c in CATEGORIES],
    "first_io",
    "last_io",
    "eof_at",
    "seg_ops",
    "ctr_ops",
    "source",
]


def _segment_streams(
    rd: RunData, sp: Spatial
) -> tuple[pd.DataFrame, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Segments per (actor, file), reduced in stream order (actor, file, op, time): counts,
    bytes, times, extent, end-of-file marks, spatial categories and byte coverage; and their
    byte ranges merged per stream (:attr:`TablesPart.spans`)."""
    ops = rd.ops
    order, ks = sp.order, sp.key
    nops = len(order)
    af_s = ks >> 1  # stream key = ((actor + 1) * nf + file) * 2 + op
    new = np.ones(nops, bool)
    new[1:] = af_s[1:] != af_s[:-1]
    starts = np.flatnonzero(new)
    n = len(starts)
    idx = np.cumsum(new) - 1
    del new
    op_s = ops.op[order]
    is_r = op_s == READ
    ln = ops.length[order]
    st = ops.start[order]
    en = ops.end[order]
    off = ops.offset[order]

    def red(ufunc, x: np.ndarray, empty_dtype) -> np.ndarray:
        return ufunc.reduceat(x, starts) if n else np.empty(0, empty_dtype)

    dur = en - st
    seg = pd.DataFrame(
        {
            "key": af_s[starts],
            "seg_reads": red(np.add, is_r.astype(np.int64), np.int64),
            "seg_writes": red(np.add, (~is_r).astype(np.int64), np.int64),
            "seg_bytes_read": red(np.add, np.where(is_r, ln, 0), np.int64),
            "seg_bytes_written": red(np.add, np.where(is_r, 0, ln), np.int64),
            "seg_read_time": red(np.add, np.where(is_r, dur, 0.0), np.float64),
            "seg_write_time": red(np.add, np.where(is_r, 0.0, dur), np.float64),
            "first_io": red(np.minimum, st, np.float64),
            "last_io": red(np.maximum, en, np.float64),
        }
    )
    del dur, st, en
    known = off >= 0
    seg["seg_extent"] = red(np.maximum, np.where(known, off + ln, -1), np.int64)
    # Zero-length reads mark where a rank met end of file: the file's size at that time.
    seg["eof_at"] = red(np.maximum, np.where(is_r & (ln == 0) & known, off, -1), np.int64)
    cats = np.bincount(idx * len(CATEGORIES) + sp.cat[order], minlength=n * len(CATEGORIES))
    cats = cats.reshape(n, len(CATEGORIES))
    for i, c in enumerate(CATEGORIES):
        seg[f"ops_{c}"] = cats[:, i]
    del cats, is_r, op_s
    # Offset coverage per stream (actor, file, direction): bytes touched at least once. The
    # merged byte ranges also serve the sharing between ranks and the per-node figures.
    new_stream = np.ones(nops, bool)
    new_stream[1:] = ks[1:] != ks[:-1]
    sid = np.cumsum(new_stream) - 1
    skeys = ks[new_stream]
    del new_stream
    ms, mlo, mhi = intervals.merge(sid[known], off[known], (off + ln)[known])
    del sid, known, off, ln
    mk = skeys[ms]
    m_af = np.searchsorted(seg["key"].to_numpy(), mk >> 1)
    m_len = (mhi - mlo).astype(np.float64)
    rmask = (mk & 1) == READ
    seg["seg_read_coverage"] = np.bincount(m_af[rmask], weights=m_len[rmask], minlength=n).astype(
        np.int64
    )
    seg["seg_write_coverage"] = np.bincount(
        m_af[~rmask], weights=m_len[~rmask], minlength=n
    ).astype(np.int64)
    del m_af, m_len, rmask, idx

    return seg, (mk, mlo, mhi)


def _counter_keys(rd: RunData, nf: int) -> np.ndarray:
    """The (actor, file) stream key of each counter record."""
    c = rd.counters
    return (c["actor"].to_numpy(np.int64) + 1) * nf + c["file"].to_numpy(np.int64)


def _counter_streams(rd: RunData, nf: int) -> tuple[pd.DataFrame, int]:
    """Counters per (actor, file) (columns ``ctr_*``; the size bins apart, :func:`_size_bins`),
    and the POSIX reads + writes counted."""
    c = rd.counters
    if not len(c):
        return pd.DataFrame({"key": np.empty(0, np.int64)}), 0
    agg = {k: "sum" for k in SUMMED_METRICS} | {
        "max_byte_read": "max",
        "max_byte_written": "max",
        "open_start": "min",
        "close_end": "max",
    }
    # grouped by a key array, not a key column: assign() would copy every record (GBs)
    ctr = c[list(agg)].groupby(_counter_keys(rd, nf), sort=False).agg(agg)
    ctr = ctr.rename(columns=lambda k: f"ctr_{k}").rename_axis("key").reset_index()
    posix = (c["module"] == rd.modules.index("POSIX")) if "POSIX" in rd.modules else None
    ctr_posix_ops = (
        int(c.loc[posix, "reads"].sum() + c.loc[posix, "writes"].sum()) if posix is not None else 0
    )
    return ctr, ctr_posix_ops


def _size_bins(rd: RunData, fr: _Columns, st: _Aligned) -> None:
    """Darshan's request-size histogram per (actor, file) (``ctr_size_<read|write>_<bin>``),
    one column at a time, then out of the per-record counters (no later step reads them)."""
    c = rd.counters
    names = [f"size_{d}_{b}" for d in ("read", "write") for b in SIZE_BINS]
    if not len(c) or names[0] not in c:
        return
    at = np.searchsorted(st.key, _counter_keys(rd, st.nf))
    for name in names:
        v = c[name].to_numpy(np.int64)
        total = np.zeros(len(st), np.int64)
        np.add.at(total, at, v)
        fr[f"ctr_{name}"] = total
    for name, v in _straddling_small(c, rd.settings.small_request_bytes).items():
        total = np.zeros(len(st), np.int64)
        np.add.at(total, at, v)
        fr[f"ctr_{name}"] = total
    rd.counters = c.drop(columns=names)


def _straddling_small(c: pd.DataFrame, thr: int) -> dict[str, np.ndarray]:
    """Per record and direction, how many requests of the Darshan bin that holds the small
    threshold (100K_1M for 1 MiB: 1 MiB requests and smaller ones together) are known to be
    smaller (``small_<op>_lo``) and may be (``small_<op>_hi``), from the four most common
    access sizes (ACCESS1..4, reads and writes together): a size seen only in one direction
    belongs to it, the rest of the bin is undecided."""
    b = next((i for i in range(9) if SIZE_BIN_LOWER[i] < thr <= SIZE_BIN_LOWER[i + 1]), None)
    if b is None:  # the threshold is a bin edge: whole bins decide
        return {}
    lo_edge, hi_edge = SIZE_BIN_LOWER[b], SIZE_BIN_LOWER[b + 1]
    k_small = np.zeros(len(c), np.int64)
    k_known = np.zeros(len(c), np.int64)
    for i in (1, 2, 3, 4):
        if f"access{i}_size" not in c:
            continue
        size = c[f"access{i}_size"].to_numpy(np.int64)
        n = np.maximum(c[f"access{i}_count"].to_numpy(np.int64), 0)
        inside = (size > lo_edge) & (size <= hi_edge) if b else (size >= 0) & (size <= hi_edge)
        k_known += np.where(inside, n, 0)
        k_small += np.where(inside & (size < thr), n, 0)
    n_r = c[f"size_read_{SIZE_BINS[b]}"].to_numpy(np.int64)
    n_w = c[f"size_write_{SIZE_BINS[b]}"].to_numpy(np.int64)
    unknown = np.maximum(n_r + n_w - k_known, 0)
    out = {}
    for op, mine, other in (("read", n_r, n_w), ("write", n_w, n_r)):
        out[f"small_{op}_lo"] = np.minimum(np.maximum(k_small - other, 0), mine)
        out[f"small_{op}_hi"] = np.minimum(mine, k_small + unknown)
    return out


class _Aligned:
    """The segment and counter streams on one sorted key, (actor, file): ``col(name, fill)``
    is a stream column (``seg_*``, ``ctr_*``, or a segment column such as ``first_io``) as one
    array over the keys, ``fill`` where that side has no row."""

    def __init__(self, seg: pd.DataFrame, ctr: pd.DataFrame, nf: int) -> None:
        self.seg, self.ctr = seg, ctr
        self.key = distinct(np.concatenate([seg["key"].to_numpy(), ctr["key"].to_numpy()]))
        self.seg_at = np.searchsorted(self.key, seg["key"].to_numpy())
        self.ctr_at = np.searchsorted(self.key, ctr["key"].to_numpy())
        self.has_seg = np.zeros(len(self.key), bool)
        self.has_seg[self.seg_at] = True
        self.has_ctr = np.zeros(len(self.key), bool)
        self.has_ctr[self.ctr_at] = True
        self.nf = nf

    def __len__(self) -> int:
        return len(self.key)

    def col(self, name: str, fill: Any = 0) -> np.ndarray:
        side, at = (self.ctr, self.ctr_at) if name.startswith("ctr_") else (self.seg, self.seg_at)
        if name not in side:
            return np.full(len(self.key), fill)
        v = side[name].to_numpy()
        out = np.full(len(self.key), fill, dtype=np.result_type(v.dtype, np.min_scalar_type(fill)))
        out[at] = v
        return out


class _Columns(dict):
    """The (rank, file) table's columns as they are made; counts kept as int32 when they fit
    (:func:`_narrow`) from the start, so the table is never whole at twice its size."""

    def __setitem__(self, name: str, a: np.ndarray) -> None:
        super().__setitem__(name, _narrow(name, a))


def _merge_streams(rd: RunData, st: _Aligned, meta: pd.DataFrame | None) -> _Columns:
    """The columns of one row per (actor, file) from segments and counters, the larger of
    the two per metric; the metadata columns from ``meta`` (per key) where it is given."""
    col = st.col
    file = (st.key % st.nf).astype(np.int32)
    cols = _Columns()
    cols["actor"] = (st.key // st.nf - 1).astype(np.int32)
    cols["file"] = file
    cols["source"] = labels(
        ("both", "segments", "counters"),
        np.where(st.has_seg & st.has_ctr, 0, np.where(st.has_seg, 1, 2)),
    )
    for m in ("reads", "writes", "bytes_read", "bytes_written"):
        cols[m] = np.maximum(col(f"seg_{m}"), col(f"ctr_{m}")).astype(np.int64)
    for m in ("read_time", "write_time"):
        cols[m] = np.maximum(col(f"seg_{m}", 0.0), col(f"ctr_{m}", 0.0))
    for m in KINDS:
        cols[m] = col(f"ctr_{m}").astype(np.int64)
    cols["meta_time"] = col("ctr_meta_time", 0.0).astype(np.float64)
    if meta is not None:
        _event_metadata(cols, st.key, meta)
    cols["class"] = rd.file_class[file] if len(file) else np.empty(0, np.int8)
    return cols


def _event_metadata(cols: _Columns, key: np.ndarray, meta: pd.DataFrame) -> None:
    """The metadata columns from calls traced as events, on the (actor, file) rows that read
    or wrote: a file only stat'ed or opened (a class folder scanned, say) would otherwise
    become a file of its class that moved no byte; the rank's totals keep those calls."""
    if not len(key):
        return
    mk = meta.index.to_numpy()
    at = np.minimum(np.searchsorted(key, mk), len(key) - 1)
    hit = key[at] == mk
    for m in (*KINDS, "meta_time"):
        cols[m][at[hit]] = meta[m].to_numpy()[hit]


#: per-(rank, file) counts held as int32 when small enough (halves most of a table that is
#: gigabytes at a million files); written out as int64 (:func:`widen`)
_COUNTS = ("reads", "writes", "opens", "stats", "seeks", "fsyncs", "seg_ops", "ctr_ops")
_NARROW_MAX = 1 << 28  # headroom: sums of a few such columns still fit in int32


def _narrow(name: str, a: np.ndarray) -> np.ndarray:
    count = name in _COUNTS or name.startswith(("ops_", "ctr_size_"))
    if count and a.dtype == np.int64 and (not len(a) or (a.min() >= 0 and a.max() < _NARROW_MAX)):
        return a.astype(np.int32)
    return a


def widen(fr: pd.DataFrame) -> pd.DataFrame:
    """``fr`` with the int32 counts of :func:`_narrow` back as int64 (the tables' schema)."""
    return fr.astype(
        {
            c: np.int64
            for c in fr.columns
            if fr[c].dtype == np.int32 and c not in ("actor", "rank", "file")
        }
    )


def with_shares(fr: pd.DataFrame) -> pd.DataFrame:
    """``fr`` with ``frac_<category>`` beside ``ops_<category>``: each category's share of
    the row's operations (computed for the rows written, not held for every row)."""
    at = fr.columns.get_loc(f"ops_{CATEGORIES[0]}")
    shares = fractions(fr[[f"ops_{c}" for c in CATEGORIES]].to_numpy())
    fr = fr.copy()
    for i, c in enumerate(CATEGORIES):
        fr.insert(at + i, f"frac_{c}", shares[:, i])
    return fr


def _coverage_and_pattern(fr: _Columns, st: _Aligned) -> None:
    """Extents, byte coverage, spatial categories and first and last I/O of each row (what
    depends on the file's size: :func:`sized`)."""
    col, has_seg = st.col, st.has_seg
    # The furthest byte the row touched, by segment or by counter (+1: Darshan's MAX_BYTE is
    # the last byte offset).
    fr["extent"] = np.maximum.reduce(
        [
            col("seg_extent", -1),
            np.where(col("ctr_bytes_read") > 0, col("ctr_max_byte_read", -1) + 1, -1),
            np.where(col("ctr_bytes_written") > 0, col("ctr_max_byte_written", -1) + 1, -1),
        ]
    ).astype(np.int64)
    # Coverage: exact from segments; from counters only an upper bound (bytes, furthest byte).
    for d, done in (("read", "read"), ("write", "written")):
        fr[f"{d}_coverage"] = np.where(
            has_seg,
            col(f"seg_{d}_coverage"),
            np.minimum(
                col(f"ctr_bytes_{done}"),
                np.where(col(f"ctr_bytes_{done}") > 0, col(f"ctr_max_byte_{done}", -1) + 1, 0),
            ),
        ).astype(np.int64)
    fr["coverage_source"] = labels(("segments", "counters"), np.where(has_seg, 0, 1))
    for cname in CATEGORIES:  # (their shares: with_shares, for the table)
        fr[f"ops_{cname}"] = col(f"ops_{cname}").astype(np.int64)
    fr["first_io"] = col("first_io", np.nan).astype(np.float64)
    fr["last_io"] = col("last_io", np.nan).astype(np.float64)
    fr["eof_at"] = col("eof_at", -1).astype(np.int64)
    fr["seg_ops"] = (col("seg_reads") + col("seg_writes")).astype(np.int64)
    fr["ctr_ops"] = (col("ctr_reads") + col("ctr_writes")).astype(np.int64)


def sized(fr: Any, nf: int, whole_file_coverage: float) -> None:
    """The (rank, file) columns that depend on a file's size, the furthest byte any rank
    touched: ``file_size``, ``read_whole`` / ``write_whole``, ``read_coverage_frac`` and
    ``pattern``, from the rows' extents, coverage, operations and categories. ``fr`` (columns
    by name, a dict or a DataFrame) holds every row of its files: analysed in parts, a
    file's rows come from every part before its size is known."""
    file = np.asarray(fr["file"])
    size = np.full(nf, -1, np.int64)
    np.maximum.at(size, file, np.asarray(fr["extent"]))
    fsz = size[file].clip(min=0)
    fr["file_size"] = fsz
    read_cov, write_cov = np.asarray(fr["read_coverage"]), np.asarray(fr["write_coverage"])
    read_whole = (fsz > 0) & (read_cov >= whole_file_coverage * fsz)
    write_whole = (fsz > 0) & (write_cov >= whole_file_coverage * fsz)
    fr["read_whole"], fr["write_whole"] = read_whole, write_whole
    fr["read_coverage_frac"] = np.divide(read_cov, fsz, out=np.zeros(len(fsz)), where=fsz > 0)
    cat_counts = (
        np.stack([np.asarray(fr[f"ops_{c}"]) for c in CATEGORIES], axis=1)
        if len(fsz)
        else np.zeros((0, len(CATEGORIES)), np.int64)
    )
    no_ops = (np.asarray(fr["reads"]) + np.asarray(fr["writes"])) == 0
    n = len(CATEGORIES)  # codes past the categories: none, unknown, whole-file
    code = np.select(
        [
            no_ops,
            np.asarray(fr["coverage_source"]) == "counters",
            read_whole | write_whole,
            cat_counts.sum(axis=1) == 0,
        ],
        [n, n + 1, n + 2, n],
        default=fractions(cat_counts).argmax(axis=1) if len(fsz) else np.empty(0, np.int64),
    )
    fr["pattern"] = labels((*CATEGORIES, "none", "unknown", "whole-file"), code)


def _posix_segments(rd: RunData) -> int:
    """The traced POSIX operations."""
    ops = rd.ops
    assert ops.module is not None, "build_tables runs before the per-op columns are released"
    if "POSIX" not in rd.modules:
        return 0
    return int((ops.module == rd.modules.index("POSIX")).sum())


def rank_rows(rd: RunData, fr: pd.DataFrame, ops) -> pd.DataFrame:
    """One row per rank: what the rank's own rows and operations give (a part of the run's
    ranks gives its ranks' rows whole); :func:`finish_ranks` adds what the run decides."""
    actor = fr["actor"].to_numpy()
    actors = sorted(set(rd.actor_host) | set(np.unique(actor[actor >= 0]).tolist()))
    r = pd.DataFrame(index=pd.Index(np.array(actors, dtype=np.int64), name="rank"))
    # Grouped over the whole (rank, file) table; assigning to ``r`` drops the unattributed
    # group (-1). A copy of the ranks' rows first was 120 MB at a million files.
    g = fr.groupby("actor")
    for m in SUMMED_METRICS:
        r[m] = g[m].sum()
    r["files"] = g["file"].nunique()
    for ci, cname in enumerate(rd.class_names):
        gc = fr.loc[fr["class"] == ci, ["actor", "bytes_read", "bytes_written"]]
        by = gc.groupby("actor")
        r[f"bytes_read_{cname}"] = by["bytes_read"].sum()
        r[f"bytes_written_{cname}"] = by["bytes_written"].sum()
    r = r.fillna(0)
    for c in r.columns:
        if not c.endswith("_time"):
            r[c] = r[c].astype(np.int64)
    r.insert(0, "host", [rd.actor_host.get(a, "") for a in r.index])
    # Processes per rank (the rank itself plus forked workers), a million operations at a
    # time: the (rank, pid) keys of ten million at once were 200 MB of temporaries.
    seen = _rank_pids(ops)
    ck = rd.counters
    ck = ck[ck["actor"] >= 0]
    seen = np.union1d(
        seen, (ck["actor"].to_numpy(np.int64) << 40) | (ck["pid"].to_numpy() & ((1 << 40) - 1))
    )
    per = pd.Series(seen >> 40).value_counts()
    r["processes"] = per.reindex(r.index).fillna(0).astype(np.int64).to_numpy()
    # I/O wall time: the union of the rank's operations in time (overlapping ops of workers
    # count once); operations known only from counters add their cumulative time.
    na = (max(actors) + 1) if actors else 0
    ga, glo, ghi = rd.io_spans()
    union = np.bincount(ga, weights=ghi - glo, minlength=na)[:na]
    ctr_only = (
        fr.loc[fr["source"] == "counters", ["actor", "read_time", "write_time"]]
        .groupby("actor")[["read_time", "write_time"]]
        .sum()
        .sum(axis=1)
    )
    r["io_time"] = union[r.index.to_numpy()] + ctr_only.reindex(r.index).fillna(0).to_numpy()
    # actor + 1: the unattributed (-1) fall into bin 0, dropped, with no filtered copies
    busy = np.bincount(ops.actor + 1, weights=ops.end - ops.start, minlength=na + 1)[1:]
    r["io_busy_time"] = busy[r.index.to_numpy()] + ctr_only.reindex(r.index).fillna(0).to_numpy()
    first = g["first_io"].min()
    last = g["last_io"].max()
    r["first_io"] = first.reindex(r.index).to_numpy()
    r["last_io"] = last.reindex(r.index).to_numpy()
    moved = (r["bytes_read"] + r["bytes_written"]).to_numpy(np.float64)
    t = r["io_time"].to_numpy()
    r["bandwidth"] = np.divide(moved, t, out=np.zeros(len(r)), where=t > 0)
    return r.reset_index()


def finish_ranks(r: pd.DataFrame, run_time: float, s: AnalysisSettings) -> pd.DataFrame:
    """The ranks table: :func:`rank_rows` of every rank, with each rank's share of the run's
    time and whether it straggles behind the others."""
    r = r.copy()
    t = r["io_time"].to_numpy()
    # unknown (not 0) for a run of unknown length; over 1 is no share of the run: call times
    # summed past it (threads, or wrong times)
    share = r["io_time"] / run_time if run_time > 0 else pd.Series(np.nan, index=r.index)
    r["io_share"] = share.where(share <= 1)
    # The median of the ranks that do I/O: where MPI-IO's aggregators do all of it, the
    # median rank does none, and every aggregator would be a "straggler".
    doing_io = t[t > 0]
    med = float(np.median(doing_io)) if len(doing_io) > 1 else np.inf
    r["straggler"] = (t > med * (1 + s.straggler_excess)) & (t >= s.straggler_min_io_time_s)
    return r


def _rank_pids(ops, step: int = 1 << 20) -> np.ndarray:
    """The distinct (actor << 40 | pid) keys of the ranks' operations (actor >= 0)."""
    seen = [np.empty(0, np.int64)]
    for i in range(0, len(ops.actor), step):
        a, p = ops.actor[i : i + step], ops.pid[i : i + step]
        k = (a.astype(np.int64) << 40) | (p & ((1 << 40) - 1))
        seen.append(distinct(k[a >= 0]))
    return distinct(np.concatenate(seen))
