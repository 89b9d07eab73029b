"""What the summary takes from the (rank, file) rows, kept so that it adds up over the run's
files taken a few at a time.

A million files read over tens of epochs make tens of millions of (rank, file) rows; a run
analysed in parts (:mod:`iosweep.analysis.parts`) never holds them together. Every figure
the summary draws from them is kept here as something exact that adds over disjoint sets of
files: sums and counts, sums per rank, the distinct values with their counts (so medians stay
exact), one row per file for the rules, and the rows the written tables may keep. The whole
run's analysis takes the same facts from all its rows at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from iosweep.analysis.data import OPS
from iosweep.analysis.patterns.files import ranked_rows
from iosweep.analysis.patterns.spatial import CATEGORIES
from iosweep.analysis.patterns.volume import SUMMED_METRICS
from iosweep.analysis.settings import AnalysisSettings
from iosweep.trace.schema import SIZE_BINS

_OPS_COLUMNS = [f"ops_{c}" for c in CATEGORIES]


def _added(a: pd.Series, b: pd.Series) -> pd.Series:
    """Two counts or sums by key added (a key one lacks counts 0 there)."""
    if not len(a):
        return b
    if not len(b):
        return a
    return a.add(b, fill_value=0).astype(np.result_type(a.dtype, b.dtype)).sort_index()


@dataclass
class ValueCounts:
    """Values and how many times each was seen: their min, median and max exactly, however
    many sets of rows they were counted in."""

    counts: pd.Series = field(default_factory=lambda: pd.Series(dtype=np.int64))

    @classmethod
    def of(cls, values: Any) -> ValueCounts:
        return cls(pd.Series(np.asarray(values)).value_counts(sort=False).sort_index())

    def __add__(self, other: ValueCounts) -> ValueCounts:
        return ValueCounts(_added(self.counts, other.counts))

    def median(self) -> float | None:
        """As np.median over the values: the middle one, or the mean of the middle two."""
        n = int(self.counts.sum())
        if not n:
            return None
        v = self.counts.index.to_numpy(np.float64)
        upto = np.cumsum(self.counts.to_numpy())
        lo, hi = v[np.searchsorted(upto, [(n - 1) // 2, n // 2], side="right")]
        return float(np.mean([lo, hi]))

    def stats(self) -> dict[str, float] | None:
        """min, median and max (None without values)."""
        if not int(self.counts.sum()):
            return None
        v = self.counts.index.to_numpy(np.float64)
        return {"min": float(v[0]), "median": float(self.median() or 0.0), "max": float(v[-1])}


@dataclass
class StrategyRows:
    """A class's rows in one direction: the ranks that read (or wrote) its files."""

    files_per_rank: pd.Series  # rank -> rows (each row is a distinct (rank, file))
    bytes_per_rank: pd.Series  # rank -> bytes
    exclusive_per_rank: pd.Series  # rank -> its rows on files no other rank touched that way
    bytes_per_pair: ValueCounts
    whole: int  # rows that covered the whole file

    def __add__(self, o: StrategyRows) -> StrategyRows:
        return StrategyRows(
            _added(self.files_per_rank, o.files_per_rank),
            _added(self.bytes_per_rank, o.bytes_per_rank),
            _added(self.exclusive_per_rank, o.exclusive_per_rank),
            self.bytes_per_pair + o.bytes_per_pair,
            self.whole + o.whole,
        )


@dataclass
class ClassRows:
    """A file class's rows of ranks (not of unattributed processes)."""

    ranks: set[int]
    readers: set[int]
    writers: set[int]
    ops_by_category: np.ndarray
    patterns: pd.Series  # pattern -> rows
    whole_read_pairs: int
    read_pairs: int
    read_coverage_frac: ValueCounts  # of the rows that read
    strategy: dict[str, StrategyRows]  # per direction (read, write) with rows

    def __add__(self, o: ClassRows) -> ClassRows:
        strategy = dict(self.strategy)
        for d, s in o.strategy.items():
            strategy[d] = strategy[d] + s if d in strategy else s
        return ClassRows(
            self.ranks | o.ranks,
            self.readers | o.readers,
            self.writers | o.writers,
            self.ops_by_category + o.ops_by_category,
            _added(self.patterns, o.patterns),
            self.whole_read_pairs + o.whole_read_pairs,
            self.read_pairs + o.read_pairs,
            self.read_coverage_frac + o.read_coverage_frac,
            strategy,
        )


