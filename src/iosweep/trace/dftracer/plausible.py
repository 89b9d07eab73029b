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


def without_repeats(path: Path, norm: pa.Table) -> tuple[pa.Table, Issue | None]:
    """``norm`` less the events that repeat the (pid, id) of an earlier one: DFTracer numbers
    each event it logs once, so a repeat is the same event written again (a damaged or
    concatenated file), read once; an issue counts them."""
    ids = norm.column("id")
    if ids.null_count == len(ids):
        return norm, None
    pid = pc.fill_null(norm.column("pid"), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    has = pc.is_valid(ids).to_numpy(zero_copy_only=False)
    idv = pc.fill_null(ids, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    rows = np.flatnonzero(has)
    p, i = pid[rows], idv[rows]
    if _all_distinct(p, i):
        return norm, None  # the usual trace: no sort needed
    pairs = np.stack([p, i], axis=1)
    _, first = np.unique(pairs, axis=0, return_index=True)
    repeat = np.ones(len(rows), bool)
    repeat[first] = False
    if not repeat.any():
        return norm, None
    drop = np.zeros(len(norm), bool)
    drop[rows[repeat]] = True
    line = int(norm.column("line").to_numpy()[rows[repeat][0]])
    issue = Issue(
        str(path),
        "corrupt",
        f"{int(repeat.sum()):,} events repeat the id of an event already read (the first at "
        f"line {line}, id {int(idv[rows[repeat][0]])}): DFTracer logs each event once, so each "
        "is read once",
        "error",
    )
    return norm.filter(pa.array(~drop)), issue


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
