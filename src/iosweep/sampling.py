"""Deterministic stratified sampling, shared by the analysis (which writes the sample the report
plots) and the report (which may draw fewer points than the analysis kept)."""

from __future__ import annotations

import numpy as np


def allocate(counts: np.ndarray, k: int) -> np.ndarray:
    """How many of each stratum to keep: at least a fair share each, the rest by size."""
    counts = np.asarray(counts, np.int64)
    if counts.sum() <= k:
        return counts.copy()
    floor = np.minimum(counts, max(k // (4 * len(counts)), 1))
    rest = k - floor.sum()
    extra = counts - floor
    add = np.floor(extra * (rest / extra.sum())).astype(np.int64) if extra.sum() else extra * 0
    return np.minimum(floor + add, counts)


def pick(rank: np.ndarray, start: np.ndarray, strata: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of at most ``k`` rows: :func:`allocate` per stratum, evenly spaced in
    (rank, start) order within each."""
    idx = np.arange(len(rank))
    if len(idx) <= k:
        return idx
    order = idx[np.lexsort((start, rank))]
    s = strata[order]
    ids, counts = np.unique(s, return_counts=True)
    picked = []
    for sid, q in zip(ids, allocate(counts, k), strict=True):
        members = order[s == sid]
        if q >= len(members):
            picked.append(members)
        elif q > 0:
            picked.append(members[np.linspace(0, len(members) - 1, q).round().astype(np.int64)])
    return np.sort(np.concatenate(picked)) if picked else idx[:0]
