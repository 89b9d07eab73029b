"""Stores are written in rank order, in Parquet row groups of whole ranks, so that some ranks of
a run (``iosweep analyze --ranks``, later a shard of one) are read from their row groups only,
with the same answer as from a store read whole."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import darshan
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from iosweep.analysis import subset
from iosweep.cli import main as iosweep_main
from iosweep.trace import store as trace_store
from iosweep.trace.ingest import ingest
from iosweep.trace.store import open_store, rank_groups

MPI_IO_TEST = "darshan-logs/mpi_io_test_with_dxt"


@pytest.mark.parametrize(
    ("rank", "limit", "least", "sizes"),
    [
        # whole ranks while they fit; a rank larger than a group is cut
        ([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 3], 4, None, [3, 2, 4, 3]),
        ([0, 0, 1, 1, 2, 2], 4, None, [4, 2]),
        ([5, 5, 5], 4, None, [3]),
        ([], 4, None, []),
        # rows tied to no rank (-1), last as stores are written, in a group of their own
        ([0, 0, 1, -1, -1], 8, None, [3, 2]),
        # not in rank order: runs of one rank, packed
        ([0, 1, 0, 1, 0, 1], 4, None, [4, 2]),
        # a group ends at the first rank's end that brings it to `least` rows
        ([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 3], 100, 3, [3, 8, 1]),
        ([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 3], 100, 1, [3, 2, 6, 1]),
        # ... unless that passes `limit`: the last end that fits, or the rank cut
        ([0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 3], 5, 3, [3, 2, 5, 2]),
        ([0, 0, 1, 1, 1, 1, 2], 4, 3, [2, 4, 1]),
    ],
)
def test_row_groups_end_where_ranks_end(rank, limit, least, sizes):
    assert rank_groups(np.array(rank, np.int64), limit, least) == sizes


def _pydarshan_segments_per_rank(log: Path) -> Counter:
    rep = darshan.DarshanReport(str(log), read_all=False)
    per_rank: Counter = Counter()
    for module in ("DXT_POSIX", "DXT_MPIIO"):
        rep.mod_read_all_dxt_records(module)
        for r in rep.records[module]:
            per_rank[r["rank"]] += len(r["read_segments"]) + len(r["write_segments"])
    return per_rank


@pytest.fixture
def mpi_store(shared_data: Path, tmp_path: Path, monkeypatch) -> Path:
    """The 32-rank MPI-IO test log ingested with row groups of at most 40 rows."""
    monkeypatch.setattr(trace_store, "ROW_GROUP_ROWS", 40)
    ingest([shared_data / MPI_IO_TEST], tmp_path / "small")
    return tmp_path / "small"


def test_an_mpi_logs_rows_are_stored_by_rank_in_groups_of_whole_ranks(shared_data, mpi_store):
    # one log holds all 32 ranks, its DXT records module by module (rank 0..31, twice)
    log = next((shared_data / MPI_IO_TEST).glob("*.darshan"))
    expected = _pydarshan_segments_per_rank(log)
    assert set(expected.values()) == {18}  # 10 POSIX + 8 MPI-IO segments a rank
    seg = pq.read_table(mpi_store / "segments.parquet", columns=["rank"])["rank"].to_numpy()
    assert (np.diff(seg) >= 0).all()
    assert Counter(seg.tolist()) == expected
    # 18 rows a rank, 40 rows a group at most: two whole ranks a group
    st = open_store(mpi_store)
    assert st.rank_ranges("segments") == [(r, r + 1) for r in range(0, 32, 2)]


def test_some_ranks_are_read_from_their_row_groups_alone_with_the_same_answer(
    shared_data, mpi_store, tmp_path, monkeypatch
):
    chosen = subset.select(open_store(mpi_store), [5])
    assert chosen.groups["segments"] == [2]  # ranks 4 and 5
    assert chosen.count("segments") == 18
    monkeypatch.undo()  # the same log in one row group a table
    ingest([shared_data / MPI_IO_TEST], tmp_path / "whole")
    assert subset.select(open_store(tmp_path / "whole"), [5]).groups["segments"] is None
    for st in ("small", "whole"):
        assert iosweep_main(["analyze", str(tmp_path / st), "-o", str(tmp_path / f"{st}.out"),
                             "--ranks", "5"]) == 0  # fmt: skip
    small, whole = (
        json.loads((tmp_path / f"{st}.out" / "summary.json").read_text())
        for st in ("small", "whole")
    )
    for s in (small, whole):  # where each store is, all else equal
        s.pop("store"), s.pop("store_relative")
    assert small == whole
    for table in ("ranks", "file_ranks", "files"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "small.out" / f"{table}.parquet"),
            pd.read_parquet(tmp_path / "whole.out" / f"{table}.parquet"),
        )
    # the rank's 10 POSIX segments (MPI-IO's 8 are the layer above, counted apart)
    assert small["ranks"]["count"] == 1 and small["trace"]["segments"] == 10