@dataclass
class FileRankFacts:
    """What the summary takes from a run's (rank, file) rows (of some of its files, or of
    all: facts of disjoint sets of files add up with ``+``)."""

    rows: int
    counter_only_ops: int  # operations Darshan counted that no segment holds (e.g. STDIO)
    totals: dict[str, int]  # bytes_read, bytes_written, reads, writes
    ops_by_category: np.ndarray  # every row's, unattributed processes too
    patterns: pd.Series  # pattern -> rows of ranks
    counter_bins: np.ndarray  # counter-only rows' requests per (class * 2 + op, Darshan bin)
    counter_small: np.ndarray  # ... of the bin holding the small threshold: [lo, hi] smaller
    classes: dict[int, ClassRows]
    spreads: dict[str, pd.DataFrame]  # per direction, per file two ranks or more moved bytes of
    busiest: pd.DataFrame  # the rows of the files the written tables may keep

    def __add__(self, o: FileRankFacts) -> FileRankFacts:
        classes = dict(self.classes)
        for ci, c in o.classes.items():
            classes[ci] = classes[ci] + c if ci in classes else c
        return FileRankFacts(
            self.rows + o.rows,
            self.counter_only_ops + o.counter_only_ops,
            {k: v + o.totals[k] for k, v in self.totals.items()},
            self.ops_by_category + o.ops_by_category,
            _added(self.patterns, o.patterns),
            self.counter_bins + o.counter_bins,
            self.counter_small + o.counter_small,
            classes,
            {d: _concat(self.spreads[d], o.spreads[d]) for d in self.spreads},
            _concat(self.busiest, o.busiest),
        )


def _concat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([x for x in (a, b) if len(x)] or [a])


def in_run_order(facts: FileRankFacts) -> FileRankFacts:
    """``facts`` added up over passes, in the order of the whole run's rows: the per-file
    rows by file, the busiest rows by (rank, file)."""
    facts.spreads = {d: s.sort_index() for d, s in facts.spreads.items()}
    facts.busiest = facts.busiest.sort_values(["actor", "file"], ignore_index=True)
    return facts


def facts_of(
    fr: pd.DataFrame,
    files: pd.DataFrame,
    class_count: int,
    agg: list[int] | None,
    s: AnalysisSettings,
) -> FileRankFacts:
    """The facts of ``fr``: every (rank, file) row of the files in ``files`` (their per-file
    table); ``agg``: the ranks whose rows the shared-file spreads look at (MPI-IO's
    aggregators; None: every rank)."""
    # only the columns read below, so that a filtered copy holds no more (the rows of a pass
    # are 55 columns wide)
    ranked = ranked_rows(fr, _RANKED_COLUMNS)
    moved = (fr["ctr_ops"] - fr["seg_ops"]).clip(lower=0)
    bins, small = _counter_bins(fr, class_count)
    return FileRankFacts(
        rows=len(fr),
        counter_only_ops=int(moved.sum()),
        totals={c: int(fr[c].sum()) for c in ("bytes_read", "bytes_written", "reads", "writes")},
        ops_by_category=fr[_OPS_COLUMNS].sum().to_numpy(np.int64),
        patterns=ranked["pattern"].value_counts(),
        counter_bins=bins,
        counter_small=small,
        classes={
            ci: _class_rows(ranked[ranked["class"].to_numpy() == ci], files)
            for ci in np.unique(ranked["class"]).tolist()
        },
        spreads={op: _spreads(ranked, op, agg, s) for op in ("read", "write")},
        busiest=fr[fr["file"].isin(_busiest_files(files, s.table_max_files))],
    )


_RANKED_COLUMNS = [
    "actor",
    "file",
    "class",
    *SUMMED_METRICS,
    *("read_whole", "write_whole", "read_coverage_frac", "pattern"),
    *_OPS_COLUMNS,
]


def _counter_bins(fr: pd.DataFrame, class_count: int) -> tuple[np.ndarray, np.ndarray]:
    """The counter-only rows' Darshan request-size bins per (class * 2 + op), and the
    requests of the bin holding the small threshold known [lo, hi] to be smaller."""
    bins = np.zeros((class_count * 2, len(SIZE_BINS)), np.int64)
    small = np.zeros((class_count * 2, 2), np.int64)
    co = fr[fr["source"] == "counters"]
    if not len(co):
        return bins, small
    for op_i, op in enumerate(OPS):
        cols = [f"ctr_size_{op}_{b}" for b in SIZE_BINS]
        if cols[0] in co:
            for c, row in co.groupby("class")[cols].sum().iterrows():
                bins[int(c) * 2 + op_i] += row.to_numpy(np.int64)
        cols = [f"ctr_small_{op}_lo", f"ctr_small_{op}_hi"]
        if cols[0] in co:
            for c, row in co.groupby("class")[cols].sum().iterrows():
                small[int(c) * 2 + op_i] += row.to_numpy(np.int64)
    return bins, small


