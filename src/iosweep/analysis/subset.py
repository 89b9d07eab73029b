"""Some of a run's ranks, analysed on their own (``iosweep analyze --ranks``).

A run too large for the memory at hand (see :mod:`iosweep.analysis.budget`) can be analysed a
few ranks at a time: data-parallel ranks do the same work, so each rank's own figures (its
I/O, its waits, its verdict) are exact; what spans ranks (totals, the run's I/O activity, a
file's size as every rank's reads show it, whether ranks share a file) then covers the chosen
ranks only, and the summary's limitations say so.
Only the row groups that may hold the chosen ranks are read (stores are written sorted by
rank, :func:`iosweep.trace.store.rank_groups`), and of them only the chosen ranks' rows are
kept, column by column as they are read.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.analysis.shared import reduced
from iosweep.columns import numbers
from iosweep.trace.schema import RunMeta
from iosweep.trace.store import TraceStore

RANKED_TABLES = ("segments", "counters", "app_events", "steps")


class RankSubsetError(ValueError):
    """The ranks asked for cannot be analysed on their own in this run."""


@dataclass
class RankSubset:
    """The chosen ranks, the run's metadata narrowed to them, and per table their rows."""

    ranks: list[int]
    of: int  # ranks of the run
    meta: RunMeta  # the run's, with only the chosen ranks and their processes
    groups: dict[str, list[int] | None]  # table -> the Parquet row groups read (None: all)
    rows: dict[str, np.ndarray]  # table -> bool mask over the rows of those groups
    left_out: dict[str, int]  # rows tied to no rank (rank -1), left out, per table

    def count(self, table: str) -> int:
        """The chosen ranks' rows of ``table``."""
        return int(self.rows[table].sum())

    def keep(self, table: str, col: pa.ChunkedArray, offset: int = 0) -> pa.ChunkedArray:
        """``col`` of ``table`` (read from :attr:`groups`, from its row ``offset`` among
        theirs) with only the chosen ranks' rows."""
        mask = self.rows.get(table)
        if mask is None:
            return col
        mask = mask[offset : offset + len(col)]
        return col if mask.all() else pc.filter(col, pa.array(mask))

    def limitation(self) -> str:
        unranked = sum(self.left_out.values())
        return (
            f"only ranks {ranks_text(self.ranks)} of {self.of} were analysed (--ranks): each "
            "rank's own figures are exact; totals, the run's I/O activity and what is known of "
            "a file from every rank's I/O (its size, whether ranks share it) count these ranks "
            "only" + (f"; {unranked:,} rows tied to no rank were left out" if unranked else "")
        )


def parse_ranks(text: str) -> list[int]:
    """``"0-3,8"`` -> [0, 1, 2, 3, 8]; ValueError naming what is wrong."""
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise ValueError(f"--ranks {text!r}: expected ranks and ranges such as 0-7,12")
        out.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return sorted(out)


def ranks_text(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    parts, start = [], None
    for i, r in enumerate(ranks):
        start = r if start is None else start
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    return ", ".join(parts)


def row_groups(store: TraceStore, table: str, ranks: Collection[int]) -> list[int] | None:
    """The row groups of ``table`` that may hold rows of ``ranks`` or rows tied to no rank
    (those are counted, and Darshan's reduced records refused): by the groups' rank
    statistics. None (read all) where no group can be left out."""
    spans = store.rank_ranges(table)
    chosen = np.array(sorted(ranks))
    keep = []
    for g, span in enumerate(spans):
        # the highest chosen rank not above the group's highest, if any, is in the group
        below = int(np.searchsorted(chosen, span[1], side="right")) if span else 0
        if span is None or span[0] < 0 or (below and chosen[below - 1] >= span[0]):
            keep.append(g)
    return None if len(keep) == len(spans) else keep


def _rank_column(store: TraceStore, table: str, groups: list[int] | None) -> np.ndarray:
    return numbers(store.table(table, ["rank"], row_groups=groups)["rank"], np.int64, -1)


def select(store: TraceStore, ranks: Collection[int], unranked: bool = False) -> RankSubset:
    """``ranks`` of the store's run (only their rank columns are read), with ``unranked`` the
    rows tied to no rank too; RankSubsetError where the ranks are not the run's or its
    records cannot be split by rank."""
    meta = store.meta
    known = {r.rank for r in meta.ranks}
    if not known:
        raise RankSubsetError("--ranks: the store names no ranks (run.json has none)")
    unknown = sorted(set(ranks) - known)
    if unknown:
        raise RankSubsetError(
            f"--ranks: the run has no rank {ranks_text(unknown)} (its ranks: "
            f"{ranks_text(sorted(known))})"
        )
    chosen = sorted(set(ranks))
    groups, rows, left_out = {}, {}, {}
    for t in RANKED_TABLES:  # one rank column held at a time (800 MB at 100 M segments)
        groups[t] = row_groups(store, t, chosen)
        rank = _rank_column(store, t, groups[t])
        if t == "counters":
            _refuse_reduced(store, rank, groups[t])
        rows[t] = np.isin(rank, chosen) | ((rank < 0) if unranked else False)
        left_out[t] = 0 if unranked else int((rank < 0).sum())
    return RankSubset(chosen, len(known), narrowed(meta, chosen, unranked), groups, rows, left_out)


def narrowed(meta: RunMeta, ranks: Collection[int], unranked: bool) -> RunMeta:
    """``meta`` with only ``ranks`` and their processes (``unranked``: and the processes tied
    to no rank)."""
    chosen = set(ranks)
    return replace(
        meta,
        ranks=[r for r in meta.ranks if r.rank in chosen],
        processes=[p for p in meta.processes if p.rank in chosen or (unranked and p.rank < 0)],
    )


def _refuse_reduced(store: TraceStore, rank: np.ndarray, groups: list[int] | None) -> None:
    """RankSubsetError where Darshan reduced records of files shared by all ranks."""
    fastest = store.table("counters", ["fastest_rank"], missing_as_null=True, row_groups=groups)
    ctr = pd.DataFrame(
        {"actor": rank, "fastest_rank": numbers(fastest["fastest_rank"], np.int64, -1)}
    )
    shared = int(reduced(ctr).sum())
    if shared:
        raise RankSubsetError(
            f"--ranks: Darshan reduced {shared} record(s) of files shared by all ranks to one "
            "each: they cannot be split by rank; analyse the whole run"
        )
