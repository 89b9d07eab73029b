"""Files shared by all ranks of an MPI job, which Darshan reduces to one record (rank -1).

Darshan (unless ``DARSHAN_DISABLE_SHARED_REDUCTION`` is set) folds the records of a file
that every rank opened into one: counters summed over the ranks, plus what the fastest and
the slowest rank (by I/O time on the file) moved and spent, and the variance across ranks.
Counted only in totals, such files vanished from every per-rank figure: a job doing all its
I/O on shared files had "0 ranks with I/O". Here each reduced record is handed to the ranks:

* where DXT traced the file (DXT records stay per rank), the segments already say what each
  rank did; the record keeps, at rank -1, only what the segments do not cover (metadata
  calls, operations after DXT ran out of memory), so no byte is counted twice;
* otherwise the record becomes one row per rank: the fastest and slowest ranks get exactly
  what Darshan kept of them, every other rank an equal share of the rest. Counts are split
  in whole numbers that add up to the record's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from iosweep.columns import distinct

#: counts of some of a record's reads or writes (collective, misaligned, sequential ...)
SUBCOUNTS = (
    "collective_reads",
    "collective_writes",
    "nonblocking_reads",
    "nonblocking_writes",
    "mem_not_aligned",
    "file_not_aligned",
    "seq_reads",
    "seq_writes",
    "consec_reads",
    "consec_writes",
)
#: Darshan's four most common request sizes of a record, and their counts
ACCESS_COLUMNS = tuple(f"access{i}_{k}" for i in (1, 2, 3, 4) for k in ("size", "count"))
#: counter columns split in proportion to each rank's bytes (time where no bytes moved)
_BY_VOLUME = (
    "reads",
    "writes",
    "bytes_read",
    "bytes_written",
    *SUBCOUNTS,
    *(c for c in ACCESS_COLUMNS if c.endswith("_count")),
)
#: counts every rank makes about equally (each opens the shared file)
_EVENLY = ("opens", "stats", "seeks", "fsyncs")
_TIMES = ("read_time", "write_time", "meta_time")
#: what a reduced record keeps of its fastest and slowest rank (store columns)
SHARED_COLUMNS = (
    "fastest_rank",
    "fastest_rank_bytes",
    "fastest_rank_time",
    "slowest_rank",
    "slowest_rank_bytes",
    "slowest_rank_time",
    "variance_rank_bytes",  # (population variance of the ranks' bytes on the file)
)
#: under this share of the ranks, a record's bytes went to a few ranks (MPI-IO's collective
#: buffering aggregators): iosweep's even split of the rest would be no figure of theirs
FEW_RANKS = 0.5


@dataclass
class SharedRecords:
    """What became of the reduced records of a run (summary: ``trace.shared_records``)."""

    records: int = 0  # reduced records of analysed modules
    spread: int = 0  # handed to the ranks from Darshan's fastest/slowest-rank counters
    traced: int = 0  # the file's per-rank DXT segments used; the record kept what they miss
    ranks: int = 0  # ranks each spread record was shared among
    # spread records whose bytes Darshan's byte variance puts on a few ranks (FEW_RANKS):
    # which ranks is not recorded, so their per-rank bytes are not known
    concentrated: int = 0
    concentrated_bytes: int = 0
    movers: int = 0  # about how many ranks moved the bytes of the largest of them
    concentrated_paths: list[str] = field(default_factory=list)  # (the first 20)
    # metadata seconds the traced records kept at rank -1: a sum over the ranks that DXT
    # (which traces reads and writes) cannot split
    traced_meta_time: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def reduced(cdf: pd.DataFrame) -> np.ndarray:
    """Rows of ``cdf`` that are reduced shared records (rank -1 with a fastest rank)."""
    return (cdf["actor"].to_numpy() < 0) & (cdf["fastest_rank"].to_numpy() >= 0)


def share_records(
    cdf: pd.DataFrame,
    seg: dict[str, np.ndarray],
    keep: np.ndarray,
    n_ranks: int,
    names: Sequence[str],
) -> tuple[pd.DataFrame, SharedRecords]:
    """``cdf`` with its reduced records handed to the ``n_ranks`` ranks (module docstring);
    ``names``: the paths its file codes index."""
    red = reduced(cdf)
    out = SharedRecords(records=int(red.sum()))
    if not out.records or n_ranks < 1:
        return cdf, out
    traced = _traced(cdf, red, seg, keep)
    out.traced = int(traced.sum())
    if out.traced:
        cdf = _subtract_segments(cdf, traced, seg, keep)
        if "meta_time" in cdf:
            out.traced_meta_time = float(np.nan_to_num(cdf.loc[traced, "meta_time"]).sum())
    spread = red & ~traced
    out.spread = int(spread.sum())
    if out.spread:
        _concentration(cdf[spread], n_ranks, names, out)
        rows = spread_records(cdf[spread], n_ranks)
        cdf = pd.concat([cdf[~spread], rows], ignore_index=True)
        out.ranks = n_ranks
    return cdf, out


def variance_movers(rec: pd.DataFrame, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For each reduced record, about how many of the ``n`` ranks moved its bytes besides
    the fastest and slowest ones, from Darshan's counters alone: the number of equal movers
    that gives both the rest's bytes R and, with the variance, their sum of squares Q
    (R^2 / Q: every other rank when they moved equal parts, 55 when 55 ranks moved 9.8 GB
    each and the rest none); NaN where the record has no variance or its counters disagree.
    And whether a rest is left at all (none: the named ranks' bytes are all there is)."""
    total = _total(rec, "bytes")
    var = (
        rec["variance_rank_bytes"].to_numpy(np.float64)
        if "variance_rank_bytes" in rec
        else np.full(len(rec), np.nan)
    )
    fast = rec["fastest_rank"].to_numpy(np.int64)
    f = np.nan_to_num(rec["fastest_rank_bytes"].to_numpy(np.float64))
    s = np.nan_to_num(rec["slowest_rank_bytes"].to_numpy(np.float64))
    f = np.where(fast == rec["slowest_rank"].to_numpy(np.int64), 0.0, f)  # (one rank: once)
    mean = total / n
    sum_sq = n * (var + mean**2) - f**2 - s**2  # the rest's sum of squares (population)
    rest = total - f - s
    left = rest > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        others = np.where(left, rest**2 / sum_sq, 0.0)
    ok = ~np.isnan(var) & (~left | (sum_sq > 0))
    return np.where(ok, np.clip(others, 0, n), np.nan), left