def _class_rows(frc: pd.DataFrame, files: pd.DataFrame) -> ClassRows:
    """A class's facts from its rows of ranks."""
    reads = frc["reads"].to_numpy() > 0
    return ClassRows(
        ranks=set(np.unique(frc["actor"]).tolist()),
        readers=set(np.unique(frc.loc[reads, "actor"]).tolist()),
        writers=set(np.unique(frc.loc[frc["writes"] > 0, "actor"]).tolist()),
        ops_by_category=frc[_OPS_COLUMNS].sum().to_numpy(np.int64),
        patterns=frc["pattern"].value_counts(),
        whole_read_pairs=int(frc["read_whole"].sum()),
        read_pairs=int(reads.sum()),
        read_coverage_frac=ValueCounts.of(frc.loc[reads, "read_coverage_frac"]),
        strategy={
            d: _strategy_rows(frc, files, d)
            for d in ("read", "write")
            if (frc["reads" if d == "read" else "writes"] > 0).any()
        },
    )


def _strategy_rows(frc: pd.DataFrame, files: pd.DataFrame, direction: str) -> StrategyRows:
    """A class's rows that moved bytes in ``direction`` (their files have a strategy that
    way: some rank did)."""
    col_ops = "reads" if direction == "read" else "writes"
    col_bytes = "bytes_read" if direction == "read" else "bytes_written"
    fr = frc[frc[col_ops] > 0]
    exclusive = files.loc[files[f"{direction}_strategy"] == "exclusive", "file"]
    g = fr.groupby("actor")
    return StrategyRows(
        g.size(),
        g[col_bytes].sum(),
        fr[fr["file"].isin(exclusive)].groupby("actor").size(),
        ValueCounts.of(fr[col_bytes]),
        int(fr[f"{direction}_whole"].sum()),
    )


def _spreads(
    ranked: pd.DataFrame, op: str, agg: list[int] | None, s: AnalysisSettings
) -> pd.DataFrame:
    """Per file that two ranks or more moved bytes of (among ``agg`` where given): (max -
    min) / max over its ranks of the bytes and of the seconds, each NaN (not judged, never a
    false 0) where the busiest rank is under its floor (Drishti's P18/P19 on shared files)."""
    col = "bytes_read" if op == "read" else "bytes_written"
    rows = ranked[ranked[col] > 0]
    if agg:
        rows = rows[rows["actor"].isin(agg)]
    g = rows.groupby("file")
    n = g.size()
    shared = n[n >= 2].index
    b_max, b_min = g[col].max()[shared], g[col].min()[shared]
    t_max, t_min = g[f"{op}_time"].max()[shared], g[f"{op}_time"].min()[shared]
    return pd.DataFrame(
        {
            "bytes": ((b_max - b_min) / b_max).where(b_max >= max(s.imbalance_min_bytes, 1)),
            "time": ((t_max - t_min) / t_max.where(t_max > 0)).where(
                t_max >= s.imbalance_min_io_time_s
            ),
            "b_max": b_max,
            "b_min": b_min,
        }
    )


def _busiest_files(files: pd.DataFrame, max_files: int) -> np.ndarray:
    """The codes of the ``max_files`` files of ``files`` that moved the most bytes, ties by
    path (all where there are no more)."""
    if len(files) <= max_files:
        return files["file"].to_numpy()
    moved = files["bytes_read"] + files["bytes_written"]
    # Arrow's top-k, not a sort of a million paths as Python strings (paths are unique,
    # so the order is total and the choice exact)
    order = pa.table({"m": -moved.to_numpy(), "p": pa.array(files["path"], pa.string())})
    keys = [("m", "ascending"), ("p", "ascending")]
    keep = pc.select_k_unstable(order, k=max_files, sort_keys=keys).to_numpy()
    return files["file"].to_numpy()[np.sort(keep)]


def busiest_files(files: pd.DataFrame, max_files: int) -> pd.DataFrame:
    """The rows of the files table written: :func:`_busiest_files`' files, in table order."""
    return files[files["file"].isin(_busiest_files(files, max_files))]


def class_stats(s: StrategyRows) -> dict[str, Any]:
    """A class's per-rank and per-pair figures in one direction (its strategy's evidence)."""
    ranks = s.files_per_rank.index.to_numpy()
    rows = int(s.files_per_rank.sum())
    return {
        "ranks": len(ranks),
        "rank_list": ranks.tolist() if len(ranks) <= 64 else None,
        "files_per_rank": ValueCounts.of(s.files_per_rank).stats(),
        "bytes_per_rank_per_file": s.bytes_per_pair.stats(),
        "bytes_per_rank": ValueCounts.of(s.bytes_per_rank).stats(),
        "whole_file_share": s.whole / rows if rows else None,
    }
