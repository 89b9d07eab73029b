"""The run's results put together from its parts' (:class:`~.results.PartResults` of
:func:`iosweep.analysis.parts.run.analyze_part`)."""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from iosweep import memory
from iosweep.analysis import budget
from iosweep.analysis.classify import classify_paths
from iosweep.analysis.data import MpiioLayer, class_names, untimed_issue
from iosweep.analysis.findings.rules import run_checks
from iosweep.analysis.findings.sample import OpsSampleInfo, class_order, op_strata, sample_frame
from iosweep.analysis.findings.sections import (
    coverage_issues,
    file_tables,
    headline,
    imbalance_summary,
    ranks_summary,
    run_meta_summary,
    status_of,
    status_sections,
    untraced_ranks,
    volume_summary,
)
from iosweep.analysis.parts import run as part
from iosweep.analysis.parts import tables
from iosweep.analysis.parts.facts import PartFacts, PartTrace
from iosweep.analysis.parts.results import PartResults, path_rows
from iosweep.analysis.patterns.access import (
    EpochSharing,
    access_summary,
    classes_summary,
    epoch_sharing,
)
from iosweep.analysis.patterns.checkpoints import CLASS
from iosweep.analysis.patterns.file_ranks import (
    FileRankFacts,
    busiest_files,
    facts_of,
    in_run_order,
)
from iosweep.analysis.patterns.files import RunFiles, hosts_of, nodes_table
from iosweep.analysis.patterns.mpiio import aggregator_ranks, mpiio_of
from iosweep.analysis.patterns.shapes import ShapeGroups, shape_groups, shapes_summary
from iosweep.analysis.patterns.temporal import (
    HEATMAP_BINS,
    HEATMAP_COLUMNS,
    epoch_windows_of,
    heatmap_bins,
    heatmap_edges,
    heatmap_frame,
)
from iosweep.analysis.patterns.volume import (
    Tables,
    completeness_of,
    finish_files,
    finish_ranks,
)
from iosweep.analysis.pipeline.completeness import completeness_checks
from iosweep.analysis.pipeline.epochs import PLACES, placement_of, union_lengths
from iosweep.analysis.sections import sections
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.shared import SharedRecords
from iosweep.analysis.subset import narrowed
from iosweep.analysis.summary.build import SummarySections
from iosweep.analysis.timeline.export import Timeline, from_parts
from iosweep.sampling import allocate
from iosweep.trace.schema import RUN_TIME, RunMeta
from iosweep.trace.store import open_store

# A pass over the run's (rank, file) rows holds at most this share of the budget, at this
# much a row (the row, its byte ranges and the files table's temporaries; measured: docs/
# analysis.md, "Memory")
PASS_SHARE = 0.5
PASS_ROW_BYTES = 1000
SPAN_ROW_BYTES = 150  # a time span (place, lo, hi) read, clipped and merged: its copies
# With a second CPU, the union of the spans in time is worked out beside the passes over
# files, within this share of the budget, where there are this many spans (a process started
# takes about 2 s)
SIDE_SHARE = 0.2
SIDE_MIN_ROWS = 1 << 23
# The parts' paths looked up among the run's a batch of parts at a time, a batch's Arrow
# strings at most this share of the budget (held about 4x over while looked up: the 102.5 M
# run's 1 GB of path lists in 200 MB batches took 10 s and peaked at 0.98 GiB; at once,
# 17 s and 3.7 GiB; a part at a time, 18 s)
PATHS_SHARE = 1 / 16
# What the put-together step holds beyond BASE and its passes, a row of the parts' path
# lists: a row of every file of every part, which no pass bounds. Measured on the
# ImageNet-shaped 10.2 M run (1.28 M files): 2.40 M rows in 8 parts peaked at 1.63 GiB
# (--memory-gb 1), 2.24 M rows in 4 parts at 1.82 GiB (1.6): 250-280 B a row once BASE and
# PASS_SHARE of the budget are taken off (docs/analysis.md, "Memory")
PER_PART_PATH = 320


