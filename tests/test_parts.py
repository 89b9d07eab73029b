"""A run analysed in parts of whole ranks (iosweep.analysis.parts) gives the results the run
analysed whole gives, its (rank, file) rows put together a few files at a time; parts are cut
where the budget says."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import shared_fixture
from factories import make_store
from pydantic import TypeAdapter

from iosweep.analysis import analyze_run, budget
from iosweep.analysis.parts import combine as combine_module
from iosweep.analysis.parts import tables
from iosweep.analysis.parts.combine import combine
from iosweep.analysis.parts.plan import Part, plan, plan_jobs
from iosweep.analysis.parts.results import BUCKETS, PATHS, PartResults, buckets_of
from iosweep.analysis.parts.run import analyze_part, part_data
from iosweep.analysis.patterns.file_ranks import ValueCounts
from iosweep.analysis.patterns.spatial import classify_ops
from iosweep.analysis.patterns.volume import build_tables, widen
from iosweep.analysis.sections import PartsError
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.subset import RankSubsetError
from iosweep.analysis.summary import ANALYSIS_TABLES
from iosweep.analysis.summary.run import RunSummary
from iosweep.analysis.timeline import export
from iosweep.cli import main as iosweep_main
from iosweep.files import json_safe
from iosweep.testing.imagenet_trace import write_imagenet_store
from iosweep.trace.ingest import ingest
from iosweep.trace.store import open_store

# 12,810 files over 8 ranks, 2 epochs (tests/test_imagenet_trace.py): a rank reads 1,601
# files an epoch in 4 reads each, one counter record a file; rank 0 also writes a checkpoint
# after each epoch in 95 writes of 1 MiB
FILES, RANKS, WORKERS, EPOCHS = 12_810, 8, 4, 2
RANK_SEGMENTS = 1_601 * EPOCHS * 4
RANK_RECORDS = 1_601 * EPOCHS


@pytest.fixture(scope="module")
def imagenet_store(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imagenet") / "store"
    write_imagenet_store(out, FILES, RANKS, WORKERS, EPOCHS)
    return out


def _gib(need: budget.Need) -> float:
    return need.bytes / budget.GIB


def test_parts_hold_whole_ranks_as_many_as_the_budget_allows(imagenet_store):
    one = budget.Need(RANK_SEGMENTS, RANK_RECORDS, 0)
    rank0 = budget.Need(RANK_SEGMENTS + 95 * EPOCHS, RANK_RECORDS, 0)
    three = budget.Need(3 * RANK_SEGMENTS, 3 * RANK_RECORDS, 0)
    # room for three ranks, not four (rank 0 is 190 segments more: still three with it)
    gb = _gib(budget.Need(3 * RANK_SEGMENTS + 95 * EPOCHS, 3 * RANK_RECORDS, 0))
    parts = plan(imagenet_store, gb)
    assert [p.ranks for p in parts] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert [p.unranked for p in parts] == [True, False, False]
    assert parts[0].need == budget.Need(rank0.segments + 2 * one.segments, 3 * RANK_RECORDS, 0)
    assert parts[1].need == three
    assert parts[2].need == budget.Need(2 * RANK_SEGMENTS, 2 * RANK_RECORDS, 0)
    # everything fits in one part when the budget allows the whole run
    assert [p.ranks for p in plan(imagenet_store, 64.0)] == [list(range(RANKS))]


def test_parts_at_once_share_the_budget(imagenet_store, monkeypatch):
    three = budget.Need(3 * RANK_SEGMENTS + 95 * EPOCHS, 3 * RANK_RECORDS, 0).bytes
    # the whole run where it fits: one at a time; none fits a share (each holds a process's
    # own memory, BASE): one at a time, the budget's parts
    assert plan_jobs(imagenet_store, 64.0, 4) == (plan(imagenet_store, 16.0), 1)
    assert plan(imagenet_store, 64.0)[0].whole
    assert plan_jobs(imagenet_store, three / budget.GIB, 8) == (
        plan(imagenet_store, three / budget.GIB),
        1,
    )
    # a process's own memory counted as none, so that the whole run (which would be analysed
    # as one part) does not fit the budgets below: 8 ranks' rows against 6 at most
    monkeypatch.setattr(budget, "BASE", 0)
    # two at a time: each part within half the budget (less what the caller holds meanwhile)
    three = budget.Need(3 * RANK_SEGMENTS + 95 * EPOCHS, 3 * RANK_RECORDS, 0).bytes
    parts, jobs = plan_jobs(imagenet_store, 2 * three / budget.GIB, 2)
    assert ([p.ranks for p in parts], jobs) == ([[0, 1, 2], [3, 4, 5], [6, 7]], 2)
    held = 2 * RANK_SEGMENTS * budget.PER_SEGMENT  # a share a rank's segments smaller
    parts, jobs = plan_jobs(imagenet_store, 2 * three / budget.GIB, 2, held=held)
    assert ([p.ranks for p in parts], jobs) == ([[0, 1], [2, 3], [4, 5], [6, 7]], 2)
    # a rank fits a third of the budget, not a quarter: three at a time
    rank0 = budget.Need(RANK_SEGMENTS + 95 * EPOCHS, RANK_RECORDS, 0).bytes
    parts, jobs = plan_jobs(imagenet_store, 3 * rank0 / budget.GIB, 4)
    assert ([p.ranks for p in parts], jobs) == ([[r] for r in range(RANKS)], 3)


def test_a_rank_larger_than_the_budget_is_named(imagenet_store):
    with pytest.raises(
        budget.MemoryBudgetError,
        match=r"rank 0: 12,998 segments, 3,202 counter records .* need about 0.505 GiB",
    ):
        plan(imagenet_store, _gib(budget.Need(RANK_SEGMENTS, RANK_RECORDS, 0)))


def _sorted(df: pd.DataFrame, paths: list[str], keys: list[str]) -> pd.DataFrame:
    """The table with paths for file codes (each analysis codes paths its own way), rows in
    ``keys`` order."""
    df = widen(df)
    df["file"] = np.asarray(paths, dtype=object)[df["file"].to_numpy()]
    return df.sort_values(keys).reset_index(drop=True)


def _assert_same_results(
    store: Path,
    parts: list[list[int]],
    tmp_path: Path,
    settings: AnalysisSettings | None = None,
    passes: tuple[pytest.MonkeyPatch, int] | None = None,
    jobs: int = 1,
) -> None:
    """``passes``: the (rank, file) rows put together in about this many passes; ``jobs``:
    the CPUs the put-together step may use."""
    settings = settings or AnalysisSettings()
    summary = analyze_run(store, tmp_path / "whole", settings)  # the whole run's, as written
    outs = []
    for i, ranks in enumerate(parts):
        outs.append(tmp_path / f"part-{i}")
        analyze_part(store, Part(i, ranks, i == 0, budget.Need(0, 0, 0)), outs[-1], settings)
    if passes:  # the (rank, file) rows put together in about that many passes
        rows = sum(sum(json.loads((o / "part.json").read_text())["bucket_rows"]) for o in outs)
        at_most = rows // passes[1] + 1
        passes[0].setattr(combine_module, "pass_rows", lambda s: at_most)
        held = [PartResults(o) for o in outs]
        assert len(combine_module.tables.passes(held, at_most)) > 1
    combined = combine(store, outs, settings, jobs=jobs)
    t = combined.tables
    # the per-file table whole (the one written holds the busiest files only); the (rank,
    # file) rows are never put together: the figures taken from them are in the summary
    every_rank = sorted(r.rank for r in open_store(store).meta.ranks)
    rd, _ = part_data(store, Part(0, every_rank, True, budget.Need(0, 0, 0)), settings)
    whole = build_tables(rd, classify_ops(rd))
    a = _sorted(whole.files, rd.paths, ["file"])
    b = _sorted(t.files, combined.run.paths, ["file"])
    # sums of seconds may add up in another order: equal to the last bits
    pd.testing.assert_frame_equal(a, b, check_dtype=False, rtol=1e-12, obj="files")
    assert (t.dxt_available, t.completeness) == (
        summary["trace"]["dxt_available"],
        summary["trace"]["completeness"],
    )
    assert (combined.run_start, combined.run_end) == (
        summary["run"]["start"],
        summary["run"]["end"],
    )
    keys_of = {
        "ranks": ["rank"],
        "nodes": ["host"],
        "pipeline": ["rank", "epoch"],
        "sizes": ["binning", "class", "op", "bin"],
        "overlap": ["rank", "epoch"],
        "unoverlapped": ["rank", "pid"],
        "phases": ["phase"],
        "files": ["path"],
        "file_ranks": ["path", "rank"],
        "heatmap": ["rank", "bin"],
        "ops_sample": ["rank", "start", "path", "offset"],
    }
    assert sorted(keys_of) == sorted(ANALYSIS_TABLES)  # every table the analysis writes
    for name, keys in keys_of.items():
        table = combined.table(name)
        table = table.drop(columns="file") if name in ("files", "file_ranks") else table
        table = _strings(table) if name == "ops_sample" else table
        written = pd.read_parquet(tmp_path / "whole" / f"{name}.parquet")
        written = written.drop(columns="file") if name in ("files", "file_ranks") else written
        written = _strings(written) if name == "ops_sample" else written
        pd.testing.assert_frame_equal(
            table.sort_values(keys, ignore_index=True),
            written.sort_values(keys, ignore_index=True),
            check_dtype=False,
            rtol=1e-12,
            obj=name,
        )
    sections = combined.summary
    for name, section in sections.items():
        _assert_close(_as_written(name, section), summary[name], name)
    # the timeline: its record, and the file written with the same summary's verdict
    assert combined.timeline is not None
    assert json_safe(combined.timeline.record()) == summary["timeline"]
    mine = export.write(open_store(store).meta, combined.timeline, summary, tmp_path / "tl.gz")
    assert _timeline(mine) == _timeline(tmp_path / "whole" / export.FILE)


def _timeline(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _strings(sample: pd.DataFrame) -> pd.DataFrame:
    """The sample with its paths and classes as text (their categories' order is the order
    the analysis coded them)."""
    return sample.astype({"path": str, "class": str})


def _as_written(name: str, section: Any) -> Any:
    """A summary's section as summary.json holds it: through its model, as JSON."""
    field = next(f for n, f in RunSummary.model_fields.items() if (f.alias or n) == name)
    model = TypeAdapter(field.annotation)
    return json.loads(model.dump_json(model.validate_python(json_safe(section)), by_alias=True))


