"""A run analysed in parts of whole ranks (iosweep.analysis.parts) gives the results the run
analysed whole gives (so far: the volume tables and the request sizes); parts are cut where
the budget says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import shared_fixture

from iosweep.analysis import analyze_run, budget
from iosweep.analysis.parts.plan import Part, plan
from iosweep.analysis.parts.run import analyze_part, combine, part_data
from iosweep.analysis.patterns.sizes import analyze_sizes
from iosweep.analysis.patterns.spatial import classify_ops
from iosweep.analysis.patterns.volume import build_tables, widen
from iosweep.analysis.settings import AnalysisSettings
from iosweep.analysis.summary.run import Pipeline, Sizes
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


def test_a_rank_larger_than_the_budget_is_named(imagenet_store):
    with pytest.raises(budget.MemoryBudgetError, match=r"rank 0 alone needs about"):
        plan(imagenet_store, _gib(budget.Need(RANK_SEGMENTS, RANK_RECORDS, 0)))


def _sorted(df: pd.DataFrame, paths: list[str], keys: list[str]) -> pd.DataFrame:
    """The table with paths for file codes (each analysis codes paths its own way), rows in
    ``keys`` order."""
    df = widen(df)
    df["file"] = np.asarray(paths, dtype=object)[df["file"].to_numpy()]
    return df.sort_values(keys).reset_index(drop=True)


TABLE_KEYS = {
    "file_rank": ["actor", "file"],
    "files": ["file"],
    "ranks": ["rank"],
    "nodes": ["host"],
}


def _assert_same_results(store: Path, parts: list[list[int]], tmp_path: Path) -> None:
    settings = AnalysisSettings()
    every_rank = sorted(r.rank for r in open_store(store).meta.ranks)
    rd = part_data(store, Part(0, every_rank, True, budget.Need(0, 0, 0)), settings)
    whole = build_tables(rd, classify_ops(rd))
    outs = []
    for i, ranks in enumerate(parts):
        outs.append(tmp_path / f"part-{i}")
        analyze_part(store, Part(i, ranks, i == 0, budget.Need(0, 0, 0)), outs[-1], settings)
    combined = combine(store, outs, settings)
    t = combined.tables
    for name, keys in TABLE_KEYS.items():
        a, b = getattr(whole, name), getattr(t, name)
        if "file" in a:
            a, b = _sorted(a, rd.paths, keys), _sorted(b, combined.run.paths, keys)
        else:
            a, b = a.sort_values(keys, ignore_index=True), b.sort_values(keys, ignore_index=True)
        # sums of seconds may add up in another order: equal to the last bits
        pd.testing.assert_frame_equal(a, b, check_dtype=False, rtol=1e-12, obj=name)
    assert (t.dxt_available, t.completeness) == (whole.dxt_available, whole.completeness)
    sizes_table, sizes = analyze_sizes(rd, whole.file_rank)
    pd.testing.assert_frame_equal(combined.sizes[0], sizes_table, obj="sizes")
    assert combined.sizes[1] == sizes
    assert (combined.run_start, combined.run_end) == (rd.run_start, rd.run_end)
    # the pipeline's, as the whole run's analysis writes it
    summary = analyze_run(store, tmp_path / "whole")
    table = pd.read_parquet(tmp_path / "whole" / "pipeline.parquet")
    pd.testing.assert_frame_equal(
        combined.pipeline[0], table, check_dtype=False, rtol=1e-12, obj="pipeline"
    )
    # (not built in parts yet: the unoverlapped I/O and a DLIO run's replay beside it)
    later = ("unoverlapped", "dlio")
    parted = _json(Pipeline.model_validate(_json(combined.pipeline[1])))
    _assert_close(
        {k: v for k, v in parted.items() if k not in later},
        {k: v for k, v in summary["pipeline"].items() if k not in later},
    )
    assert _json(Sizes.model_validate(_json(combined.sizes[1]))) == _json(summary["sizes"])


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


def _json(v: Any) -> Any:
    """``v`` as summary.json holds it (numpy numbers as Python's, NaN as null, models as
    they are dumped)."""
    if isinstance(v, Pipeline | Sizes):
        v = v.model_dump(mode="json")
    return json.loads(json.dumps(json_safe(v)))


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
def test_results_in_parts_of_one_rank_are_the_whole_runs(fixture, tmp_path):
    store = tmp_path / "store"
    ingest([shared_fixture(fixture)], store)
    ranks = sorted(r.rank for r in open_store(store).meta.ranks)
    _assert_same_results(store, [[r] for r in ranks], tmp_path)


def test_imagenet_results_in_parts_are_the_whole_runs(imagenet_store, tmp_path):
    # files read by several ranks (one an epoch, each in another part): the sharing between
    # ranks and a node's unique bytes need rows of every part (a file shared by ranks that
    # write parts of it, whose size no part knows alone: the MPI-IO and DLIO fixtures above)
    _assert_same_results(imagenet_store, [[0, 1, 2], [3, 4, 5], [6, 7]], tmp_path)