def put_together_need(dirs: list[Path], memory_gb: float | None) -> int:
    """What putting a run's parts (``dirs``, written) together takes at most, in bytes: the
    files' rows, its passes over the (rank, file) rows (at most PASS_SHARE of the budget) and
    the span union beside them (SIDE_SHARE, in a process of its own). An upper bound, to ask a
    scheduler for, counted before the step runs."""
    rows = path_rows(dirs)
    share = budget.budget_bytes(memory_gb)
    passes = min(int(share * PASS_SHARE), PASS_ROW_BYTES * rows)
    return budget.BASE + PER_PART_PATH * rows + passes + int(share * SIDE_SHARE)


@dataclass
class Combined:
    """The run's results put together from its parts'."""

    run: RunFiles
    run_start: float
    run_end: float
    tables: Tables
    files: pd.DataFrame  # the files and (rank, file) tables as written (the busiest files)
    file_ranks: pd.DataFrame
    ops_sample: pd.DataFrame
    heatmap: pd.DataFrame
    made_tables: dict[str, pd.DataFrame]  # the tables the registered sections made, by name
    summary: SummarySections  # the summary's sections, each typed as it was made
    timeline: Timeline | None  # None: not asked for (analysis.timeline.enabled)

    def table(self, name: str) -> pd.DataFrame:
        """The analysis table ``name`` (one of ``ANALYSIS_TABLES``)."""
        own = {
            "files": self.files,
            "file_ranks": self.file_ranks,
            "ranks": self.tables.ranks,
            "nodes": self.tables.nodes,
            "ops_sample": self.ops_sample,
            "heatmap": self.heatmap,
        }
        return own[name] if name in own else self.made_tables[name]


@dataclass
class _Parts:
    """The parts' results and facts, and what the run they make up is known to be."""

    dirs: list[PartResults]
    facts: list[PartFacts]
    codes: tables.RunPaths  # the run's path codes
    meta: RunMeta  # the run's, or of the ranks analysed (``--ranks``)
    run: RunFiles
    start: float
    end: float
    by_file: _ByFile | None = None  # the run's tables, once put together
    windows: pd.DataFrame = field(default_factory=pd.DataFrame)  # its epochs, from its steps
    made: SummarySections = field(default_factory=SummarySections)
    made_tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def settings(self) -> AnalysisSettings:
        return self.run.settings

    @property
    def class_names(self) -> list[str]:
        return self.run.class_names

    @property
    def paths(self) -> list[str]:
        return self.codes.values

    @property
    def tables(self) -> Tables:
        assert self.by_file is not None, "the run's tables are put together first"
        return self.by_file.tables

    @property
    def rows(self) -> FileRankFacts:
        assert self.by_file is not None, "the run's tables are put together first"
        return self.by_file.rows

    @property
    def checkpoint_rows(self) -> pd.DataFrame:
        assert self.by_file is not None, "the run's tables are put together first"
        return self.by_file.checkpoint_rows

    def table(self, name: str, df: pd.DataFrame) -> None:
        if name in self.made_tables:
            raise ValueError(f"two summary sections make the table {name!r}")
        self.made_tables[name] = df

    def values(self, name: str) -> list[Any]:
        """Each part's value ``name`` (:meth:`~.results.PartResults.put_json`)."""
        return [d.json(name) for d in self.dirs]

    @property
    def run_time(self) -> float:
        """The run's seconds; 0 where a log's job record makes them unknown (an issue's
        ``field``: :attr:`run_time_known`)."""
        return max(0.0, self.end - self.start) if self.run_time_known else 0.0

    @property
    def run_time_known(self) -> bool:
        return not any(i.field == RUN_TIME for i in self.meta.issues)

    @property
    def actor_kind(self) -> str:
        """``"rank"``, or ``"process"`` for a run whose store names no ranks (one part)."""
        return self.facts[0].actor_kind

    @property
    def n_ranks(self) -> int:
        return len(self.meta.ranks) or len(self.run.actor_host)

    @property
    def shared(self) -> SharedRecords:
        """The records Darshan reduced for all ranks (a run in several parts has none: they
        cannot be split by rank, :func:`iosweep.analysis.subset.select`)."""
        return self.facts[0].shared_records if len(self.facts) == 1 else SharedRecords()

    @property
    def counted(self) -> bool:
        """Whether the run has Darshan counter records."""
        return sum(f.counter_records for f in self.facts) > 0

    def frames(self, name: str, coded: bool = False) -> list[pd.DataFrame]:
        """The parts' ``name`` frames (those that have one); ``coded``: paths as run's codes."""
        found = [d for d in self.dirs if d.has(name)]
        return [tables.coded(d, name, self.codes) if coded else d.frame(name) for d in found]


