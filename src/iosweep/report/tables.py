"""Tables of the report from a column spec: which field, its header, how it is formatted.

A :class:`Column` names a field of a row (a DataFrame column, a mapping key or a model
attribute), its header and its formatter; :func:`frame_table` and :func:`records_table` turn
rows into a :class:`Table` of formatted cells, which one template macro draws. No table is
built by hand, cell by cell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


def py(v: Any) -> Any:
    """A cell's value as plain Python: numpy scalars unwrapped, NaN and NA as None."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is pd.NA or v is pd.NaT or (isinstance(v, float) and np.isnan(v)):
        return None
    return v


def text(v: Any) -> str:
    v = py(v)
    return "" if v is None else str(v)


@dataclass(frozen=True)
class Column:
    key: str  # field of the row
    head: str  # header text
    fmt: Callable[[Any], str] = text  # value -> cell text
    num: bool = False  # a number: right-aligned
    css: str = ""  # extra cell class (path, mono)

    def cell(self, row: Any) -> str:
        get = row.get if isinstance(row, dict | pd.Series) else lambda k: getattr(row, k, None)
        return self.fmt(py(get(self.key)))


@dataclass
class Table:
    columns: Sequence[Column]
    rows: list[list[str]]
    more: int = 0  # rows left out

    def __bool__(self) -> bool:
        return bool(self.rows)


def records_table(records: Iterable[Any], columns: Sequence[Column], limit: int = 0) -> Table:
    """Rows (mappings or models) as a table; ``limit`` > 0 keeps the first ``limit``."""
    rows = list(records)
    shown = rows[:limit] if limit else rows
    return Table(columns, [[c.cell(r) for c in columns] for r in shown], len(rows) - len(shown))


def frame_table(df: pd.DataFrame | None, columns: Sequence[Column], limit: int = 0) -> Table:
    """A DataFrame's rows (in their order) as a table."""
    if df is None or df.empty:
        return Table(columns, [], 0)
    shown = df.head(limit) if limit else df
    return Table(
        columns, [[c.cell(r) for c in columns] for _, r in shown.iterrows()], len(df) - len(shown)
    )
