"""Read and write trace stores (one directory per run; layout in :mod:`iosweep.trace.schema`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from iosweep import memory
from iosweep.files import atomic_write
from iosweep.trace.schema import TABLES, RunMeta, conform, empty_table

RUN_JSON = "run.json"


@dataclass
class TraceStore:
    """A run's trace store, opened. Tables are read on first access."""

    path: Path
    meta: RunMeta

    def table(
        self, name: str, columns: list[str] | None = None, missing_as_null: bool = False
    ) -> pa.Table:
        """The table ``name`` (only ``columns`` if given). ``missing_as_null``: columns a
        store written before they were added come back as nulls instead of an error."""
        if name not in TABLES:
            raise KeyError(f"unknown trace-store table {name!r}; known: {sorted(TABLES)}")
        f = self.path / f"{name}.parquet"
        if not f.exists():
            t = empty_table(name)
            return t.select(columns) if columns else t
        if not (missing_as_null and columns):
            return pq.read_table(f, columns=columns)
        have = set(pq.read_schema(f).names)
        t = pq.read_table(f, columns=[c for c in columns if c in have])
        schema = TABLES[name]
        return pa.table(
            {c: t[c] if c in have else pa.nulls(t.num_rows, schema.field(c).type) for c in columns}
        )

    @property
    def segments(self) -> pa.Table:
        return self.table("segments")

    @property
    def counters(self) -> pa.Table:
        return self.table("counters")

    @property
    def steps(self) -> pa.Table:
        return self.table("steps")

    @property
    def app_events(self) -> pa.Table:
        return self.table("app_events")


def write_store(
    path: Path, meta: RunMeta, tables: Mapping[str, pa.Table | Callable[[], pa.Table]]
) -> Path:
    """Write ``meta`` and every table (missing ones as empty tables) into ``path``.

    A table may be given as a function that builds it: it is called when the table's turn
    comes, so that a caller can hold only one large table at a time.
    ``run.json`` goes first out and last in: a store is complete exactly when it has one, so
    a write cut short (a full disk, an interrupted workflow) is never opened as a store."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / RUN_JSON).unlink(missing_ok=True)
    for name in TABLES:
        t = tables.get(name)
        if callable(t):
            t = t()
        t = empty_table(name) if t is None else conform(t, name)
        # zstd: segments compress ~5-10x (sorted times, repeated paths as dictionaries)
        write = functools.partial(_write_parquet, t)
        atomic_write(path / f"{name}.parquet", write, need=t.nbytes)  # uncompressed: a bound
        del t, write
        memory.release()  # what the table held, before the next is built
    meta.write(path / RUN_JSON)
    return path


# Rows per Parquet row group. Every row group repeats a dictionary column's whole dictionary
# (a million paths, 72 MB, at ImageNet scale): Arrow's default of 1 Mi rows wrote and decoded it
# five times for five million segments. In one row group that store writes in half the time and
# its paths read in a third.
ROW_GROUP_ROWS = 1 << 24


def _write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="zstd", row_group_size=ROW_GROUP_ROWS)


def open_store(path: Path) -> TraceStore:
    path = Path(path)
    meta_file = path / RUN_JSON
    if not meta_file.exists():
        raise FileNotFoundError(f"{path} is not a trace store: it has no {RUN_JSON}")
    return TraceStore(path=path, meta=RunMeta.read(meta_file))
