"""One object to open in a notebook: ``iosweep.open(path)``.

As PyDarshan's ``DarshanReport(path)`` or Perfetto's ``TraceProcessor(trace=...)``: give it a
run's trace store (``run.json``), a run's analysis (``summary.json`` or its folder) or a
folder of analyses (a sweep's output, the workflow's ``results``), and get a :class:`Run` or
a :class:`Sweep`::

    import iosweep
    run = iosweep.open("results/runs/framework~pytorch/nodes~1/ppn~2/rep~0/analysis")
    run.verdict.title                      # is training waiting for its data?
    run.table("pipeline")                  # any table of the analysis, as pandas
    run.segments(ranks=[0], window=(10, 20))  # rank 0's traced I/O in 10-20 s, read alone

A run's segments are read from its store (found beside the analysis) a few row groups at a
time: only the ranks and the time window asked for, never the whole store. A store not yet
analysed is analysed on demand (:meth:`Run.analyze`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.summary import (
    AnalysisFailure,
    RunSummary,
    Verdict,
    read_summary,
)
from iosweep.report.terminal import run_text
from iosweep.trace.schema import RunMeta
from iosweep.trace.store import TraceStore, open_store

SUMMARY, RUN_JSON = "summary.json", "run.json"
SWEEP_TABLES = ("sweep.parquet", "sweep.csv")  # the sweep's table, as analyze_sweep writes it


class OpenError(ValueError):
    """A path that is neither a trace store, a run's analysis nor a folder holding some."""


