"""What a DFTracer trace can physically hold, checked as it is read (as
:mod:`iosweep.trace.darshan.plausible` does for Darshan logs): an event repeated under an id
the trace already holds is read once, a negative duration leaves its call's end unknown, and
a trace spanning more than a year (timestamps in the wrong unit) leaves the run's length
unknown. Each is a named issue; the figures resting on the value are withheld, not printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.trace.schema import RUN_CEILING_S, RUN_TIME, Issue


def _all_distinct(pid: np.ndarray, ids: np.ndarray) -> bool:
    """Whether no (pid, id) pair repeats, counted by ``np.bincount`` where the ids are dense
    (DFTracer numbers a process's events 1, 2, ...; a sort of the pairs took 4% of an
    ingest); False where that cannot tell (the caller then sorts)."""
    if len(ids) < 2:
        return True
    lo, hi = int(ids.min()), int(ids.max())
    procs, which = np.unique(pid, return_inverse=True)
    span = hi - lo + 1
    if lo < 0 or span * len(procs) > 4 * len(ids) + (1 << 20):
        return False
    return int(np.bincount(which * span + (ids - lo)).max()) <= 1


def _column(norm: pa.Table, name: str) -> np.ndarray:
    return pc.fill_null(norm.column(name), -1).to_numpy(zero_copy_only=False).astype(np.int64)


def without_repeats(path: Path, norm: pa.Table) -> tuple[pa.Table, list[Issue]]:
    """``norm`` less the events that are copies of an earlier one, and what repeats.

    DFTracer numbers each event it logs once per process; an event that repeats an earlier
    one's (pid, id) and is its copy (the same thread, start and duration: a damaged or
    concatenated file) is read once, an error that counts them. DFTracer 1.x's forked loader
    workers keep their parent's pid and id counter (Stormer's traces: 1,933 events a rank
    share an id with another thread's), so a repeat from another thread or at another time
    is an event of its own: kept, a warning that says so."""
    ids = norm.column("id")
    if ids.null_count == len(ids):
        return norm, []
    pid = _column(norm, "pid")
    has = pc.is_valid(ids).to_numpy(zero_copy_only=False)
    idv = pc.fill_null(ids, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    rows = np.flatnonzero(has)
    p, i = pid[rows], idv[rows]
    if _all_distinct(p, i):
        return norm, []  # the usual trace: no sort needed
    _, first = np.unique(np.stack([p, i], axis=1), axis=0, return_index=True)
    repeat = np.ones(len(rows), bool)
    repeat[first] = False
    if not repeat.any():
        return norm, []
    whole = np.stack([p, i] + [_column(norm, c)[rows] for c in ("tid", "ts", "dur")], axis=1)
    _, first_whole = np.unique(whole, axis=0, return_index=True)
    copy = np.ones(len(rows), bool)
    copy[first_whole] = False
    line = norm.column("line").to_numpy()
    issues = []
    if copy.any():
        k = rows[copy][0]
        issues.append(
            Issue(
                str(path),
                "corrupt",
                f"{int(copy.sum()):,} events repeat the id of an event already read (the first at "
                f"line {int(line[k])}, id {int(idv[k])}), each a copy of it (the same thread, "
                "start and duration): DFTracer logs each event once, so each is read once",
                "error",
            )
        )
    own = repeat & ~copy
    if own.any():
        k = rows[own][0]
        issues.append(
            Issue(
                str(path),
                "reused-ids",
                f"{int(own.sum()):,} events share the id of an earlier event of their pid (the "
                f"first at line {int(line[k])}, id {int(idv[k])}) but not its thread, start or "
                "duration: DFTracer 1.x's forked loader workers keep their parent's pid and event "
                "count, so each is an event of its own, read as it is",
                "warning",
            )
        )
    drop = np.zeros(len(norm), bool)
    drop[rows[copy]] = True
    return (norm.filter(pa.array(~drop)) if copy.any() else norm), issues


@dataclass
class NegativeDurations:
    rows: np.ndarray  # events whose duration is negative (their end: unknown)
    issue: Issue | None


def negative_durations(
    src: str,
    timed: np.ndarray,
    dur: np.ndarray,
    line: np.ndarray,
    names: list[str | None],
    name_c: np.ndarray,
) -> NegativeDurations:
    """Timed events with a negative duration: no clock runs backwards, so their end (and
    their time) is unknown."""
    rows = timed & (dur < 0)
    if not rows.any():
        return NegativeDurations(rows, None)
    i = int(np.flatnonzero(rows)[0])
    name = names[name_c[i]] if name_c[i] >= 0 else "?"
    issue = Issue(
        src,
        "corrupt",
        f"{int(rows.sum()):,} events have a negative duration (the first at line "
        f"{int(line[i])}, {name!r}, dur {int(dur[i])}): their end and time are unknown",
        "error",
    )
    return NegativeDurations(rows, issue)


def run_span(src: str, t_first: int, t_last: int, scale: float, unit: str) -> Issue | None:
    """A trace spanning more than :data:`RUN_CEILING_S`: timestamps in another unit than the
    trace says (or damaged), so the run's length is not known."""
    span = (t_last - t_first) * scale
    if span <= RUN_CEILING_S:
        return None
    return Issue(
        src,
        "implausible",
        f"the events span {span / (365.25 * 86400):,.0f} years (first {t_first}, last "
        f"{t_last}, in {unit}): timestamps in another unit or damaged, so the run's length is "
        "not known",
        "error",
        field=RUN_TIME,
    )