def _concentration(rec: pd.DataFrame, n: int, names: Sequence[str], out: SharedRecords) -> None:
    """The spread records whose rest of bytes went to a few ranks, not to every other one
    (:func:`variance_movers`)."""
    movers, left = variance_movers(rec, n)
    few = left & (movers < FEW_RANKS * n)  # (NaN: not known, not counted)
    if not few.any():
        return
    total = _total(rec, "bytes")
    # the fastest and slowest ranks count where they moved bytes (once where they are one)
    two = rec["fastest_rank"].to_numpy() != rec["slowest_rank"].to_numpy()
    named = (two & (rec["fastest_rank_bytes"].to_numpy() > 0)).astype(int)
    named += rec["slowest_rank_bytes"].to_numpy() > 0
    out.concentrated = int(few.sum())
    out.concentrated_bytes = int(total[few].sum())
    at = np.argmax(np.where(few, total, -1))
    out.movers = round(float(movers[at])) + int(named[at])
    out.concentrated_paths = [names[f] for f in rec["file"].to_numpy()[few][:20]]


def _file_module(file: np.ndarray, module: np.ndarray) -> np.ndarray:
    """One int64 key per (file, module) code pair, for records and segments alike."""
    return file.astype(np.int64) << 16 | module.astype(np.int64)


def _traced(
    cdf: pd.DataFrame, red: np.ndarray, seg: dict[str, np.ndarray], keep: np.ndarray
) -> np.ndarray:
    """Reduced records whose (file, module) has kept DXT segments of some rank."""
    ranked = keep & (seg["actor"] >= 0)
    pairs = distinct(_file_module(seg["file"][ranked], seg["module"][ranked]))
    return red & np.isin(_file_module(cdf["file"].to_numpy(), cdf["module"].to_numpy()), pairs)


def _subtract_segments(
    cdf: pd.DataFrame, traced: np.ndarray, seg: dict[str, np.ndarray], keep: np.ndarray
) -> pd.DataFrame:
    """The traced records less what their files' segments (all ranks) already count."""
    cdf = cdf.copy()
    rows = np.flatnonzero(traced)
    key = _file_module(cdf["file"].to_numpy()[rows], cdf["module"].to_numpy()[rows])
    ukey, record_key = np.unique(key, return_inverse=True)
    s_key = _file_module(seg["file"], seg["module"])
    take = keep & (seg["actor"] >= 0) & np.isin(s_key, ukey)
    at = np.searchsorted(ukey, s_key[take])
    length, op = seg["length"][take], seg["op"][take]
    dur = np.maximum(seg["end"][take] - seg["start"][take], 0.0)
    for name, op_code, weight in (
        ("reads", 0, None),
        ("writes", 1, None),
        ("bytes_read", 0, length),
        ("bytes_written", 1, length),
        ("read_time", 0, dur),
        ("write_time", 1, dur),
    ):
        w = np.where(op == op_code, 1 if weight is None else weight, 0)
        covered = np.bincount(at, weights=w, minlength=len(ukey))[record_key]
        col = cdf[name].to_numpy().copy()
        col[rows] = np.maximum(col[rows] - covered, 0).astype(col.dtype)
        cdf[name] = col
    return cdf


