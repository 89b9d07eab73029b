"""A part of a run analysed on its own: what each section takes from its ranks, its results
(:class:`~.results.PartResults`, files or held in memory) for :mod:`.combine` to put
together."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from iosweep import memory
from iosweep.analysis.data import WRITE, RunData, load_run, unsized_io_calls, untimed_issue
from iosweep.analysis.parts import tables
from iosweep.analysis.parts.facts import PartFacts, PartTrace
from iosweep.analysis.parts.plan import Part, whole_run
from iosweep.analysis.parts.results import PartResults
from iosweep.analysis.patterns.access import epoch_read_pairs
from iosweep.analysis.patterns.artefacts import fd_reuse, remove
from iosweep.analysis.patterns.shapes import opens_per_file, read_streams
from iosweep.analysis.patterns.spatial import classify_ops
from iosweep.analysis.patterns.volume import TablesPart, tables_part
from iosweep.analysis.pipeline.epochs import (
    op_epochs,
    op_places,
    place_spans,
    rank_windows,
    run_windows,
    windows_of,
)
from iosweep.analysis.pipeline.phases import use_annotated_steps
from iosweep.analysis.sections import PartIn, PartsError, sections
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.subset import select
from iosweep.analysis.timeline.export import part_slices
from iosweep.files import no_space_named
from iosweep.trace.store import open_store

EPOCH_PAIRS = "epoch_pairs.parquet"  # reads in epochs per (class, epoch, file, rank)
PLACE_COUNTS, PLACE_SPANS = "place_counts.parquet", "place_spans.parquet"
DATASET = "dataset"  # the class whose read shapes the summary describes
SHAPE_STREAMS = "shape_streams.parquet"  # its read streams, per (file, epoch, rank)
OPENS_COUNTED, OPENS_CALLED = "opens_counted.parquet", "opens_called.parquet"
OPS = "ops.parquet"  # the part's analysed operations (its sample and heatmap: second pass)
TIMELINE = "timeline.parquet"  # its first slices of the run's timeline (timeline.export)
MPIIO_OPS, MPIIO_RECORDS = "mpiio_ops.parquet", "mpiio_records.parquet"


def part_data(
    store: Path, part: Part, settings: AnalysisSettings, phases: dict[str, list] | None = None
) -> tuple[RunData, list[dict[str, Any]]]:
    """The part's data: tracer artefacts out (and the records of them), annotated steps in
    where the run records no steps (any rank's steps: a part's ranks may have none of their
    own)."""
    subset = None if part.whole else select(open_store(store), part.ranks, part.unranked)
    rd = load_run(store, settings, phases, subset)
    memory.release()  # the Arrow tables read are gone; their pages need not stay
    mask, artefacts = fd_reuse(rd)
    remove(rd, mask, artefacts)
    if not _records_steps(store):
        use_annotated_steps(rd)
    return rd, artefacts


def load_analysed(
    store: Path | str, settings: AnalysisSettings, phases: dict[str, list] | None = None
) -> RunData:
    """The whole run of a trace store, read as its analysis reads it (:func:`part_data`)."""
    return part_data(Path(store), whole_run(store), settings, phases)[0]


def _records_steps(store: Path) -> bool:
    """Whether any rank's training steps are recorded (``use_annotated_steps``'s test, made
    for the whole run)."""
    step = open_store(store).table("steps", ["step"])["step"]
    return bool(len(step)) and bool(pc.any(pc.greater_equal(step, 0)).as_py())


def analyze_part(
    store: Path,
    part: Part,
    out: Path | PartResults,
    settings: AnalysisSettings,
    phases: dict[str, list] | None = None,
) -> PartResults:
    """The part's results: files under ``out`` (a folder per part), or held in memory where
    ``out`` is (the only part of its analysis: what only parts put together need is not asked
    of it). A full file system raises NoSpaceError naming the folder."""
    res = out if isinstance(out, PartResults) else PartResults(out)
    with no_space_named(res.folder, "the part's results"):
        _analyze_part(store, part, res, settings, phases)
    return res


def _analyze_part(
    store: Path,
    part: Part,
    out: PartResults,
    settings: AnalysisSettings,
    phases: dict[str, list] | None,
) -> None:
    memory.map_large_arrays()
    rd, artefacts = part_data(store, part, settings, phases)
    alone = out.held
    if rd.timing is not None and not alone:
        raise PartsError(
            f"{store}: the run's steps come from its trace's annotations, which a part of its "
            "ranks cannot place in the run's epochs yet: analyse it whole"
        )
    out.start()
    timeline = None
    if settings.timeline["enabled"]:
        slices, timeline = part_slices(rd)
        out.put(TIMELINE, slices)
        del slices
    # the (rank, file) tables next: their peak is the part's, and frames held
    # in memory (a run of one part) would add to it; the per-operation columns only the
    # timeline and the tables read are let go of first, and the time order's memo (at 30 M
    # segments, 0.23 GiB each)
    rd.ops.thread = None
    sp = classify_ops(rd)
    rd.cache.pop("time_rank", None)  # (classify_ops's memo: made again where asked for)
    tp = tables_part(rd, sp)
    sp.order = sp.key = np.empty(0, np.int64)  # (the stream sort: the tables' alone)
    rd.ops.host = rd.ops.module = None
    memory.release()
    windows, whole_run_epochs = rank_windows(rd), run_epochs(store)
    op_epoch = op_epochs(rd, windows, whole_run_epochs)
    # the sections before the placement's spans are held (large: each operation's time)
    part_in = PartIn(rd, alone, op_epoch, sp, _file_sizes(rd, tp))
    for section in sections():
        section.of_part(part_in, out)
    counts, spans = place_spans(rd, op_places(rd, op_epoch, windows, whole_run_epochs))
    out.put(PLACE_COUNTS, counts)
    # in (place, time) order as merged, in small row groups: the put-together step reads a
    # window of time at a time (combine.place_lengths), each place's rows a sorted run
    out.put(PLACE_SPANS, spans, group_rows=1 << 15)
    pairs = pd.concat(
        [epoch_read_pairs(rd, op_epoch, ci).assign(cls=ci) for ci in range(len(rd.class_names))],
        ignore_index=True,
    )
    out.put(EPOCH_PAIRS, pairs, rd.paths, by_bucket=True)
    # per class, the epochs its reads fall in (the run's: those of every part)
    pair_epochs = {
        int(c): sorted(e.tolist()) for c, e in pairs.groupby("cls")["epoch"].unique().items()
    }
    del pairs
    _write_shapes(rd, op_epoch, out)
    _write_mpiio(rd, out)
    facts = PartFacts(
        ranks=part.ranks,
        whole=part.whole,
        actor_kind=rd.actor_kind,
        shared_records=rd.shared_records,
        unknown_actors=rd.unknown_actors,
        # what was not analysed: said of the analysis of one part (--ranks), not of a part
        limitations=list(rd.limitations) if alone else [],
        actor_host=dict(rd.actor_host),
        run_start=rd.run_start,
        run_end=rd.run_end,
        has_steps=not rd.steps.empty,
        counter_records=len(rd.counters),
        epochs_known=not whole_run_epochs.empty,
        pair_epochs=pair_epochs,
        # what reading found: the untimed segments counted apart (the run's issue adds them up)
        untimed=rd.untimed,
        issues=[asdict(i) for i in rd.issues if i != untimed_issue(rd.untimed)],
        artefacts=artefacts,
        op_classes=_op_classes(rd),
        ranked_span=_ranked_span(rd),
        timeline=timeline,
        other_layer_ops=rd.other_layer_ops,
        trace=PartTrace(
            segments=len(rd.ops),
            counter_records=len(rd.counters),
            excluded_ops=rd.excluded_ops,
            excluded_records=rd.excluded_records,
            excluded_paths=rd.excluded_paths,
            excluded_io_ops=rd.excluded_io_ops,
            unsized_io_calls=unsized_io_calls(rd.app_events),
            unattributed=rd.unattributed,
        ),
    )
    tables.write_part(tp, rd.paths, facts, out)
    # held: its columns are rd.ops's own (not copied), the rest goes with rd
    out.put(OPS, _ops_frame(rd), rd.paths)


def _write_shapes(rd: RunData, op_epoch: np.ndarray, out: PartResults) -> None:
    """The dataset's read streams and its files' opens, counted by Darshan (where the part
    has counters) and as open calls (which the run uses depends on whether any part has
    counters)."""
    if DATASET not in rd.settings.class_names:
        return
    ci = rd.settings.class_names.index(DATASET)
    streams = read_streams(rd, op_epoch, ci)
    if streams is not None:
        out.put(SHAPE_STREAMS, streams, rd.paths, by_bucket=True)
    for counted, name in ((True, OPENS_COUNTED), (False, OPENS_CALLED)):
        if counted and not len(rd.counters):
            continue
        opens = opens_per_file(rd, ci, counted).rename("opens").rename_axis("file")
        out.put(name, opens.reset_index(), rd.paths, by_bucket=True)


def _file_sizes(rd: RunData, tp: TablesPart) -> np.ndarray:
    """Each file's size as the part's ranks see it (per path code): the furthest byte any of
    them touched, from the part's own (rank, file) rows."""
    size = np.zeros(max(len(rd.paths), 1), np.int64)
    fr = tp.file_rank
    np.maximum.at(size, fr["file"].to_numpy(), fr["extent"].to_numpy().clip(min=0))
    return size


