"""One clock for the run: every log's tables moved by its start's offset to the run's clock
zero, and the manifest's steps on that clock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.files import shown
from iosweep.trace.ingest import parts
from iosweep.trace.ingest.find import LogEntry
from iosweep.trace.schema import (
    STEPS,
    Issue,
    ProcessInfo,
    empty_table,
)
from iosweep.trace.store import Parts, rank_key


def _fill_dict_column(col: pa.ChunkedArray, value: str) -> pa.ChunkedArray:
    """Nulls of a dictionary<string> column replaced by ``value``."""
    if col.null_count == 0:
        return col
    filled = pc.fill_null(col.cast(pa.string()), value)
    return filled.cast(col.type)


def _place(table: pa.Table, e: LogEntry, delta: float, time_cols: tuple[str, ...]) -> pa.Table:
    """One log's table with the attributed rank/host/pid and times shifted by ``delta``."""
    L = e.plog
    n = table.num_rows
    if n == 0:
        return table
    if not L.mpi:
        # each column set under its own field: the table stays in the store's schema, which
        # write_store then takes as it is (conform)
        i = table.schema.get_field_index("rank")
        table = table.set_column(i, table.field(i), pa.array(np.full(n, e.rank, np.int32)))
        if "pid" in table.column_names:
            i = table.schema.get_field_index("pid")
            table = table.set_column(i, table.field(i), pc.fill_null(table.column(i), L.pid))
        if "host" in table.column_names and e.host:
            i = table.schema.get_field_index("host")
            table = table.set_column(i, table.field(i), _fill_dict_column(table.column(i), e.host))
    for c in time_cols:
        if c in table.column_names:
            i = table.schema.get_field_index(c)
            table = table.set_column(i, table.field(i), pc.add(table.column(i), delta))
    return table


def manifest_steps(manifest: dict[str, Any], clock_zero: float, issues: list[Issue]) -> pa.Table:
    """The manifest's steps on the run's clock (STEPS)."""
    rows: dict[str, list] = {f.name: [] for f in STEPS}

    def when(s: dict[str, Any], key: str) -> float | None:
        return None if s.get(key) is None else float(s[key]) - clock_zero

    for i, s in enumerate(manifest.get("steps") or []):
        try:
            row = {
                "rank": int(s["rank"]),
                "epoch": int(s.get("epoch", -1)),
                "step": int(s.get("step", -1)),
                "start": float(s["start"]) - clock_zero,
                "end": float(s["end"]) - clock_zero,
                "wait_start": when(s, "wait_start"),
                "wait_end": when(s, "wait_end"),
                "samples": None if s.get("samples") is None else int(s["samples"]),
            }
        except (TypeError, KeyError, ValueError, AttributeError) as e:
            issues.append(
                Issue(f"manifest steps[{i}]", "bad-step", f"not a step record ({e})", "warning")
            )
            continue
        for k, v in row.items():
            rows[k].append(v)
    if not rows["rank"]:
        return empty_table("steps")
    return pa.Table.from_arrays([pa.array(rows[f.name], f.type) for f in STEPS], schema=STEPS)


# (table, the ProcessLog attribute holding it, its time columns)
_PLACED = (
    ("segments", "segments", ("start", "end")),
    ("counters", "counters", ("open_start", "close_end")),
    ("app_events", "app_events", ("start", "end")),
)


def processes_of(
    read: list[LogEntry], clock_zero: float, mpi_hosts: dict[int, dict[int, str]]
) -> list[ProcessInfo]:
    """One ProcessInfo per process of the logs ``read``, on the run's clock, in rank order."""
    processes: list[ProcessInfo] = []
    for e in read:
        L = e.plog
        # an MPI log is one process per rank; only rank 0's pid may be known (the log's name)
        members = (
            [(r, L.pid if r == 0 else -1, mpi_hosts[id(e)].get(r, e.host)) for r in range(L.nprocs)]
            if L.mpi
            else [(e.rank, L.pid, e.host)]
        )
        for rank, pid, host in members:
            processes.append(
                ProcessInfo(
                    source=shown(L.source.name),
                    pid=pid,
                    host=host,
                    rank=rank,
                    role=e.role,
                    exe=L.exe,
                    start=L.start - clock_zero,
                    end=L.end - clock_zero,
                    tracer=L.tracer,
                    log_version=L.version,
                    incomplete=list(L.incomplete),
                    attributed_by=e.attributed_by,
                )
            )
    role_order = {"rank": 0, "worker": 1, "child": 2, "unknown": 3}
    processes.sort(key=lambda p: (p.rank < 0, p.rank, role_order.get(p.role, 9), p.start or 0))
    return processes


def in_rank_order(read: list[LogEntry]) -> list[LogEntry]:
    """The logs in rank order (those tied to no rank last): the store sorts its rows by rank
    (write_store), and then needs no copy of a table to do it, but for an MPI job's log."""
    return sorted(read, key=lambda e: int(rank_key(-1 if e.plog.mpi else e.rank)))


def _placed(
    e: LogEntry, attr: str, time_cols: tuple[str, ...], clock_zero: float
) -> pa.Table | None:
    """One of the log's tables on the run's clock, handed over (the log holds it no more);
    None where it has no rows."""
    table = parts.take(e.plog, attr)
    if table is None or not table.num_rows:
        return None
    return _place(table, e, e.plog.start - clock_zero, time_cols)


def placed_parts(e: LogEntry, clock_zero: float) -> dict[str, pa.Table | None]:
    """Each of the log's tables on the run's clock, handed over."""
    return {name: _placed(e, attr, cols, clock_zero) for name, attr, cols in _PLACED}


def place_all(
    read: list[LogEntry], clock_zero: float, mpi_hosts: dict[int, dict[int, str]]
) -> tuple[dict[str, Parts], list[ProcessInfo]]:
    """One ProcessInfo per process, and per table its parts: every log's part of it, on the
    run's clock, made one at a time as the store writes them (the log lets go of each as it
    is made), so that the run's tables are never held whole."""
    processes = processes_of(read, clock_zero, mpi_hosts)
    by_rank = in_rank_order(read)

    def builder(attr: str, time_cols: tuple[str, ...]) -> Parts:
        def placed() -> Iterator[pa.Table]:
            for e in by_rank:
                if (table := _placed(e, attr, time_cols, clock_zero)) is not None:
                    yield table

        return Parts(placed, need=sum(parts.nbytes(e.plog, attr) for e in by_rank))

    return {name: builder(attr, cols) for name, attr, cols in _PLACED}, processes
