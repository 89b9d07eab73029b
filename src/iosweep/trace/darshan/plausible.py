"""What a Darshan log's job record and counters can physically hold, checked as the log is
read: a value no runtime writes (a negative count, byte total or time other than the -1 that
marks a counter an older runtime did not collect; a job that ends before it starts, or runs
for longer than a year) is a named ``corrupt`` or ``implausible`` issue naming the log, the
counter, the record and its rank. The value is read as unknown (null), never as 0 or as
given: the statements resting on it are withheld by the analysis, the rest goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from iosweep.columns import distinct
from iosweep.trace.darshan.libutil import log_issue
from iosweep.trace.schema import RUN_CEILING_S, RUN_TIME, Issue

#: a start before 1990 is a clock that was never set (or a time in other units)
EPOCH_FLOOR_S = 631152000.0


#: no process moves file data faster than this (a GPU's own memory: about 3 TB/s; a node's
#: network and page cache: tens of GB/s); above it, a byte count or a time is wrong
RATE_CEILING = 1e12
#: ... judged where a record moved this much (a few bytes in a clock tick say nothing)
RATE_MIN_BYTES = 1 << 30


def job_times(path: Path, start: float, end: float) -> list[Issue]:
    """The job record's start and end: an end before the start is corrupt, a run longer
    than :data:`RUN_CEILING_S` or a start before 1990 implausible (the run's length is then
    not known)."""
    if end < start:
        return [
            log_issue(
                path,
                "corrupt",
                f"the job record ends before it starts (start {start:.0f}, end {end:.0f} s "
                "since the epoch): the run's length is not known",
                field=RUN_TIME,
            )
        ]
    problems = []
    if end - start > RUN_CEILING_S:
        problems.append(f"a run of {(end - start) / (365.25 * 86400):,.0f} years")
    if 0 < start < EPOCH_FLOOR_S:
        problems.append(f"a start {start:.0f} s after the epoch, before 1990")
    if not problems:
        return []
    return [
        log_issue(
            path,
            "implausible",
            f"the job record's times say {' and '.join(problems)} (start {start:.0f}, end "
            f"{end:.0f}): a clock or unit error, so the run's length is not known",
            field=RUN_TIME,
        )
    ]


def impossible_values(
    path: Path,
    module: str,
    columns: dict[str, np.ndarray],
    ids: np.ndarray,
    ranks: np.ndarray,
    names: Mapping[int, str],
) -> list[Issue]:
    """One ``corrupt`` issue per counter of ``module`` holding a value no runtime writes
    (``columns``: counter name -> raw values per record): a count below -1, where -1 marks a
    counter not collected; seconds below 0 other than that -1, or not a number."""
    out: list[Issue] = []
    for counter, v in columns.items():
        if v.dtype.kind == "f":
            bad = np.flatnonzero(((v < 0) & (v != -1)) | ~np.isfinite(v))
        else:
            bad = np.flatnonzero(v < -1)
        if not len(bad):
            continue
        i = int(bad[0])
        name = names.get(int(ids[i])) or f"<record {int(ids[i]):x}>"
        value = f"{v[i]:g}" if v.dtype.kind == "f" else f"{int(v[i]):,}"
        value = "not a number" if value == "nan" else value
        out.append(
            log_issue(
                path,
                "corrupt",
                f"{len(bad):,} {module} record{'s hold' if len(bad) > 1 else ' holds'} an "
                f"impossible {counter} (e.g. {value} for {name}, rank {int(ranks[i])}): read "
                "as unknown",
            )
        )
    return out


def dxt_beyond_counters(
    path: Path, dxt_parts: list, counter_parts: list[dict], names: Mapping[int, str]
) -> Issue | None:
    """A file whose DXT trace holds more POSIX operations than its counters count: DXT may
    lose operations (its buffer fills) but never add any, so one of the two is damaged (a
    reduced record, rank -1, counts every rank's; DXT keeps a record per rank)."""
    posix = [p for p in counter_parts if p["module"][0] == "POSIX"]
    dxt = [d for d in dxt_parts if d.module == "POSIX"]  # (DxtColumns.module: the layer)
    if not posix or not dxt:
        return None
    c_file = np.concatenate([p["file_id"] for p in posix]).astype(np.uint64)
    c_rank = np.concatenate([p["rank"] for p in posix]).astype(np.int64)
    c_ops = np.concatenate([p["reads"].filled(-1) + p["writes"].filled(-1) for p in posix])
    d_file = np.concatenate([d.rid for d in dxt]).astype(np.uint64)
    d_rank = np.concatenate([d.rank for d in dxt]).astype(np.int64)
    d_ops = np.concatenate([d.count for d in dxt]).astype(np.int64)
    counted = _counted_in_one_rank(c_file, c_rank, c_ops, d_file, d_rank)
    if counted is not None:  # a per-process log: one rank, a record a file in each module
        over = np.flatnonzero((counted >= 0) & (d_ops > counted))
        return _beyond_issue(
            path, names, over, d_file, d_rank, d_ops, counted, np.arange(len(d_file))
        )
    # every rank's DXT records, summed, against a reduced record's counts
    ranked = d_rank >= 0
    files, at = np.unique(d_file[ranked], return_inverse=True)
    d_file = np.concatenate([d_file[~ranked], files, d_file[ranked]])
    d_rank = np.concatenate([d_rank[~ranked], np.full(len(files), -1), d_rank[ranked]])
    summed = np.bincount(at, weights=d_ops[ranked], minlength=len(files)).astype(np.int64)
    d_ops = np.concatenate([d_ops[~ranked], summed, d_ops[ranked]])
    # per (file, rank), in sorted order: the counted operations and the traced ones (a rank -1
    # DXT record and the sum of the ranked ones may both be there: added up)
    f = np.concatenate([c_file, d_file])
    r = np.concatenate([c_rank, d_rank])
    order = np.lexsort((r, f))
    f, r = f[order], r[order]
    counted = np.concatenate([c_ops, np.full(len(d_file), -2)])[order]
    traced = np.concatenate([np.zeros(len(c_file), np.int64), d_ops])[order]
    starts = np.flatnonzero(np.r_[True, (f[1:] != f[:-1]) | (r[1:] != r[:-1])])
    counted, traced = np.maximum.reduceat(counted, starts), np.add.reduceat(traced, starts)
    over = np.flatnonzero((counted >= 0) & (traced > counted))
    return _beyond_issue(path, names, over, f, r, traced, counted, starts)


def _counted_in_one_rank(
    c_file: np.ndarray,
    c_rank: np.ndarray,
    c_ops: np.ndarray,
    d_file: np.ndarray,
    d_rank: np.ndarray,
) -> np.ndarray | None:
    """The counted operations of each DXT record's file (-2: no counter record), where both
    modules hold one rank and a record a file (a per-process log); None otherwise. The
    records usually lie in the same order in both (no sort then)."""
    rank = c_rank[:1]
    if not len(rank) or (c_rank != rank).any() or (d_rank != rank).any():
        return None
    if len(c_file) == len(d_file) and np.array_equal(c_file, d_file):
        return c_ops
    order = np.argsort(c_file, kind="stable")
    c_sorted = c_file[order]
    if (c_sorted[1:] == c_sorted[:-1]).any() or len(distinct(d_file)) != len(d_file):
        return None
    at = np.minimum(np.searchsorted(c_sorted, d_file), len(c_sorted) - 1)
    return np.where(c_sorted[at] == d_file, c_ops[order][at], -2)


def _beyond_issue(
    path: Path,
    names: Mapping[int, str],
    over: np.ndarray,
    f: np.ndarray,
    r: np.ndarray,
    traced: np.ndarray,
    counted: np.ndarray,
    starts: np.ndarray,
) -> Issue | None:
    """The warning for the (file, rank)s ``over`` (indices into ``traced``, ``counted``;
    ``starts``: where each lies in ``f``, ``r``), None when there is none."""
    if not len(over):
        return None
    i = over[0]
    rid, rank, n, c = int(f[starts[i]]), int(r[starts[i]]), int(traced[i]), int(counted[i])
    return log_issue(
        path,
        "implausible",
        f"{len(over):,} file record{'s hold' if len(over) > 1 else ' holds'} more DXT "
        f"operations than the counters count (e.g. {names.get(rid, rid)}, rank {rank}: {n:,} "
        f"traced, {c:,} counted): DXT loses operations but never adds any, so one is damaged",
        "warning",
    )


def rate_beyond_ceiling(
    path: Path,
    prefix: str,
    columns: dict[str, np.ndarray],
    ids: np.ndarray,
    names: Mapping[int, str],
) -> list[Issue]:
    """Records of ``prefix`` (POSIX, STDIO) that moved at least :data:`RATE_MIN_BYTES` at
    more than :data:`RATE_CEILING` (bytes over the time of those calls): implausible."""
    out = []
    for d, done in (("READ", "read"), ("WRITE", "written")):
        moved = columns.get(f"{prefix}_BYTES_{d}")
        secs = columns.get(f"{prefix}_F_{d}_TIME")
        if moved is None or secs is None:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(secs > 0, moved / secs, np.inf)
        bad = np.flatnonzero((moved >= RATE_MIN_BYTES) & (rate > RATE_CEILING))
        if not len(bad):
            continue
        i = int(bad[0])
        name = names.get(int(ids[i])) or f"<record {int(ids[i]):x}>"
        out.append(
            log_issue(
                path,
                "implausible",
                f"{len(bad):,} {prefix} record{'s' if len(bad) > 1 else ''} {done} faster than "
                f"{RATE_CEILING / 1e12:g} TB/s (e.g. {name}: {int(moved[i]):,} bytes in "
                f"{secs[i]:g} s): a byte count or a time is wrong",
                "warning",
            )
        )
    return out