def spread_records(rec: pd.DataFrame, n: int) -> pd.DataFrame:
    """One row per (record, rank): fastest and slowest as Darshan kept them, the rest even."""
    r = len(rec)
    ranks = np.arange(n)
    fast = rec["fastest_rank"].to_numpy(np.int64)
    slow = rec["slowest_rank"].to_numpy(np.int64)
    byte_w = _weights(rec, "bytes", fast, slow, n)
    time_w = _weights(rec, "time", fast, slow, n)
    # a file that moved no bytes (opened, stat'ed) is shared by time
    vol_w = np.where((_total(rec, "bytes") > 0)[:, None], byte_w, time_w)
    rows: dict[str, np.ndarray] = {}
    for c in rec.columns:
        v = rec[c].to_numpy()
        if c in _BY_VOLUME or c in _EVENLY or c.startswith("size_"):
            w = np.full((r, n), 1.0 / n) if c in _EVENLY else vol_w
            rows[c] = _split_counts(v.astype(np.int64), w).ravel()
        elif c in _TIMES:
            continue  # below: they depend on each other
        else:
            rows[c] = np.repeat(v, n)
    rows |= _split_times(rec, vol_w, time_w)
    rows["actor"] = np.tile(ranks, r).astype(np.int32)
    for c in SHARED_COLUMNS:
        if c in rows:  # per rank now: no longer a reduced record
            rows[c] = np.full(r * n, -1 if c.endswith("rank") else 0, rows[c].dtype)
    return pd.DataFrame(rows, columns=rec.columns)


def _split_times(rec: pd.DataFrame, vol_w: np.ndarray, time_w: np.ndarray) -> dict:
    """Each rank's read, write and metadata seconds on each record. A rank's own time on the
    file is Darshan's (fastest, slowest, the rest evenly: ``time_w``); read and write time go
    to the ranks that moved bytes (``vol_w`` > 0), in proportion to their own time; a rank's
    metadata time is what its own time leaves, scaled to the record's. Splitting all three
    by time alone gave skew-app's only writer (43.6 GB, 264 s) 1.96 s of writes and 262 s
    of metadata."""
    cols = [c for c in _TIMES if c in rec.columns]
    if not cols:
        return {}
    own = record_time(rec)[:, None] * time_w
    movers = own * (vol_w > 0)
    total = movers.sum(axis=1, keepdims=True)
    rw_w = np.where(total > 0, movers / np.where(total > 0, total, 1), time_w)
    out: dict[str, np.ndarray] = {}
    moved = np.zeros_like(own)
    for c in ("read_time", "write_time"):
        if c in cols:
            out[c] = np.nan_to_num(rec[c].to_numpy(np.float64))[:, None] * rw_w
            moved += out[c]
    if "meta_time" in cols:
        meta = np.nan_to_num(rec["meta_time"].to_numpy(np.float64))
        left = np.maximum(own - moved, 0.0)
        total = left.sum(axis=1, keepdims=True)
        w = np.where(total > 0, left / np.where(total > 0, total, 1), time_w)
        out["meta_time"] = meta[:, None] * w
    return {c: v.ravel() for c, v in out.items()}


def record_time(rec: pd.DataFrame) -> np.ndarray:
    """Each record's read + write + metadata seconds: what Darshan's fastest/slowest rank
    times measure."""
    return np.nan_to_num(rec[list(_TIMES)].to_numpy(np.float64)).sum(axis=1)


def _total(rec: pd.DataFrame, what: str) -> np.ndarray:
    if what == "bytes":
        return (rec["bytes_read"] + rec["bytes_written"]).to_numpy(np.float64)
    return record_time(rec)


def _weights(rec: pd.DataFrame, what: str, fast: np.ndarray, slow: np.ndarray, n: int):
    """Each rank's share of a record's ``what`` (bytes or time): the fastest and slowest
    ranks' own, the others' the remainder evenly; rows sum to 1."""
    total = _total(rec, what)
    suffix = "_bytes" if what == "bytes" else "_time"
    f = np.nan_to_num(rec[f"fastest_rank{suffix}"].to_numpy(np.float64))
    s = np.nan_to_num(rec[f"slowest_rank{suffix}"].to_numpy(np.float64))
    r = len(rec)
    w = np.zeros((r, n))
    idx = np.arange(r)
    valid = (fast < n) & (slow < n)
    named = np.where(fast == slow, 1, 2)  # one rank both fastest and slowest: counted once
    rest = np.maximum(total - s - np.where(fast == slow, 0, f), 0.0)
    others = np.maximum(n - named, 0)
    w[:] = np.where(others > 0, rest / np.maximum(others, 1), 0.0)[:, None]
    v = idx[valid]
    w[v, fast[valid]] = f[valid]
    w[v, slow[valid]] = s[valid]
    sums = w.sum(axis=1, keepdims=True)
    even = np.full((r, n), 1.0 / n)
    return np.where(sums > 0, w / np.where(sums > 0, sums, 1), even)


def _split_counts(total: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Whole numbers per (record, rank) in proportion to ``w`` that add up to ``total``
    (largest remainders)."""
    exact = total[:, None] * w
    base = np.floor(exact).astype(np.int64)
    short = total - base.sum(axis=1)
    frac = exact - base
    order = np.argsort(-frac, axis=1, kind="stable")
    plus = np.zeros_like(base)
    np.put_along_axis(plus, order, (np.arange(w.shape[1]) < short[:, None]).astype(np.int64), 1)
    return base + plus