@dataclass
class Run:
    """A run: its analysis (``analysis``: the folder of ``summary.json``), its trace store
    (``store``), or both; what needs the one missing says so."""

    analysis: Path | None = None
    _store: Path | None = field(default=None, repr=False)
    _summary: RunSummary | AnalysisFailure | None = field(default=None, repr=False)

    @property
    def store(self) -> Path | None:
        """The run's trace store: given, or where the analysis's summary links it (None
        where neither finds one)."""
        if self._store is None and self.analysis is not None:
            sm = self.read()
            if isinstance(sm, RunSummary):
                store = linked_store(self.analysis, sm.store, sm.store_relative)
                self._store = store.resolve() if (store / RUN_JSON).is_file() else None
        return self._store

    @property
    def summary(self) -> RunSummary:
        """The analysis's summary, typed (:class:`iosweep.analysis.summary.RunSummary`)."""
        sm = self.read()
        if isinstance(sm, AnalysisFailure):
            raise OpenError(f"{self.analysis}: the analysis failed: {sm.error}")
        return sm

    @property
    def run_id(self) -> str:
        if self.analysis is not None:
            return self.read().run_id
        return self.meta.run_id

    @property
    def verdict(self) -> Verdict | None:
        """Whether training waits for its data, how much, why, and which lever helps (None
        where the run's steps were not seen: :attr:`summary` ``.pipeline`` says why)."""
        return self.summary.pipeline.verdict

    @property
    def tables(self) -> list[str]:
        """The analysis's tables, by name."""
        return sorted(self.summary.tables)

    def table(self, name: str) -> pd.DataFrame:
        """One table of the analysis (``files``, ``ranks``, ``pipeline`` ...) as pandas."""
        return self.arrow(name).to_pandas()

    def arrow(self, name: str) -> pa.Table:
        """One table of the analysis as Arrow."""
        tables = self.summary.tables
        if name not in tables:
            raise KeyError(f"{self.analysis}: no table {name!r}; its tables: {sorted(tables)}")
        assert self.analysis is not None, "a summary is read from an analysis"
        return pq.read_table(self.analysis / tables[name])

    @property
    def trace(self) -> TraceStore:
        """The run's trace store, opened (its tables are read when asked for)."""
        if self.store is None:
            raise OpenError(f"{self.analysis}: its trace store was not found (moved or removed)")
        return open_store(self.store)

    @property
    def meta(self) -> RunMeta:
        """The store's ``run.json``: ranks, hosts, processes, the run's parameters."""
        return self.trace.meta

    def segments(
        self,
        ranks: Collection[int] | None = None,
        window: tuple[float, float] | None = None,
        columns: list[str] | None = None,
    ) -> pd.DataFrame:
        """The traced I/O operations (the store's ``segments``) of ``ranks`` (all: None) that
        overlap ``window`` (seconds from the run's start; all: None); only the Parquet row
        groups that may hold them are read (a store is sorted by rank)."""
        return self.segments_arrow(ranks, window, columns).to_pandas()

    def segments_arrow(
        self,
        ranks: Collection[int] | None = None,
        window: tuple[float, float] | None = None,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """:meth:`segments` as Arrow."""
        trace = self.trace
        f = trace.path / "segments.parquet"
        if not f.exists():
            return trace.table("segments", columns)
        filters: list[tuple[str, str, object]] = []
        if ranks is not None:
            filters.append(("rank", "in", sorted({int(r) for r in ranks})))
        if window is not None:
            lo, hi = window
            if not lo < hi:
                raise ValueError(f"window {window!r}: expected (start, end) with start < end")
            filters += [("end", ">", float(lo)), ("start", "<", float(hi))]
        return pq.read_table(f, columns=columns, filters=filters or None)

    def analyze(
        self, out: Path | str | None = None, settings: AnalysisSettings | None = None
    ) -> Run:
        """The store analysed into ``out`` (default: ``analysis`` beside the store); the run
        with that analysis."""
        from iosweep.analysis import analyze_run

        if self.store is None:
            raise OpenError(f"{self.analysis}: no trace store to analyse")
        where = Path(out) if out is not None else self.store.parent / "analysis"
        analyze_run(self.store, where, settings)
        return Run(where, self.store)

    def read(self) -> RunSummary | AnalysisFailure:
        """The analysis's summary, or the failure it records (SummaryError where it cannot
        be read)."""
        if self._summary is None:
            if self.analysis is None:
                raise OpenError(
                    f"{self.store}: a trace store not analysed yet: run.analyze() first"
                )
            self._summary = read_summary(self.analysis)
        return self._summary

    def __repr__(self) -> str:
        if self.analysis is None:
            return f"<iosweep.Run store={self._store} (not analysed: .analyze())>"
        return run_text(self.read(), self.analysis)


@dataclass
class Sweep:
    """The runs of a folder of analyses (a sweep's output, the workflow's ``results``), and
    the sweep's table where there is one."""

    path: Path
    runs: list[Run]

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def __getitem__(self, run_id: str) -> Run:
        for r in self.runs:
            if r.run_id == run_id:
                return r
        raise KeyError(f"{self.path}: no run {run_id!r}; its runs: {[r.run_id for r in self]}")

    def table(self) -> pd.DataFrame:
        """The sweep's table: a row per run (``sweep.parquet``, written by the analysis)."""
        for name in SWEEP_TABLES:
            f = self.path / name
            if f.exists():
                return pd.read_parquet(f) if f.suffix == ".parquet" else pd.read_csv(f)
        raise OpenError(f"{self.path}: no sweep table ({' or '.join(SWEEP_TABLES)}) here")

    def __repr__(self) -> str:
        return f"<iosweep.Sweep {self.path}: {len(self.runs)} runs>"


def linked_store(analysis: Path, store: str, store_relative: str | None) -> Path:
    """The trace store a run's summary links to: ``store_relative`` from its analysis folder
    where the summary has it (it survives moving both together), else ``store`` as written."""
    return analysis / store_relative if store_relative else Path(store)


def open(path: Path | str) -> Run | Sweep:
    """A :class:`Run` (a trace store, or a run's analysis) or a :class:`Sweep` (a folder
    holding analyses); OpenError where ``path`` is none of them. Summaries are read when
    first asked for (SummaryError naming an unreadable one)."""
    p = Path(path)
    if p.is_file() and p.name in (SUMMARY, RUN_JSON):
        p = p.parent
    if (p / SUMMARY).is_file():
        return Run(p)
    if (p / RUN_JSON).is_file():
        analysis = p.parent / "analysis"
        return Run((analysis if (analysis / SUMMARY).is_file() else None), p)
    if p.is_dir():
        found = [d for d in find_analyses([p])[0] if (d / SUMMARY).is_file()]
        if found:
            return Sweep(p, [Run(d) for d in found])
    raise OpenError(
        f"{p}: neither a trace store ({RUN_JSON}), a run's analysis ({SUMMARY}) nor a folder "
        "holding analyses"
    )


def find_analyses(paths: list[Path]) -> tuple[list[Path], Path | None]:
    """(run analysis dirs, a sweep dir found among the paths), in a stable order."""
    out: list[Path] = []
    sweep = None
    for p in paths:
        if p.is_file() and p.name == SUMMARY:
            out.append(p.parent)
        elif (p / SUMMARY).is_file():
            out.append(p)
        elif p.is_dir():
            if sweep is None and ((p / "sweep.parquet").exists() or (p / "sweep.csv").exists()):
                sweep = p
            found = sorted(f.parent for f in p.rglob(SUMMARY))
            out.extend(found if found else [p])  # an empty dir is listed as a problem
        else:
            out.append(p)
    seen: set[Path] = set()
    uniq = []
    for d in out:
        key = d.resolve()
        if key not in seen:
            seen.add(key)
            uniq.append(d)
    return uniq, sweep