def _assert_close(a: Any, b: Any, where: str = "") -> None:
    """Equal, numbers to 1e-12 relative (sums of seconds in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-12), where
    else:
        assert a == b, where


@pytest.mark.parametrize(
    "fixture",
    [
        "horovod-pytorch-mnist/darshan-np4",
        "horovod-pytorch-mnist/darshan-2nodes-np4",
        "horovod-pytorch-mnist/dftracer-np4",
        "horovod-tf2-mnist/darshan-np4",
        "imagenet-style-resnet50-h100/darshan8",
        "darshan-logs/dlio_logs",
        "darshan-logs/mpi_io_test_with_dxt",
    ],
)
def test_results_in_parts_of_one_rank_are_the_whole_runs(fixture, tmp_path, monkeypatch):
    store = tmp_path / "store"
    ingest([shared_fixture(fixture)], store)
    ranks = sorted(r.rank for r in open_store(store).meta.ranks)
    _assert_same_results(store, [[r] for r in ranks], tmp_path)
    # again with the (rank, file) rows put together a few files at a time
    shutil.rmtree(tmp_path / "whole")
    _assert_same_results(store, [[r] for r in ranks], tmp_path, passes=(monkeypatch, 4))


def test_imagenet_results_in_parts_are_the_whole_runs(imagenet_store, tmp_path, monkeypatch):
    # files read by several ranks (one an epoch, each in another part): the sharing between
    # ranks and a node's unique bytes need rows of every part (a file shared by ranks that
    # write parts of it, whose size no part knows alone: the MPI-IO and DLIO fixtures above);
    # about 25,000 (rank, file) rows, put together in about 8 passes
    parts = [[0, 1, 2], [3, 4, 5], [6, 7]]
    # and the union of the operations in time a window at a time: a window per row group
    windows = []
    length = combine_module.union_lengths
    monkeypatch.setattr(combine_module, "SPAN_ROW_BYTES", 1 << 40)
    monkeypatch.setattr(
        combine_module, "union_lengths", lambda *a: windows.append(a[1]) or length(*a)
    )
    _assert_same_results(imagenet_store, parts, tmp_path, passes=(monkeypatch, 8))
    assert len(windows) > 3


def test_the_union_in_time_worked_out_beside_the_rest_is_the_same(
    imagenet_store, tmp_path, monkeypatch
):
    # with two CPUs, the union of the parts' spans in time comes from a process of its own
    # (a large run's only: made to run here for a small one)
    submitted = []

    class Pool(combine_module.ProcessPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            submitted.append(fn.__name__)
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(combine_module, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(combine_module, "SIDE_MIN_ROWS", 0)
    _assert_same_results(imagenet_store, [[0, 1, 2], [3, 4, 5], [6, 7]], tmp_path, jobs=2)
    # once, for the run in three parts (the run as one part is held in memory: its union is
    # worked out in the process that holds it)
    assert submitted == ["place_lengths"]


@pytest.mark.parametrize(
    "timeline",
    [{"max_events": 5000}, {"max_steps": 3}, {"window": [2.0, 9.0]}],
    ids=["max-events", "max-steps", "window"],
)
def test_the_timeline_cut_across_parts_is_the_whole_runs(imagenet_store, tmp_path, timeline):
    # the cut spans ranks: every rank's first steps, or the run's first slices, whichever
    # part they are in (the records say what each left out); rank 6 logged no first three
    # steps, so it is the last rank to have done three (the generated ranks step in time)
    store = tmp_path / "store"
    shutil.copytree(imagenet_store, store)
    steps = pq.read_table(store / "steps.parquet")
    first = pc.and_(pc.equal(steps["epoch"], 0), pc.less(steps["step"], 3))
    pq.write_table(steps.filter(pc.invert(pc.and_(pc.equal(steps["rank"], 6), first))),
                   store / "steps.parquet")  # fmt: skip
    settings = AnalysisSettings(timeline={**AnalysisSettings().timeline, **timeline})
    _assert_same_results(store, [[0, 1, 2], [3, 4, 5], [6, 7]], tmp_path, settings)
    record = json.loads((tmp_path / "whole" / "summary.json").read_text())["timeline"]
    assert record["cut"] and sum(record["left_out"].values()) > 0


def test_ranks_without_steps_read_in_the_runs_epochs(imagenet_store, tmp_path):
    # Often only rank 0 logs its steps: the other ranks' reads fall in the run's epochs,
    # which a part without rank 0 knows from the store's steps, not from its own
    store = tmp_path / "store"
    shutil.copytree(imagenet_store, store)
    steps = pq.read_table(store / "steps.parquet")
    pq.write_table(steps.filter(pc.equal(steps["rank"], 0)), store / "steps.parquet")
    _assert_same_results(store, [[0, 1, 2], [3, 4, 5], [6, 7]], tmp_path)


def test_compute_events_and_ranks_without_them(tmp_path):
    # Rank 0 logs its steps and annotates its compute, rank 2 annotates some compute and
    # logs no steps, rank 1 neither: the overlap of I/O with compute and DFAnalyzer's
    # unoverlapped figures count every rank's processes, whichever part they are in
    steps = [(0, 0, -1, 0.0, 50.0), (0, 0, 0, 1.0, 10.0), (0, 0, 1, 12.0, 20.0),
             (0, 0, 2, 22.0, 30.0), (0, 1, -1, 50.0, 100.0), (0, 1, 0, 51.0, 60.0),
             (0, 1, 1, 62.0, 70.0)]  # fmt: skip
    events = [
        (0, "computation", "forward", a, b) for a, b in ((2, 9), (13, 19), (23, 29), (52, 59))
    ]
    events += [(2, "computation", "forward", 5.0, 8.0), (1, "POSIX", "open64", 3.0, 3.1, "/data/b"),
               {"rank": 0, "cat": "IO", "name": "loop.iter", "start": 10.0, "end": 12.0, "step": 1}]  # fmt: skip
    segs = [(0, "/data/a", "read", i * 10, 10, a, b) for i, (a, b) in
            enumerate(((0.5, 0.9), (10.5, 11.5), (61.0, 61.5)))]  # fmt: skip
    segs += [(1, "/data/b", "read", i * 10, 10, a, b) for i, (a, b) in
             enumerate(((5.0, 6.0), (40.0, 41.0), (80.0, 81.0)))]  # fmt: skip
    segs += [(2, "/data/a", "read", 0, 10, 7.0, 7.5), (2, "/data/a", "read", 10, 10, 95.0, 96.0),
             (1, "/ck/c.pt", "write", 0, 100, 45.0, 46.0)]  # fmt: skip
    store = make_store(tmp_path / "store", segs=segs, n_ranks=3, steps=steps, app_events=events,
                       tracer="dftracer", params={"framework": "pytorch"})  # fmt: skip
    _assert_same_results(store, [[0], [1], [2]], tmp_path)
    summary = json.loads((tmp_path / "whole" / "summary.json").read_text())
    assert summary["overlap"]["available"] and summary["pipeline"]["unoverlapped"]["available"]


def test_what_parts_cannot_do_yet_is_refused_with_the_reason(tmp_path):
    # a zero-byte read at the end of the file as rank 0 reads it (100 B), which rank 1 reads
    # further (200 B): rank 0's part alone would call it end of file
    segs = [(0, "/data/a", "read", 0, 100, 1.0, 2.0), (0, "/data/a", "read", 100, 0, 2.0, 2.1),
            (1, "/data/a", "read", 0, 200, 1.0, 2.0)]  # fmt: skip
    store = make_store(tmp_path / "eof", segs=segs, n_ranks=2)
    outs = [tmp_path / "eof-0", tmp_path / "eof-1"]
    for i, out in enumerate(outs):
        analyze_part(store, Part(i, [i], i == 0, budget.Need(0, 0, 0)), out, AnalysisSettings())
    with pytest.raises(
        PartsError, match=r"zero-byte read of /data/a at 100 .* analyse the run whole"
    ):
        combine(store, outs, AnalysisSettings())
    # steps only a trace's annotations give (no step records)
    events = [(0, "computation", "forward", 1.0, 2.0), (0, "computation", "forward", 3.0, 4.0)]
    store = make_store(tmp_path / "annotated", segs=segs[:1], app_events=events)
    with pytest.raises(PartsError, match="trace's annotations"):
        analyze_part(store, Part(0, [0], True, budget.Need(0, 0, 0)), tmp_path / "a-0",
                     AnalysisSettings())  # fmt: skip


def test_a_sample_of_operations_drawn_over_every_part(imagenet_store, tmp_path):
    # 1,000 of the run's 102,622 operations, each stratum's evenly spaced in (rank, time)
    # order over the whole run: each part takes those that fall among its own
    settings = AnalysisSettings(plot_sample_ops=1000)
    _assert_same_results(imagenet_store, [[0, 1, 2], [3, 4, 5], [6, 7]], tmp_path, settings)
    sample = pd.read_parquet(tmp_path / "whole" / "ops_sample.parquet")
    assert 900 < len(sample) <= 1000 and sample["write"].sum() > 0  # checkpoint writes kept


def test_iosweep_analyze_in_parts_writes_the_whole_runs_analysis(
    imagenet_store, tmp_path, capsys, monkeypatch
):
    # a budget that holds three ranks (tests above): the run is analysed in three parts and
    # written as the run in one part is, its timeline too (--in-parts: kept for scripts)
    gb = _gib(budget.Need(3 * RANK_SEGMENTS + 95 * EPOCHS, 3 * RANK_RECORDS, 0))
    out = tmp_path / "parts"
    args = ["analyze", str(imagenet_store), "-o", str(out), "--in-parts", "--memory-gb", str(gb)]
    # the put-together step measured at 3 GiB (the kernel's VmHWM, stood in for): said, with
    # the figure a job must ask for
    real = budget.own_memory
    monkeypatch.setattr(
        budget, "own_memory", lambda field="VmRSS": 3 * budget.GIB if field == "VmHWM" else real()
    )
    assert iosweep_main([*args, "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert "part 3/3: ranks 6-7" in err
    assert "put together from 3 parts in" in err and "s, peak 3.00 GiB" in err
    assert (
        f"warning: putting the parts together peaked at 3.00 GiB, over the budget of {gb:g} GiB "
        "(--memory-gb, analysis.memory_gb): a job analysing this run needs 3,072 MB"
    ) in err
    parted = json.loads((out / "summary.json").read_text())
    whole = analyze_run(imagenet_store, tmp_path / "whole")
    assert parted["timeline"] == whole["timeline"] and parted["timeline"]["file"]
    assert (
        _timeline(out / export.FILE)["traceEvents"]
        == _timeline(tmp_path / "whole" / export.FILE)["traceEvents"]
    )
    assert parted["settings"]["memory_gb"] == pytest.approx(gb)
    parted["settings"]["memory_gb"] = None  # (the whole run's analysis needed no budget)
    assert not (out / ".parts").exists()
    for key in whole.keys() - {"timeline", "store_relative"}:
        _assert_close(parted[key], whole[key], key)
    for name in whole["tables"]:
        assert (out / f"{name}.parquet").is_file()


def test_parts_analysed_two_at_a_time_give_the_whole_runs_analysis(
    imagenet_store, tmp_path, capsys, monkeypatch
):
    # two parts at a time in their own processes, each within half the budget: three ranks
    # (this process's own memory left out of the shares: pytest's is not the CLI's; and a
    # process's own memory, BASE, counted as none, so that the whole run does not fit)
    monkeypatch.setattr(budget, "own_memory", lambda field="VmRSS": 0)
    monkeypatch.setattr(budget, "BASE", 0)
    gb = 2 * _gib(budget.Need(3 * RANK_SEGMENTS + 95 * EPOCHS, 3 * RANK_RECORDS, 0))
    out = tmp_path / "parts"
    args = ["analyze", str(imagenet_store), "-o", str(out), "--memory-gb", str(gb)]
    assert iosweep_main([*args, "--jobs", "2"]) == 0
    err = capsys.readouterr().err
    assert "parts: 3, 2 at a time" in err and "part 3/3: ranks 6-7" in err
    parted = json.loads((out / "summary.json").read_text())
    whole = analyze_run(imagenet_store, tmp_path / "whole", AnalysisSettings(memory_gb=gb))
    for key in whole.keys() - {"timeline", "store_relative"}:
        _assert_close(parted[key], whole[key], key)
    # --ranks is one part: no --jobs; --jobs is a count
    with pytest.raises(SystemExit, match="--ranks analyses its ranks as one part"):
        iosweep_main([*args, "--jobs", "2", "--ranks", "0-1"])
    with pytest.raises(SystemExit):
        iosweep_main([*args, "--jobs", "0"])
    assert "expected a whole number above 0, got '0'" in capsys.readouterr().err


def test_rows_of_a_rank_the_run_does_not_name_are_not_lost_in_parts(tmp_path, monkeypatch):
    segs = [(r, "/data/a", "read", 0, 10, 1.0, 2.0) for r in range(3)]
    store = make_store(tmp_path / "store", segs=segs, n_ranks=3)
    run = json.loads((store / "run.json").read_text())
    run["ranks"] = [r for r in run["ranks"] if r["rank"] != 1]
    (store / "run.json").write_text(json.dumps(run))
    assert plan(store, 64.0)[0].whole  # one part, the store read as it is: nothing lost
    # over the budget (room for two segments, a process's own memory counted as none)
    monkeypatch.setattr(budget, "BASE", 0)
    with pytest.raises(RankSubsetError, match=r"rows of rank 1, which run\.json does not name"):
        plan(store, 2 * budget.PER_SEGMENT / budget.GIB)


def test_value_counts_give_np_medians_over_any_split():
    # a median of counts kept apart (odd and even counts, repeats) is np.median of all values
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 6, 101, 1000):
        values = rng.integers(0, 40, n).astype(np.float64) * 0.5
        halves = ValueCounts.of(values[: n // 3]) + ValueCounts.of(values[n // 3 :])
        assert halves.median() == np.median(values)
        assert halves.stats() == {"min": values.min(), "median": np.median(values),
                                  "max": values.max()}  # fmt: skip
    assert ValueCounts.of([]).median() is None and ValueCounts.of([]).stats() is None
    # hand-computed: 1, 2, 2, 9 -> (2 + 2) / 2; 1, 2, 9, 10 -> (2 + 9) / 2
    assert (ValueCounts.of([2, 9]) + ValueCounts.of([1, 2])).median() == 2.0
    assert (ValueCounts.of([9, 1]) + ValueCounts.of([10, 2])).median() == 5.5


def _paths_part(base: Path, name: str, paths: list[str]) -> PartResults:
    out = base / name
    out.mkdir()
    pq.write_table(pa.table({"path": pa.array(paths, pa.string())}), out / PATHS)
    return PartResults(out)


def test_run_paths_code_in_the_order_of_first_use(tmp_path):
    # the run's codes: each part's paths in its order, a path seen before keeping its code
    a = _paths_part(tmp_path, "a", ["/d/x", "/d/y", "/ck/1"])
    b = _paths_part(tmp_path, "b", ["/d/z", "/ck/1", "/d/x", "/d/w"])
    paths = tables.RunPaths()
    assert paths.of(a).tolist() == [0, 1, 2]
    assert paths.of(b).tolist() == [3, 2, 0, 4]
    assert paths.of(a).tolist() == [0, 1, 2]  # (asked again: the same)
    assert paths.values == ["/d/x", "/d/y", "/ck/1", "/d/z", "/d/w"]
    # many parts of many paths, some shared: every code the one a dict of the paths seen so
    # far gives (paths that differ in one character, or only in length, kept apart)
    rng = np.random.default_rng(7)
    pool = [f"/data/train/n{i % 97:05d}/img_{i}.JPEG" for i in range(3000)] + ["/d/x", "/d/x/"]
    run, seen, parts, expected = tables.RunPaths(), {}, [], []
    for k in range(6):
        mine = rng.choice(len(pool), size=700, replace=False)
        parts.append(_paths_part(tmp_path, f"p{k}", [pool[i] for i in mine]))
        expected.append([seen.setdefault(pool[i], len(seen)) for i in mine])
        assert run.of(parts[-1]).tolist() == expected[-1]
    assert run.values == list(seen)
    # looked up in batches of parts (all at once; a part a batch; two): the same codes
    for max_bytes in (1 << 30, 1, 3 * 700 * 40):
        batched = tables.RunPaths()
        batched.add(parts, max_bytes)
        assert [batched.of(p).tolist() for p in parts] == expected
        assert batched.values == list(seen)


def test_a_frame_by_bucket_reads_the_rows_of_a_range_of_buckets(tmp_path):
    # a part's frame put by bucket, in row groups of 7 rows: the rows of a range of buckets
    # are read from the groups that hold them (groups whole inside it, and the groups it
    # starts and ends in, cut): the rows a filter by hand keeps, in the same order
    rng = np.random.default_rng(3)
    paths = [f"/d/f{i}" for i in range(60)]
    df = pd.DataFrame({"file": rng.integers(0, 60, 400).astype(np.int32),
                       "v": np.arange(400, dtype=np.int64)})  # fmt: skip
    out = PartResults(tmp_path / "part")
    out.start()
    out.put_paths(paths)
    out.put("frame", df, paths, by_bucket=True, group_rows=7)
    assert pq.ParquetFile(tmp_path / "part" / "frame").metadata.num_row_groups == 58
    bucket = buckets_of(paths)[df["file"].to_numpy()]
    order = np.argsort(bucket, kind="stable")
    for lo, hi in [(0, BUCKETS), (0, 1), (5, 6000), (bucket.min(), bucket.min() + 1),
                   (bucket.max(), BUCKETS), (int(np.median(bucket)), int(np.median(bucket)) + 3)]:  # fmt: skip
        got = out.in_buckets("frame", (int(lo), int(hi)), every=False)
        keep = order[(bucket[order] >= lo) & (bucket[order] < hi)]
        want = df.iloc[keep].reset_index(drop=True)
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)
    assert out.in_buckets("frame", (BUCKETS, BUCKETS + 1), every=False).empty


def test_a_plan_written_before_every_run_had_a_part_is_made_again(tmp_path):
    # results from before the one path hold plan.json with no parts (then: analysed whole);
    # the workflow's analyze_run hands that plan over: it is planned again, not followed
    segs = [(r, "/data/a", "read", 0, 10, 1.0, 2.0) for r in range(2)]
    store = make_store(tmp_path / "store", segs=segs, n_ranks=2)
    summary = analyze_run(store, tmp_path / "an", parts=[])
    assert summary["ranks"]["count"] == 2 and summary["headline"]["reads"] == 2


def test_the_run_held_in_memory_put_together_in_several_passes(
    imagenet_store, tmp_path, monkeypatch
):
    # a run of one part is held in memory (nothing written under the output but the
    # results); where the budget puts its (rank, file) rows together in several passes (a
    # large run's: made to here by a small pass), each pass takes its files' rows only, and
    # the analysis written is the one pass's, table by table
    one = analyze_run(imagenet_store, tmp_path / "one")
    taken = []
    real = combine_module.tables.passes
    monkeypatch.setattr(combine_module, "pass_rows", lambda s: RANK_RECORDS)
    monkeypatch.setattr(
        combine_module.tables, "passes", lambda *a: taken.append(real(*a)) or taken[-1]
    )
    # one pass at a time, and two at a time in threads (--jobs 2: passes of half the rows)
    made: list[PartResults] = []
    monkeypatch.setattr(PartResults, "start", lambda self: made.append(self))
    for jobs in (1, 2):
        made.clear()
        out = tmp_path / f"several-{jobs}"
        several = analyze_run(imagenet_store, out, jobs=jobs)
        assert len(taken[-1]) > 4 * jobs and [p.held for p in made] == [True]
        assert sorted(p.name for p in out.iterdir()) == sorted(
            p.name for p in (tmp_path / "one").iterdir()
        )
        for key in one.keys() - {"store_relative"}:
            _assert_close(several[key], one[key], key)
        for name in one["tables"]:
            pd.testing.assert_frame_equal(
                pd.read_parquet(out / f"{name}.parquet"),
                pd.read_parquet(tmp_path / "one" / f"{name}.parquet"),
                obj=name,
            )
