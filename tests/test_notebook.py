"""The notebook door, ``iosweep.open(path)``: a trace store, a run's analysis or a sweep's
results as one object, its verdict, summary and tables, and its segments read by ranks and
time window without the whole store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import shared_fixture

import iosweep
from iosweep.analysis.summary import RunSummary
from iosweep.cli import main as iosweep_main
from iosweep.notebook import OpenError, Run, Sweep
from iosweep.trace.ingest import ingest


@pytest.fixture(scope="module")
def imagenet2(tmp_path_factory) -> Path:
    """The ImageNet-style run with 2 loader workers (its README: input-bound, the GPU
    computing about 11% of the epoch), ingested into a store beside a run folder's
    ``analysis``."""
    run = tmp_path_factory.mktemp("imagenet2")
    ingest([shared_fixture("imagenet-style-resnet50-h100/darshan2")], run / "store")
    return run


def test_a_store_not_analysed_is_analysed_on_demand(imagenet2):
    run = iosweep.open(imagenet2 / "store")
    assert isinstance(run, Run) and run.analysis is None
    with pytest.raises(OpenError, match=r"not analysed yet: run\.analyze\(\) first"):
        _ = run.summary
    analysed = run.analyze()
    assert analysed.analysis == imagenet2 / "analysis"
    # opened again from the store, the analysis beside it is found, and the other way round
    again = iosweep.open(imagenet2 / "store")
    assert again.analysis == imagenet2 / "analysis"
    assert (
        iosweep.open(imagenet2 / "analysis" / "summary.json").store
        == (imagenet2 / "store").resolve()
    )


def test_the_verdict_and_tables_of_a_run(imagenet2):
    run = iosweep.open(imagenet2 / "store")
    if run.analysis is None:
        run = run.analyze()
    assert isinstance(run.summary, RunSummary)
    # the fixture's README: input-bound, the GPU computing about 11% of the 60.7 s epoch
    # (6.7 s of compute), the wait mostly not storage
    assert run.verdict is not None and run.verdict.kind.startswith("input-bound")
    au = run.summary.pipeline.totals.au
    assert au == pytest.approx(6.7 / 60.7, abs=0.03)
    assert set(run.tables) >= {"files", "ranks", "pipeline", "sizes"}
    ranks = run.table("ranks")
    assert isinstance(ranks, pd.DataFrame) and ranks["rank"].tolist() == [0]
    assert run.arrow("files").num_rows == len(run.table("files"))
    with pytest.raises(KeyError, match="no table 'nope'"):
        run.table("nope")
    assert "input-bound" in repr(run) or "waits" in repr(run)


def test_segments_by_rank_and_window_are_the_stores_rows(imagenet2):
    run = iosweep.open(imagenet2 / "store")
    # expected: the whole table read with pyarrow, filtered with pandas
    every = pq.read_table(imagenet2 / "store" / "segments.parquet").to_pandas()
    got = run.segments(ranks=[0], window=(10.0, 20.0))
    want = every[(every["rank"] == 0) & (every["end"] > 10.0) & (every["start"] < 20.0)]
    assert len(got) == len(want) > 0
    assert sorted(zip(got["start"], got["offset"], strict=True)) == sorted(
        zip(want["start"], want["offset"], strict=True)
    )
    # the README: only rank 0's main process writes, the checkpoint of about 190 MB in
    # about 170 writes
    writes = run.segments(columns=["op", "length"])
    writes = writes[writes["op"] == "write"]
    assert 150 <= len(writes) <= 200 and 180e6 <= writes["length"].sum() <= 200e6
    assert run.segments(ranks=[5]).empty  # no such rank: no rows
    with pytest.raises(ValueError, match="start < end"):
        run.segments(window=(20.0, 10.0))


def test_a_sweeps_results(tmp_path):
    stores = []
    for n in (1, 2):
        stores.append(tmp_path / f"np{n}")
        ingest([shared_fixture(f"horovod-pytorch-mnist/darshan-np{n}")], stores[-1])
    out = tmp_path / "out"
    assert iosweep_main(["analyze", *map(str, stores), "-o", str(out)]) == 0
    sweep = iosweep.open(out)
    assert isinstance(sweep, Sweep) and len(sweep) == 2
    assert sorted(r.summary.ranks.count for r in sweep) == [1, 2]
    table = sweep.table()
    assert sorted(table["run_id"]) == sorted(r.run_id for r in sweep)
    first = sweep[sweep.runs[0].run_id]
    assert first.store is not None and (first.store / "run.json").is_file()
    assert (
        len(first.segments()) == pq.ParquetFile(first.store / "segments.parquet").metadata.num_rows
    )
    with pytest.raises(KeyError, match="no run 'nope'"):
        sweep["nope"]
    # the store moved away: said when its segments are asked for, the analysis still opens
    shutil.rmtree(stores[0])
    shutil.rmtree(stores[1])
    lost = iosweep.open(out).runs[0]
    assert lost.verdict is None or lost.verdict.kind
    with pytest.raises(OpenError, match="trace store was not found"):
        lost.segments()


def test_what_is_not_a_run_is_named(tmp_path):
    with pytest.raises(OpenError, match="neither a trace store"):
        iosweep.open(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "summary.json").write_text("{not json")
    run = iosweep.open(tmp_path / "a")
    with pytest.raises(ValueError, match="not valid JSON"):
        _ = run.summary
