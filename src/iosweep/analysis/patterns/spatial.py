"""Spatial pattern: each operation classified against the previous one of the same stream.

A *stream* is one rank's reads (or writes) of one file, in time order. Each operation is

- ``contiguous``: it starts where the previous one ended (the first at offset 0 counts, as in
  Darshan's CONSEC counters; a zero-length read at end of file after a whole read counts too);
- ``strided``: it jumps forward past the previous end by the same gap as the previous or the
  next operation of the stream (a regular stride);
- ``sequential``: it jumps forward by an irregular gap;
- ``random``: it starts before the previous end (backwards or overlapping: a re-read);
- ``unknown``: the tracer gave no offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis.data import Ops, RunData
from iosweep.analysis.intervals import order_by
from iosweep.analysis.sections import PartIn, PartOut, PartsIn, Section, register

CATEGORIES = ("contiguous", "sequential", "strided", "random", "unknown")
CONTIGUOUS, SEQUENTIAL, STRIDED, RANDOM, UNKNOWN = range(5)


@dataclass
class Spatial:
    cat: np.ndarray  # int8 category per op (original order)
    gap: np.ndarray  # int64 forward gap to the previous op's end (0 for the first op), per op
    order: np.ndarray  # indices of the ops in stream order: (actor, file, op), then time
    key: np.ndarray  # stream key (see stream_key) in stream order


def stream_key(ops: Ops, n_files: int) -> np.ndarray:
    """int64 key of (actor, file, op); actors may be -1 (unattributed)."""
    return ((ops.actor.astype(np.int64) + 1) * n_files + ops.file) * 2 + ops.op


def classify_ops(rd: RunData) -> Spatial:
    ops = rd.ops
    n = len(ops)
    if n == 0:
        e = np.empty(0, np.int64)
        return Spatial(np.empty(0, np.int8), e, e, e)
    key = stream_key(ops, max(len(rd.paths), 1))
    order = order_by(key, rd.time_rank())
    k = key[order]
    del key
    off = ops.offset[order]
    end = off + ops.length[order]
    first = np.empty(n, bool)
    first[0] = True
    first[1:] = k[1:] != k[:-1]
    prev_end = np.empty(n, np.int64)
    prev_end[0] = 0
    prev_end[1:] = end[:-1]
    prev_end[first] = 0  # a stream starts "after byte -1", as Darshan counts it
    prev_known = np.empty(n, bool)
    prev_known[0] = True
    prev_known[1:] = off[:-1] >= 0
    prev_known[first] = True
    del end
    gap = off - prev_end
    known = (off >= 0) & prev_known
    del prev_known, prev_end
    # Regular stride: the same positive gap as the neighbour in the same stream.
    same_prev = np.zeros(n, bool)
    same_prev[1:] = (gap[1:] == gap[:-1]) & ~first[1:] & known[:-1]
    same_next = np.zeros(n, bool)
    same_next[:-1] = same_prev[1:]
    cat = np.full(n, UNKNOWN, np.int8)
    cat[known & (gap == 0)] = CONTIGUOUS
    fwd = known & (gap > 0)
    cat[fwd] = SEQUENTIAL
    cat[fwd & (same_prev | same_next)] = STRIDED
    cat[known & (gap < 0)] = RANDOM
    out_cat = np.empty(n, np.int8)
    out_cat[order] = cat
    out_gap = np.empty(n, np.int64)
    out_gap[order] = np.where(known, gap, 0)
    return Spatial(out_cat, out_gap, order, k)


def fractions(counts: np.ndarray) -> np.ndarray:
    """Row-normalised category counts (rows with no ops stay 0)."""
    tot = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, tot, out=np.zeros_like(counts, dtype=np.float64), where=tot > 0)


def spatial_summary(
    sums: dict[str, int] | None, ops_by_category: np.ndarray, patterns: pd.Series
) -> dict[str, Any]:
    """The run's spatial patterns: the categories of its traced operations and the (rank,
    file) rows' patterns (``patterns``: rows of ranks per pattern); beside them Darshan's own
    counters' (``sums``: :func:`counter_sums`)."""
    total = int(ops_by_category.sum())
    return {
        "counters": counter_patterns(sums),
        "ops": total,
        "ops_by_category": {c: int(ops_by_category[i]) for i, c in enumerate(CATEGORIES)},
        "share_by_category": {
            c: (float(ops_by_category[i] / total) if total else None)
            for i, c in enumerate(CATEGORIES)
        },
        "patterns": {k: int(v) for k, v in patterns.items()},
    }


_COUNTED = [f"{k}{op}s" for op in ("read", "write") for k in ("", "seq_", "consec_")]


def counter_sums(rd: RunData) -> dict[str, int] | None:
    """Darshan's POSIX access-pattern counters added up (reads, seq_reads, consec_reads and
    the same for writes); None without POSIX records."""
    if "POSIX" not in rd.modules:
        return None
    c = rd.counters[rd.counters["module"] == rd.modules.index("POSIX")]
    return {k: int(c[k].sum()) for k in _COUNTED} if len(c) else None


def add_counter_sums(sums: list[dict[str, int] | None]) -> dict[str, int] | None:
    """:func:`counter_sums` of some parts of a run as the run's."""
    known = [s for s in sums if s is not None]
    return {k: sum(s[k] for s in known) for k in _COUNTED} if known else None


def counter_patterns(sums: dict[str, int] | None) -> dict[str, Any] | None:
    """Darshan's own access-pattern counters, DXT or not (most MPI logs have no DXT): per
    direction, the POSIX calls right after the previous one (consecutive), further on
    (sequential), and the rest (backwards: random, in Drishti's words)."""
    if sums is None:
        return None
    out = {}
    for op in ("read", "write"):
        ops, seq, consec = (sums[f"{k}{op}s"] for k in ("", "seq_", "consec_"))
        out[op] = {
            "ops": ops,
            "consecutive": consec,
            "sequential": max(seq - consec, 0),
            "random": max(ops - seq, 0),
        }
    return out


COUNTER_SUMS = "counter_sums.json"  # a part's counter_sums


def _of_part(part: PartIn, out: PartOut) -> None:
    out.put_json(COUNTER_SUMS, counter_sums(part.rd))


def _of_run(parts: PartsIn) -> dict[str, Any]:
    sums = add_counter_sums(parts.values(COUNTER_SUMS))
    return spatial_summary(sums, parts.rows.ops_by_category, parts.rows.patterns)


SECTION = register(Section("spatial", _of_part, _of_run))