def combine(
    store: Path,
    results: list[Path] | list[PartResults],
    settings: AnalysisSettings,
    phases: dict[str, list] | None = None,
    jobs: int = 1,
) -> Combined:
    """The run's results from its parts' (of :func:`analyze_part`, analysed with the same
    ``settings`` and ``phases``; a folder: a part's results on disk); ``jobs``: the CPUs it
    may use."""
    parts = [r if isinstance(r, PartResults) else PartResults(r) for r in results]
    meta = open_store(store).meta
    if meta.phases or phases:
        settings = replace(settings, phases={**settings.phases, **meta.phases, **(phases or {})})
    paths = tables.RunPaths()
    paths.add(parts, int(budget.budget_bytes(settings.memory_gb) * PATHS_SHARE))
    facts = [p.facts() for p in parts]
    chosen = sorted({r for f in facts for r in f.ranks})
    if not any(f.whole for f in facts) and chosen != sorted(r.rank for r in meta.ranks):
        meta = narrowed(meta, chosen, unranked=False)  # --ranks
    actor_host = {a: h for f in facts for a, h in f.actor_host.items()}
    run = RunFiles(
        paths.values,
        classify_paths(pa.array(paths.values, pa.string()), settings),
        class_names(settings, meta, any(f.has_steps for f in facts)),
        dict(sorted(actor_host.items())),
        settings,
    )
    ps = _Parts(
        parts,
        facts,
        paths,
        meta,
        run,
        min(f.run_start for f in facts),
        max(f.run_end for f in facts),
    )
    lengths = _start_place_lengths(ps, jobs)
    by_file, mpiio = _tables(ps, jobs)
    ps.by_file = by_file
    t, rows = by_file.tables, by_file.rows
    # the operations' sample and heatmap (a pass over every part's operations, which nothing
    # else reads) beside the rest, in a thread where there is a second CPU
    ops_pass = partial(
        _ops_pass, ps, set(t.files["class"].astype(str)), t.ranks["rank"].to_numpy(np.int64)
    )
    ops_found = None
    if jobs > 1:
        side = ThreadPoolExecutor(1)
        ops_found = side.submit(ops_pass)
        side.shutdown(wait=False)  # its one thread ends with its one task
    steps = open_store(store).table("steps", ["epoch", "step", "start", "end"]).to_pandas()
    ps.windows = epoch_windows_of(steps)
    summary = ps.made  # each section typed as it is set
    # (the metadata section fills the ranks table's metadata columns: what reads them, below)
    for section in sections():
        summary[section.key] = section.of_run(ps)
    classes = _classes(ps, t, rows, by_file.sharing)
    summary.update({"classes": classes, "access": access_summary(classes)})
    summary["file_shapes"] = (
        shapes_summary(by_file.shapes, part.DATASET) if by_file.shapes is not None else None
    )
    summary["placement"] = placement_of(
        sum(ps.frames(part.PLACE_COUNTS)),
        lengths(),
        facts[0].epochs_known,
        ps.run_time,
    )
    dataset = classes.get("dataset", {})
    checks = completeness_checks(
        meta,
        t.dxt_available or ps.counted,
        int(dataset.get("bytes_read", 0)),
        int(dataset.get("files", 0)),
        summary["pipeline"],
        summary["checkpoints"],
    )
    summary.update(_status(ps, store, t, t.dxt_available, checks))
    summary.update(
        {
            "trace": _trace([f.trace for f in facts], t, ps.shared),
            "run": {
                "start": ps.start,
                "end": ps.end,
                "run_time": ps.run_time if ps.run_time_known else None,
            },
            "ranks": ranks_summary(
                ps.n_ranks,
                ps.actor_kind,
                actor_host,
                t.ranks,
                sorted(
                    {a for f in facts for a in f.unknown_actors}
                    | set(untraced_ranks(ps.meta, ps.actor_kind, t.ranks))
                ),
            ),
            "nodes": t.nodes.to_dict(orient="records"),
            "run_meta": run_meta_summary(meta),
            "volume": volume_summary(t.ranks),
            "imbalance": imbalance_summary(t.ranks),
            "mpiio": mpiio,
            "settings": settings.to_dict(),
        }
    )
    run_time = ps.run_time if ps.run_time_known else None
    summary["headline"] = headline(ps.n_ranks, run_time, summary, t, rows)
    insights, checks = run_checks(
        summary, t.files, t.ranks, settings, rows.spreads if rows.rows else None
    )
    summary.update({"insights": insights, "checks": checks})
    summary["headline"] = {**summary["headline"], "insights": len(insights)}
    files, file_ranks, summary["file_tables"] = file_tables(
        t.files, rows, run, settings.table_max_files
    )
    summary["artefacts"] = sorted((a for f in facts for a in f.artefacts), key=lambda a: a["path"])
    sample, heat, info = ops_found.result() if ops_found else ops_pass()
    summary["ops_sample"] = asdict(info)
    timeline = None
    if settings.timeline["enabled"]:
        records = [f.timeline for f in facts if f.timeline is not None]
        assert len(records) == len(facts), "each part writes its slices when asked for"
        slices = [partial(d.select, part.TIMELINE) for d in parts]
        timeline = from_parts(slices, records, settings.timeline, meta, actor_host, ps.start)
    return Combined(
        run=run,
        run_start=ps.start,
        run_end=ps.end,
        tables=t,
        files=files,
        file_ranks=file_ranks,
        ops_sample=sample,
        heatmap=heat,
        made_tables=ps.made_tables,
        summary=summary,
        timeline=timeline,
    )


