"""Vectorised interval arithmetic (byte ranges and time spans), grouped by an integer key."""

from __future__ import annotations

import numpy as np
import pandas as pd

_LIMIT = 1 << 62


def order_by(group: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Indices sorting by (group, rank), ``rank`` a non-negative int64 order key < len(rank).

    One argsort of a composite key: much faster than np.lexsort on millions of rows.
    """
    n = len(group)
    if n == 0:
        return np.empty(0, np.int64)
    g = group.astype(np.int64, copy=False)
    gmin = int(g.min())
    if (int(g.max()) - gmin + 1) * n < _LIMIT:
        return np.argsort((g - gmin) * n + rank)
    return np.lexsort((rank, g))


def rank_of(x: np.ndarray) -> np.ndarray:
    """Position of each value in sorted order (a dense int64 sort key for order_by)."""
    r = np.empty(len(x), np.int64)
    r[np.argsort(x, kind="stable")] = np.arange(len(x))
    return r


def _positions(group: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Map each group onto its own stretch of one line, so one sort and one running max serve
    all groups: position = group_index * span + value. Exact for integers; for floats the
    shift only decides the merging (lengths are taken from the original values)."""
    g = group.astype(np.int64, copy=False)
    gmin = int(g.min())
    gi = g - gmin
    if np.issubdtype(lo.dtype, np.integer):
        lmin = int(lo.min())
        span = int(hi.max()) - lmin + 1
        if (int(gi.max()) + 1) * span >= _LIMIT:
            return None
        base = gi * span - lmin
        return base + lo, base + hi
    flo = float(lo.min())
    shift = float(hi.max()) - flo + 1.0
    fbase = gi * shift - flo
    return fbase + lo, fbase + hi


def _sorted(group: np.ndarray, lo: np.ndarray) -> bool:
    """Already ordered by (group, lo)? Common: offsets of sequential streams, times of a rank."""
    if len(lo) < 2:
        return True
    dg = group[1:] - group[:-1] if group.dtype.kind == "i" else np.diff(group.astype(np.int64))
    return bool(np.all((dg > 0) | ((dg == 0) & (lo[1:] >= lo[:-1]))))


def merge(
    group: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of intervals [lo, hi) within each group: (group, lo, hi) sorted, disjoint per group.

    Touching intervals are merged. Empty intervals (hi <= lo) are dropped.
    """
    ok = hi > lo
    if not ok.all():
        group, lo, hi = group[ok], lo[ok], hi[ok]
    if len(lo) == 0:
        return group[:0], lo[:0], hi[:0]
    if not _sorted(group, lo):
        pos = _positions(group, lo, hi)
        # stable: Timsort merges the sorted runs such input is made of (a rank's times, a
        # union so far beside a part's) in linear time; 6x quicksort's speed on two runs
        order = np.argsort(pos[0], kind="stable") if pos is not None else np.lexsort((lo, group))
        del pos
        group, lo, hi = group[order], lo[order], hi[order]
        del order
    # Now sorted by (group, lo). A new merged interval starts where an interval begins after
    # everything before it in its group ended; on the shared line groups never touch.
    pos = _positions(group, lo, hi)
    new = np.empty(len(lo), bool)
    new[0] = True
    if pos is not None:
        runmax = np.maximum.accumulate(pos[1])
        new[1:] = pos[0][1:] > runmax[:-1]
    else:  # values too wide for one line: running max per group
        runmax = pd.Series(hi).groupby(group, sort=False).cummax().to_numpy()
        new[1:] = (group[1:] != group[:-1]) | (lo[1:] > runmax[:-1])
    del pos, runmax
    starts = np.flatnonzero(new)
    return group[starts], lo[starts], np.maximum.reduceat(hi, starts)


def union_length(group: np.ndarray, lo: np.ndarray, hi: np.ndarray, ngroups: int) -> np.ndarray:
    """Length of the union of each group's intervals (array indexed by group 0..ngroups-1)."""
    g, mlo, mhi = merge(group, lo, hi)
    return np.bincount(g, weights=(mhi - mlo).astype(np.float64), minlength=ngroups)[:ngroups]


def shared_coverage(
    group: np.ndarray,
    member: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    ngroups: int,
    merged: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Per group: length covered by at least one member, and by at least two members.

    ``member`` (e.g. rank) is combined with ``group`` (e.g. file) so a member's own repeated
    accesses do not count as sharing. ``merged=True``: the intervals are already disjoint
    per (group, member).
    """
    if len(lo) == 0:
        z = np.zeros(ngroups)
        return z, z.copy()
    g = group.astype(np.int64)
    if not merged:
        m0 = member.astype(np.int64) - int(member.min())
        mult = int(m0.max()) + 1
        k, lo, hi = merge(g * mult + m0, lo, hi)
        del m0
        g = k // mult
        del k
    n = len(g)
    ev_g = np.concatenate([g, g])
    ev_pos = np.concatenate([lo, hi])
    del g
    # At equal positions ends (-1) come first, so touching ranges are not counted as shared.
    ev_end = np.concatenate([np.zeros(n, np.int64), -np.ones(n, np.int64)])
    pos = _positions(ev_g, ev_pos, ev_pos)
    if (
        pos is not None
        and np.issubdtype(ev_pos.dtype, np.integer)
        and int(pos[0].max()) < _LIMIT // 2
    ):
        order = np.argsort(pos[0] * 2 + ev_end + 1)
    else:
        order = np.lexsort((ev_end + 1, ev_pos, ev_g))
    del pos
    ev_g, ev_pos = ev_g[order], ev_pos[order]
    ev_d = np.where(ev_end[order] < 0, -1, 1).astype(np.int64)
    del order, ev_end
    depth = np.cumsum(ev_d)  # each group nets to zero, so no reset is needed
    del ev_d
    seg_len = np.zeros(len(ev_pos), np.float64)
    same = ev_g[1:] == ev_g[:-1]
    seg_len[:-1] = np.where(same, (ev_pos[1:] - ev_pos[:-1]).astype(np.float64), 0.0)
    one = np.bincount(ev_g, weights=seg_len * (depth >= 1), minlength=ngroups)[:ngroups]
    two = np.bincount(ev_g, weights=seg_len * (depth >= 2), minlength=ngroups)[:ngroups]
    return one, two


def measure_in(mlo: np.ndarray, mhi: np.ndarray, wlo: np.ndarray, whi: np.ndarray) -> np.ndarray:
    """Length of the disjoint sorted intervals (mlo, mhi) inside each window [wlo, whi)."""
    if len(mlo) == 0:
        return np.zeros(len(wlo))
    cum = np.concatenate([[0.0], np.cumsum(mhi - mlo)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # Measure of the union inside (-inf, t].
        i = np.searchsorted(mlo, t, side="right")  # intervals starting at or before t
        full = cum[np.maximum(i - 1, 0)]
        part = np.where(i > 0, np.clip(t - mlo[np.maximum(i - 1, 0)], 0, None), 0.0)
        last_len = np.where(i > 0, mhi[np.maximum(i - 1, 0)] - mlo[np.maximum(i - 1, 0)], 0.0)
        return full + np.minimum(part, last_len)

    wlo = np.asarray(wlo, np.float64)
    whi = np.asarray(whi, np.float64)
    return np.maximum(covered_before(whi) - covered_before(wlo), 0.0)


def intersect(alo, ahi, blo, bhi) -> tuple[np.ndarray, np.ndarray]:
    """Intersection of two unions of disjoint sorted intervals, as disjoint sorted intervals."""
    if len(alo) == 0 or len(blo) == 0:
        return np.empty(0), np.empty(0)
    pts = np.unique(np.concatenate([alo, ahi, blo, bhi]))
    mid = (pts[:-1] + pts[1:]) / 2

    def inside(lo, hi):
        i = np.searchsorted(lo, mid, side="right") - 1
        return (i >= 0) & (mid < hi[np.maximum(i, 0)])

    both = inside(alo, ahi) & inside(blo, bhi)
    return pts[:-1][both], pts[1:][both]
