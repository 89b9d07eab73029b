"""DFAnalyzer's overlap figures: how much application I/O and POSIX I/O the computation did
not hide, per process, per rank and in total (DFTracer traces with compute annotations).

For each process: compute = the union of its compute events (``analysis.phases.compute``),
application I/O = the union of its application I/O events (``analysis.phases.app_io``),
POSIX I/O = the union of its POSIX/STDIO calls (the analysed reads and writes, and the
metadata calls on analysed paths). Unoverlapped = the time in the I/O's union that no compute
covers: ``|io \\ compute|``, exact. Per rank the same over its whole process tree (the
rank and its loader workers: their I/O is hidden when the rank computes meanwhile).

Beside it, the figure as dftracer-analyzer 0.0.9 computes it for a process view
(``metrics.py``: ``u_<layer>_time_sum``): the *sum* of the layer's call durations less the
sum of the compute durations, clipped at zero, per process (dftracer-analyzer's rows are per
thread). The two differ where calls overlap (concurrent threads, nested events: sums count
them twice) and where a process's I/O and compute do not coincide in time (the sums subtract
anyway). docs/analysis.md has the definitions and the comparison.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iosweep.analysis import intervals
from iosweep.analysis.data import RunData, category_matches, events_matching
from iosweep.analysis.sections import PartIn, PartOut, PartsIn

COLUMNS = [
    "rank",
    "pid",
    "compute_time",
    "app_io_time",
    "posix_io_time",
    "unoverlapped_app_io_time",
    "unoverlapped_posix_io_time",
    "app_io_busy",  # sums of durations, and dftracer-analyzer's subtraction
    "posix_io_busy",
    "compute_busy",
    "u_app_io_dfa",
    "u_posix_io_dfa",
]


def _spans(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _, mlo, mhi = intervals.merge(np.zeros(len(lo), np.int64), lo, hi)
    return mlo, mhi


def _outside(a: tuple[np.ndarray, np.ndarray], c: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the (disjoint) spans ``a`` that the (disjoint) spans ``c`` do not cover."""
    total = float((a[1] - a[0]).sum())
    if not len(c[0]) or not total:
        return total
    return total - float(intervals.measure_in(a[0], a[1], c[0], c[1]).sum())


def _figures(comp: pd.DataFrame, app: pd.DataFrame, posix: pd.DataFrame) -> dict[str, float]:
    def arr(df):
        return df["start"].to_numpy(np.float64), df["end"].to_numpy(np.float64)

    c, a, p = (_spans(*arr(df)) for df in (comp, app, posix))
    busy = {
        k: float((df["end"] - df["start"]).sum())
        for k, df in (("compute", comp), ("app", app), ("posix", posix))
    }
    return {
        "compute_time": float((c[1] - c[0]).sum()),
        "app_io_time": float((a[1] - a[0]).sum()),
        "posix_io_time": float((p[1] - p[0]).sum()),
        "unoverlapped_app_io_time": _outside(a, c),
        "unoverlapped_posix_io_time": _outside(p, c),
        "app_io_busy": busy["app"],
        "posix_io_busy": busy["posix"],
        "compute_busy": busy["compute"],
        "u_app_io_dfa": max(busy["app"] - busy["compute"], 0.0),
        "u_posix_io_dfa": max(busy["posix"] - busy["compute"], 0.0),
    }


def _posix_calls(rd: RunData) -> pd.DataFrame:
    """(actor, pid, start, end) of the analysed reads/writes and the POSIX/STDIO metadata
    calls on analysed paths (the app events hold those)."""
    ops = rd.ops
    seg = pd.DataFrame({"actor": ops.actor, "pid": ops.pid, "start": ops.start, "end": ops.end})
    ev = rd.app_events
    meta = ev[category_matches(ev["cat"], "^(POSIX|STDIO)$") & (ev["file"].to_numpy() >= 0)]
    return pd.concat([seg, meta[["actor", "pid", "start", "end"]]], ignore_index=True)


UNAVAILABLE = {
    "available": False,
    "reason": "no compute events: DFAnalyzer's figures need the trace's compute annotations",
}


def _compute_events(rd: RunData) -> np.ndarray:
    ev = rd.app_events
    return events_matching(ev, rd.settings.phases.get("compute") or []) & (ev["actor"] >= 0)