def _write_mpiio(rd: RunData, out: PartResults) -> None:
    """The MPI-IO layer's operations and records (their host and module codes are the
    part's own: left out)."""
    if rd.mpiio is not None:
        out.put(MPIIO_OPS, rd.mpiio.ops, rd.paths)
        out.put(MPIIO_RECORDS, rd.mpiio.records.drop(columns=["host", "module"]), rd.paths)


def _ops_frame(rd: RunData) -> pd.DataFrame:
    """The operations, for what needs the run's figures before it can take its share of
    them (the sample of operations the report plots, the heatmap's bins)."""
    ops = rd.ops
    columns = ("actor", "file", "op", "offset", "length", "start", "end")
    frame = pd.DataFrame({k: getattr(ops, k) for k in columns}, copy=False)
    frame["class"] = rd.file_class[ops.file] if len(ops) else np.empty(0, np.int8)
    return frame


def _op_classes(rd: RunData) -> dict[str, int]:
    """Operations per (file class, write): ``"<class index> <0|1>"``."""
    key = rd.file_class[rd.ops.file].astype(np.int64) * 2 + (rd.ops.op == WRITE)
    values, counts = np.unique(key, return_counts=True)
    return {f"{v // 2} {v % 2}": int(n) for v, n in zip(values, counts, strict=True)}


def _ranked_span(rd: RunData) -> tuple[float, float] | None:
    """The ranks' first operation's start and last one's end."""
    m = rd.ops.actor >= 0
    return (float(rd.ops.start[m].min()), float(rd.ops.end[m].max())) if m.any() else None


def run_epochs(store: Path) -> pd.DataFrame:
    """The run's epochs, from every rank's steps: a part's ranks that logged no steps of
    their own read in them."""
    steps = open_store(store).table("steps", ["rank", "epoch", "step", "start", "end"])
    windows = windows_of(steps.to_pandas().rename(columns={"rank": "actor"}))
    return run_windows(windows) if not windows.empty else windows
