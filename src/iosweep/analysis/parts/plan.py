"""How a run is analysed: one part where its need fits the memory budget, else parts of whole
ranks, each within it (the same rule for ``iosweep analyze`` and the workflow).

A part's need is counted like a run's (:mod:`iosweep.analysis.budget`), from its rows: the
rank column of each table is read a row group at a time (stores hold whole ranks per row
group, in rank order) and counted per rank. Consecutive ranks join a part while its need
fits; the rows tied to no rank (processes Darshan could not tie to a rank) come with the
first part.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from iosweep.analysis import budget
from iosweep.analysis.subset import RankSubsetError, ranks_text, select
from iosweep.columns import numbers
from iosweep.trace.store import TraceStore, open_store

NEED_TABLES = ("segments", "counters", "app_events")  # the rows a need counts (budget.Need)


@dataclass(frozen=True)
class Part:
    """Some consecutive ranks of a run, analysed together."""

    index: int
    ranks: list[int]
    unranked: bool  # with the rows tied to no rank
    need: budget.Need
    whole: bool = False  # the whole run, read as it is (ranks or not, records of all ranks)

    @property
    def name(self) -> str:
        return f"part-{self.index:04d}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "need": asdict(self.need)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Part:
        return cls(**{**d, "need": budget.Need(**d["need"])})


def whole_run(store_path: Path | str, need: budget.Need | None = None) -> Part:
    """The whole run as one part."""
    ranks = sorted(r.rank for r in open_store(Path(store_path)).meta.ranks)
    return Part(0, ranks, True, need or budget.need_of(store_path), whole=True)


def of_ranks(store_path: Path | str, ranks: list[int], memory_gb: float | None) -> Part:
    """Only ``ranks`` of the run (``--ranks``), as one part; RankSubsetError where they cannot
    be analysed on their own, MemoryBudgetError where their need is over ``memory_gb``."""
    subset = select(open_store(Path(store_path)), ranks)
    return Part(0, subset.ranks, False, budget.check(store_path, memory_gb, subset))


def rows_per_rank(store: TraceStore, table: str, n_ranks: int) -> np.ndarray:
    """Rows of ``table`` per rank (index rank + 1; index 0: rows tied to no rank), a row
    group's rank column at a time."""
    counts = np.zeros(n_ranks + 1, np.int64)
    for g in range(len(store.group_rows(table))):
        rank = numbers(store.table(table, ["rank"], row_groups=[g])["rank"], np.int64, -1)
        if len(rank) and rank.max() >= n_ranks:
            raise RankSubsetError(
                f"{table}.parquet holds rank {int(rank.max())}, beyond the run's {n_ranks} ranks"
            )
        counts += np.bincount(np.maximum(rank, -1) + 1, minlength=n_ranks + 1)
    return counts


def plan(store_path: Path | str, memory_gb: float | None) -> list[Part]:
    """The run as one part where its need fits ``memory_gb`` (None: the machine's share,
    :func:`budget.budget_bytes`), else its ranks in parts whose need fits; MemoryBudgetError
    where one rank alone does not fit, and RankSubsetError where a run over the budget names
    no ranks."""
    return plan_jobs(store_path, memory_gb, 1)[0]


def plan_jobs(
    store_path: Path | str, memory_gb: float | None, jobs: int, held: int = 0
) -> tuple[list[Part], int]:
    """:func:`plan`'s parts to analyse ``jobs`` at a time (each within an equal share of the
    budget, less ``held`` bytes the caller holds meanwhile), and how many at a time: fewer
    jobs where a rank does not fit a share (MemoryBudgetError where it does not fit the
    budget alone), no more than the parts; the whole run, one at a time, where it fits."""
    allowed = budget.budget_bytes(memory_gb)
    need = budget.need_of(store_path)
    if need.bytes <= allowed:
        return [whole_run(store_path, need)], 1
    if not open_store(Path(store_path)).meta.ranks:  # no ranks to cut it by
        raise budget.over_budget(f"{store_path}", need, memory_gb)
    ranks, rows = rank_rows(store_path)
    for j in range(max(jobs, 1), 1, -1):
        try:
            parts = cut(store_path, ranks, rows, (allowed - held) // j)
        except budget.MemoryBudgetError:
            continue
        return parts, min(j, len(parts))
    return cut(store_path, ranks, rows, allowed, memory_gb), 1


def rank_rows(store_path: Path | str) -> tuple[list[int], np.ndarray]:
    """The run's ranks, and the rows of each table (:data:`NEED_TABLES`) per rank (row: table;
    column: rank + 1, column 0 the rows tied to no rank); RankSubsetError where the run names
    no ranks or has rows of a rank it does not name."""
    store = open_store(Path(store_path))
    ranks = sorted(r.rank for r in store.meta.ranks)
    if not ranks:
        raise RankSubsetError("the store names no ranks (run.json has none): it has no parts")
    n = ranks[-1] + 1
    rows = np.stack([rows_per_rank(store, t, n) for t in NEED_TABLES])  # (table, rank + 1)
    # rows of a rank run.json does not name would be in no part: lost without a word
    unnamed = sorted(set(np.flatnonzero(rows[:, 1:].sum(axis=0)).tolist()) - set(ranks))
    if unnamed:
        raise RankSubsetError(
            f"{store_path}: rows of rank {ranks_text(unnamed)}, which run.json does not name "
            "among the run's ranks: it cannot be cut into parts; analyse it whole"
        )
    return ranks, rows


def cut(
    store_path: Path | str,
    ranks: list[int],
    rows: np.ndarray,
    allowed: int,
    memory_gb: float | None = None,
) -> list[Part]:
    """Consecutive ``ranks`` (rows per rank: :func:`rank_rows`) in parts whose need fits
    ``allowed`` bytes; MemoryBudgetError where one rank alone does not fit."""
    parts: list[Part] = []
    taken = rows[:, 0].copy()  # the unranked rows ride with the first part
    current: list[int] = []
    for r in ranks:
        with_r = taken + rows[:, r + 1]
        if current and budget.Need(*map(int, with_r)).bytes > allowed:
            parts.append(Part(len(parts), current, not parts, budget.Need(*map(int, taken))))
            current, with_r = [], rows[:, r + 1].copy()
        current.append(r)
        taken = with_r
    parts.append(Part(len(parts), current, not parts, budget.Need(*map(int, taken))))
    over = [p for p in parts if p.need.bytes > allowed]
    if over:
        raise budget.over_budget(
            f"{store_path}, rank {ranks_text(over[0].ranks)}", over[0].need, memory_gb
        )
    return parts