@dataclass
class _ByFile:
    """What the run's figures take from rows of files, put together a few files at a time:
    the tables, the (rank, file) rows' facts, the rows of its checkpoint files, each class's
    sharing of files within epochs and the dataset's read shapes."""

    tables: Tables
    rows: FileRankFacts
    checkpoint_rows: pd.DataFrame
    sharing: dict[int, EpochSharing]
    shapes: ShapeGroups | None


def _by_file(ps: _Parts, ranks: pd.DataFrame, agg: list[int] | None, jobs: int = 1) -> _ByFile:
    """:class:`_ByFile` from the parts' rows, every row of a file in the same pass
    (:func:`tables.passes`), so that no more of them than the budget allows are held; with
    ``jobs`` > 1, two passes at a time in threads (Arrow, numpy and pandas' sorts and
    groupings let go of the GIL), each of half as many rows."""
    s = ps.run.settings
    epochs: dict[int, set[int]] = {}
    for f in ps.facts:
        for c, e in f.pair_epochs.items():
            epochs.setdefault(c, set()).update(e)
    hosts, files, kept = hosts_of(ranks), [], []
    facts: FileRankFacts | None = None
    busiest: pd.DataFrame | None = None  # the busiest files so far
    reads = np.zeros((2, len(hosts)))
    sharing = {c: epoch_sharing(pd.DataFrame(), np.array(sorted(e))) for c, e in epochs.items()}
    shapes: ShapeGroups | None = None
    threads = 2 if jobs > 1 else 1
    one_pass = partial(_pass_of, ps, hosts, agg, {c: e.epochs for c, e in sharing.items()})
    with ThreadPoolExecutor(threads) as pool:
        for found in pool.map(one_pass, tables.passes(ps.dirs, pass_rows(s) // threads)):
            files.append(found.files)
            reads += found.reads
            facts = found.facts if facts is None else facts + found.facts
            # only the rows of the busiest files so far: each pass's own would add up to GBs
            seen = (
                found.files
                if busiest is None
                else pd.concat([busiest, found.files], ignore_index=True)
            )
            busiest = busiest_files(seen, s.table_max_files)
            facts.busiest = facts.busiest[facts.busiest["file"].isin(busiest["file"])]
            kept.append(found.kept)
            for c, sh in found.sharing.items():
                sharing[c] += sh
            if found.shapes is not None:
                shapes = found.shapes if shapes is None else shapes + found.shapes
            del found
            # the heap a pass leaves free, handed back before the next: its reads are row
            # groups of 32 Ki rows, under malloc's mmap threshold
            memory.release()
    files = pd.concat(files, ignore_index=True).sort_values("file", ignore_index=True)
    t = Tables(None, files, ranks, nodes_table(ranks, reads), False, None)
    assert facts is not None, "a run has a pass"
    return _ByFile(t, in_run_order(facts), pd.concat(kept, ignore_index=True), sharing, shapes)


@dataclass
class _PassFound:
    """What :func:`_by_file` takes from one pass's files."""

    files: pd.DataFrame  # their rows of the files table
    reads: np.ndarray  # what each host read of them (node_reads)
    facts: FileRankFacts
    kept: pd.DataFrame  # their checkpoint class's (rank, file) rows
    sharing: dict[int, EpochSharing]  # per class, their sharing within epochs
    shapes: ShapeGroups | None


def _pass_of(
    ps: _Parts,
    hosts: list[str],
    agg: list[int] | None,
    epochs: dict[int, np.ndarray],
    buckets: tuple[int, int],
) -> _PassFound:
    """:class:`_PassFound` of the files in the ``buckets`` range (``epochs``: each class's
    with reads, the run's)."""
    s, run = ps.run.settings, ps.run
    ci = run.class_names.index(CLASS) if CLASS in run.class_names else -1
    fr, spans = tables.pass_rows(ps.dirs, ps.codes, buckets)
    fr, f, r = finish_files(fr, spans, run, hosts)
    del spans
    of_pass = facts_of(fr, f, len(run.class_names), agg, s)
    kept = fr[fr["class"].to_numpy() == ci]
    del fr
    pairs = tables.pass_frame(ps.dirs, ps.codes, part.EPOCH_PAIRS, buckets)
    sharing = {
        int(c): epoch_sharing(p, epochs[int(c)])
        for c, p in (pairs.groupby("cls") if pairs is not None else ())
    }
    del pairs
    return _PassFound(f, r, of_pass, kept, sharing, _pass_shapes(ps, buckets))


def _pass_shapes(ps: _Parts, buckets: tuple[int, int]) -> ShapeGroups | None:
    """The dataset's read shapes of a pass's files (None where no part read it)."""
    if part.DATASET not in ps.run.class_names:
        return None
    streams = tables.pass_frame(ps.dirs, ps.codes, part.SHAPE_STREAMS, buckets)
    if streams is None:
        return None
    name = part.OPENS_COUNTED if ps.counted else part.OPENS_CALLED
    opens = tables.pass_frame(ps.dirs, ps.codes, name, buckets)
    assert opens is not None, "a part with read streams has its opens"
    return shape_groups(streams, opens.groupby("file")["opens"].sum())


def _tables(ps: _Parts, jobs: int) -> tuple[_ByFile, dict[str, Any] | None]:
    """The run's files, ranks and nodes tables, what the summary takes from its (rank, file)
    rows and the other rows of files (:func:`_by_file`), and its MPI-IO summary (the
    shared-file spreads are among MPI-IO's aggregators)."""
    s = ps.run.settings
    rank_rows, counts = tables.ranks_and_counts(ps.dirs)
    ranks = finish_ranks(rank_rows, ps.run_time, s)
    layer = _mpiio(ps)
    # the rows of the files MPI-IO opened, read only where it did (a filtered read of every
    # part's rows otherwise)
    rows = (
        tables.rows_of(ps.dirs, ps.codes, np.union1d(layer.ops["file"], layer.records["file"]))
        if layer
        else pd.DataFrame()
    )
    mpiio = mpiio_of(layer, ps.n_ranks, ranks, rows)
    by_file = _by_file(ps, ranks, aggregator_ranks(mpiio, ranks), jobs)
    by_file.tables.dxt_available = counts["ops"] > 0
    by_file.tables.completeness = completeness_of(**counts)
    return by_file, mpiio


def pass_rows(s: AnalysisSettings) -> int:
    """The most (rank, file) rows a pass over the run's may hold."""
    return max(1, int(budget.budget_bytes(s.memory_gb) * PASS_SHARE) // PASS_ROW_BYTES)


def place_lengths(dirs: list[PartResults], memory_gb: float | None, share: float) -> np.ndarray:
    """The length of the union in time of the parts' operations per place (as
    :func:`~iosweep.analysis.pipeline.epochs.span_lengths`), a window of time at a time: each
    part's spans are in (place, time) order, so a window reads only its rows (clipped to it);
    the windows are cut where the parts' row groups start so that each holds about
    ``share x budget / SPAN_ROW_BYTES`` rows (the run's union grows with the run)."""
    starts: list[float] = []
    rows: list[int] = []
    for d in dirs:
        s, n = d.group_starts(part.PLACE_SPANS, "lo")
        starts += s
        rows += n
    order = np.argsort(starts, kind="stable")
    cum, at = np.cumsum(np.asarray(rows)[order]), np.asarray(starts, np.float64)[order]
    per = max(1, int(budget.budget_bytes(memory_gb) * share) // SPAN_ROW_BYTES)
    cuts = np.unique(at[np.searchsorted(cum, np.arange(per, cum[-1] if len(cum) else 0, per))])
    edges = [-np.inf, *cuts[np.isfinite(cuts)].tolist(), np.inf]
    total = np.zeros(len(PLACES) + 1)
    for a, b in itertools.pairwise(edges):
        where = [("lo", "<", b), ("hi", ">", a)] if len(edges) > 2 else None
        t = pd.concat([d.select(part.PLACE_SPANS, filters=where) for d in dirs])
        lo, hi = np.maximum(t["lo"].to_numpy(), a), np.minimum(t["hi"].to_numpy(), b)
        total += union_lengths(t["place"].to_numpy(), lo, hi)
    return total


def _start_place_lengths(ps: _Parts, jobs: int) -> Callable[[], np.ndarray]:
    """:func:`place_lengths` of the parts, to be had by calling what this returns: with more
    than one job and many spans on disk, worked out in a process beside this one while the
    rest is put together (windows of ``SIDE_SHARE`` of the budget), else when called."""
    dirs, gb = ps.dirs, ps.run.settings.memory_gb
    spans = sum(d.rows(part.PLACE_SPANS) for d in dirs)
    if jobs < 2 or spans < SIDE_MIN_ROWS or any(d.held for d in dirs):
        return lambda: place_lengths(dirs, gb, PASS_SHARE)
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    found = pool.submit(place_lengths, dirs, gb, SIDE_SHARE)
    pool.shutdown(wait=False)  # its one process ends with its one task

    def result() -> np.ndarray:
        return found.result()

    return result


def _classes(
    ps: _Parts, t: Tables, rows: FileRankFacts, sharing: dict[int, EpochSharing]
) -> dict[str, Any]:
    """The classes, with the sharing of their files within epochs from the parts' read
    pairs."""
    per_epoch = {}
    for ci, name in enumerate(ps.run.class_names):
        pe = sharing[ci].summary() if ci in sharing else None
        if pe:
            per_epoch[name] = pe
    return classes_summary(
        ps.run.class_names, ps.n_ranks, ps.run.settings, t.files, rows, per_epoch
    )


def _status(
    ps: _Parts, store: Path, t: Tables, has_ops: bool, checks: list[dict[str, Any]]
) -> dict[str, Any]:
    """The summary's first keys: the run and its analysis status, from the issues the parts
    found reading (their untimed segments added up into one) and the completeness checks."""
    untimed = sum(f.untimed for f in ps.facts)
    issues = ([asdict(untimed_issue(untimed))] if untimed else []) + [
        i for f in ps.facts for i in f.issues
    ]
    issues += coverage_issues(ps.meta, ps.actor_kind, t.ranks)
    # where all the trace saw was on paths left out (terminal output): said, not an error
    left_out = sorted(
        {p for f in ps.facts for p in f.trace.excluded_paths}
        if any(f.trace.excluded_ops or f.trace.excluded_records for f in ps.facts)
        else set()
    )
    status = status_of(
        ps.meta,
        str(store),
        issues,
        has_ops or ps.counted,
        t.dxt_available,
        ps.counted,
        ps.shared,
        [x for f in ps.facts for x in f.limitations],
        left_out,
    )
    return status_sections(ps.meta, store, status, checks)


def _ops_pass(
    ps: _Parts, classes: set[str], actors: np.ndarray
) -> tuple[pd.DataFrame, pd.DataFrame, OpsSampleInfo]:
    """The sample of operations the report plots and the heatmap, from each part's operations
    in turn (a second pass: the sample's share of each stratum and the heatmap's bins are
    the run's). A stratum's sample is taken evenly spaced in (rank, time) order over the whole
    run, as :func:`iosweep.sampling.pick` does: parts hold consecutive ranks (the unranked
    first), so each takes the positions that fall among its own. ``actors``: the ranks
    table's (every rank with operations is a row)."""
    names = class_order(classes)
    s = ps.run.settings
    counts: dict[int, int] = {}
    for f in ps.facts:
        for key, n in f.op_classes.items():
            ci, w = map(int, key.split())
            stratum = int(op_strata(np.array([ci]), np.array([w]), ps.run.class_names, names)[0])
            counts[stratum] = counts.get(stratum, 0) + n
    total = sum(counts.values())
    strata = np.array(sorted(counts), np.int64)
    wanted = allocate(np.array([counts[k] for k in strata], np.int64), s.plot_sample_ops)
    at = {
        int(k): np.linspace(0, counts[int(k)] - 1, q).round().astype(np.int64)
        for k, q in zip(strata, wanted, strict=True)
        if q > 0
    }
    spans = [f.ranked_span for f in ps.facts if f.ranked_span]
    edges = (
        heatmap_edges(ps.start, ps.end, min(x[0] for x in spans), max(x[1] for x in spans))
        if spans
        else None
    )
    bins = np.zeros((3, len(actors), HEATMAP_BINS))
    seen = dict.fromkeys(counts, 0)
    rows = []
    for d in ps.dirs:
        ops = tables.recoded(d.take(part.OPS), ps.codes, d)
        st = op_strata(ops["class"].to_numpy(), ops["op"].to_numpy(), ps.run.class_names, names)
        idx = np.arange(len(ops)) if total <= s.plot_sample_ops else _picked(ops, st, at, seen)
        rows.append(sample_frame(ops, idx, st, ps.codes.values, names))
        m = ops["actor"].to_numpy() >= 0
        if edges is not None and m.any():
            o = ops[m]
            bins += heatmap_bins(
                o["actor"].to_numpy(),
                o["op"].to_numpy(),
                o["length"].to_numpy(),
                o["start"].to_numpy(),
                actors,
                edges,
            )
    sample = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    heat = (
        heatmap_frame(bins, actors, edges)
        if edges is not None
        else pd.DataFrame(columns=HEATMAP_COLUMNS)
    )
    info = OpsSampleInfo(
        total,
        len(sample),
        sum(f.trace.excluded_io_ops for f in ps.facts),
        names,
        _added([f.other_layer_ops for f in ps.facts]),
    )
    return sample, heat, info


def _picked(
    ops: pd.DataFrame, strata: np.ndarray, at: dict[int, np.ndarray], seen: dict[int, int]
) -> np.ndarray:
    """A part's rows that hold the run's sample positions ``at`` of each stratum, in (rank,
    time) order; ``seen``: the operations of each stratum in the parts before (updated)."""
    order = np.lexsort((ops["start"].to_numpy(), ops["actor"].to_numpy()))
    s = strata[order]
    picked = []
    for k in np.unique(s):
        members = order[s == k]
        first = seen[int(k)]
        pos = at.get(int(k), np.empty(0, np.int64))
        mine = pos[(pos >= first) & (pos < first + len(members))] - first
        picked.append(members[mine])
        seen[int(k)] = first + len(members)
    return np.sort(np.concatenate(picked)) if picked else np.empty(0, np.int64)


def _added(counts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def _mpiio(ps: _Parts) -> MpiioLayer | None:
    """The run's MPI-IO layer: the parts' operations and records (None where no part has
    MPI-IO)."""
    ops = ps.frames(part.MPIIO_OPS, coded=True)
    if not ops:
        return None
    records = pd.concat(ps.frames(part.MPIIO_RECORDS, coded=True), ignore_index=True)
    return MpiioLayer(pd.concat(ops, ignore_index=True), records)


def _trace(parts: list[PartTrace], t: Tables, shared: SharedRecords) -> dict[str, Any]:
    """The trace section from the parts' counts and the records Darshan reduced for all
    ranks (``shared``: a spread record is one of the log's, not one per rank)."""
    counted = sum(p.counter_records for p in parts)
    return {
        "segments": sum(p.segments for p in parts),
        "counter_records": counted - shared.spread * max(shared.ranks - 1, 0),
        "dxt_available": t.dxt_available,
        "completeness": t.completeness,
        "excluded_ops": sum(p.excluded_ops for p in parts),
        "excluded_records": sum(p.excluded_records for p in parts),
        "excluded_paths": sorted({x for p in parts for x in p.excluded_paths})[:5],
        "unsized_io_calls": sum(p.unsized_io_calls for p in parts),
        "unattributed": {k: sum(p.unattributed[k] for p in parts) for k in parts[0].unattributed},
        "shared_records": shared.to_json(),
    }
