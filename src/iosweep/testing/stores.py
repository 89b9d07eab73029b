"""Synthetic trace stores for tests and benchmarks, built from the data model.

:func:`table` makes an Arrow table of one of the store's tables (``segments``, ``counters``,
``steps``, ``app_events``) from rows (mappings) or columns (sequences or numpy arrays): each
given column is converted to the schema's type (strings dictionary-encoded), every column not
given gets its default (``fill``, else null). :func:`run_meta` makes the run metadata of N
ranks, and :func:`build_store` writes both with the store's own writer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from iosweep.trace.schema import STORE_TABLES, ProcessInfo, RankInfo, RunMeta
from iosweep.trace.store import write_store

Rows = Sequence[Mapping[str, Any]]
Columns = Mapping[str, Any]


def _columns(name: str, data: Rows | Columns) -> dict[str, Any]:
    if isinstance(data, Mapping):
        return dict(data)
    names = STORE_TABLES[name].names
    unknown = sorted({k for row in data for k in row} - set(names))
    if unknown:
        raise KeyError(f"{name}: no column(s) {unknown} in the data model; columns: {names}")
    return {k: [row.get(k) for row in data] for k in names if any(k in row for row in data)}


def table(name: str, data: Rows | Columns, fill: Mapping[str, Any] | None = None) -> pa.Table:
    """A table of the data model's ``name`` schema; ``fill``: defaults of absent columns."""
    schema = STORE_TABLES[name]
    cols = _columns(name, data)
    unknown = sorted(set(cols) - set(schema.names))
    if unknown:
        raise KeyError(f"{name}: no column(s) {unknown} in the data model; columns: {schema.names}")
    n = len(next(iter(cols.values()))) if cols else 0
    arrays = []
    for f in schema:
        if f.name in cols:
            v = cols[f.name]
        elif fill and f.name in fill:
            v = [fill[f.name]] * n
        else:
            arrays.append(pa.nulls(n, f.type))
            continue
        if isinstance(v, pa.Array):  # already Arrow (e.g. from dictionary()): cast only
            arrays.append(v if v.type == f.type else v.cast(f.type))
        elif pa.types.is_dictionary(f.type):
            arr = pa.array(np.asarray(v, dtype=object) if isinstance(v, np.ndarray) else v)
            arrays.append(arr.cast(pa.string()).dictionary_encode().cast(f.type))
        else:
            arrays.append(pa.array(v, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def dictionary(codes: np.ndarray, values: Sequence[str]) -> pa.DictionaryArray:
    """A dictionary column from integer codes into ``values`` (millions of rows, no strings)."""
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(list(values)))


def run_meta(
    run_id: str,
    n_ranks: int = 1,
    hosts: Mapping[int, str] | None = None,
    pid: int = 1000,
    traced: bool = True,
    **kw: Any,
) -> RunMeta:
    """Run metadata of ``n_ranks`` ranks (rank r: pid ``pid + r``, host ``hosts[r]`` or n0),
    with one traced process per rank unless ``traced`` is false (or ``processes`` given)."""
    hosts = hosts or {}
    ranks = [
        RankInfo(rank=r, local_rank=r, size=n_ranks, pid=pid + r, host=hosts.get(r, "n0"))
        for r in range(n_ranks)
    ]
    if traced:
        kw.setdefault(
            "processes",
            [
                ProcessInfo(
                    source=f"log-{r}", pid=pid + r, host=hosts.get(r, "n0"), rank=r, role="rank"
                )
                for r in range(n_ranks)
            ],
        )
    kw.setdefault("clock_zero", 1.7e9)
    return RunMeta(run_id=run_id, ranks=ranks, **kw)


def build_store(path: Path, meta: RunMeta, **tables: pa.Table | None) -> Path:
    """Write ``meta`` and the given tables (the others empty) as a trace store."""
    return write_store(Path(path), meta, {k: v for k, v in tables.items() if v is not None})