def has_compute_events(rd: RunData) -> bool:
    return bool(_compute_events(rd).any())


def unoverlapped_rows(rd: RunData) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Per process of a rank (:data:`COLUMNS`), and per rank, the figures; each rank's own."""
    ev = rd.app_events
    compute = _compute_events(rd)
    app = events_matching(ev, rd.settings.phases.get("app_io") or []) & (ev["actor"] >= 0)
    kinds = {"comp": ev[compute], "app": ev[app], "posix": _posix_calls(rd)}
    kinds["posix"] = kinds["posix"][kinds["posix"]["actor"] >= 0]
    # each process's and rank's rows by index (masks per process were O(processes x rows):
    # 10 s of a 3.2 M-segment part of 180 processes)
    by_proc = {k: _indices(d, ["actor", "pid"]) for k, d in kinds.items()}
    by_rank = {k: _indices(d, ["actor"]) for k, d in kinds.items()}
    procs = sorted({(int(a), int(p)) for ix in by_proc.values() for a, p in ix})
    table = pd.DataFrame(
        [{"rank": a, "pid": p, **_figures(*_rows(kinds, by_proc, (a, p)))} for a, p in procs],
        columns=COLUMNS,
    )
    per_rank = []
    for actor in sorted({a for a, _ in procs}):
        f = _figures(*_rows(kinds, by_rank, actor))
        per_rank.append({"rank": actor, **{k: f[k] for k in COLUMNS[2:7]}})
    return table, per_rank


def _indices(d: pd.DataFrame, keys: list[str]) -> dict[Any, np.ndarray]:
    """The rows of each value of ``keys`` (a tuple of ints for two keys, an int for one)."""
    if not len(d):
        return {}
    by = [d[k] for k in keys] if len(keys) > 1 else d[keys[0]]
    return {
        tuple(map(int, k)) if isinstance(k, tuple) else int(k): ix
        for k, ix in d.groupby(by, sort=False, dropna=False).indices.items()
    }


def _rows(
    kinds: dict[str, pd.DataFrame], index: dict[str, dict[Any, np.ndarray]], key: Any
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The compute, application I/O and POSIX rows of one process or rank."""
    none = np.empty(0, np.int64)
    got = [kinds[k].iloc[index[k].get(key, none)] for k in ("comp", "app", "posix")]
    return got[0], got[1], got[2]


def unoverlapped_summary(table: pd.DataFrame, per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary from :func:`unoverlapped_rows` of every rank (in rank order)."""
    totals = {k: float(sum(r[k] for r in per_rank)) for k in COLUMNS[2:7]}
    totals |= {k: float(table[k].sum()) for k in ("u_app_io_dfa", "u_posix_io_dfa")}
    return {
        "available": True,
        "reason": "",
        "per_rank": per_rank,
        "totals": totals,
        "processes": len(table),
    }


ROWS, RANKS = "unoverlapped.parquet", "unoverlapped_ranks.parquet"  # a part's rows
EVENTS = "compute_events.json"  # whether the part has compute annotations


def put_part(part: PartIn, out: PartOut) -> None:
    """A part's figures, where any part may have compute events (another part's events ask
    for this part's rows too)."""
    events = has_compute_events(part.rd)
    out.put_json(EVENTS, events)
    if events or not part.alone:
        table, per_rank = unoverlapped_rows(part.rd)
        out.put(ROWS, table)
        out.put(RANKS, pd.DataFrame(per_rank))


def of_parts(parts: PartsIn) -> dict[str, Any]:
    """The summary (the pipeline's ``unoverlapped``) and the table ``unoverlapped``."""
    if not any(parts.values(EVENTS)):
        parts.table("unoverlapped", pd.DataFrame(columns=COLUMNS))
        return dict(UNAVAILABLE)
    table = pd.concat(parts.frames(ROWS), ignore_index=True)
    table = table.sort_values(["rank", "pid"], ignore_index=True)
    ranks = pd.concat(parts.frames(RANKS), ignore_index=True)
    parts.table("unoverlapped", table)
    return unoverlapped_summary(table, ranks.sort_values("rank").to_dict(orient="records"))
