"""The benchmarks' ImageNet-shaped run, as a store written directly and as Darshan logs ingested:
both hold the shape asked for (figures counted by hand from the module's description)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from iosweep.testing.imagenet_trace import write_imagenet_logs, write_imagenet_store
from iosweep.trace.ingest import ingest
from iosweep.trace.store import open_store

# 12,810 files over 8 ranks: 1,601 a rank an epoch (2 files left out), 4 reads each; rank 0
# writes a 100 MB checkpoint after each epoch in 95 writes of 1 MiB
FILES, RANKS, WORKERS, EPOCHS = 12_810, 8, 4, 2
READS = 1_601 * RANKS * EPOCHS * 4
CHECKPOINT_WRITES = 95 * EPOCHS


def test_the_run_as_logs_ingests_to_the_shape_asked_for(tmp_path):
    shape = write_imagenet_logs(tmp_path / "run", FILES, RANKS, WORKERS, EPOCHS)
    # each rank also reads its config file once
    assert shape.segments == READS + CHECKPOINT_WRITES + RANKS
    meta = ingest([tmp_path / "run"], tmp_path / "store")
    assert not meta.issues
    roles = pd.Series([p.role for p in meta.processes]).value_counts().to_dict()
    # a log per rank, and per rank and epoch one per (re-forked) loader worker
    assert roles == {"worker": RANKS * WORKERS * EPOCHS, "rank": RANKS}
    seg = open_store(tmp_path / "store").segments.to_pandas()
    assert len(seg) == shape.segments
    assert (seg["op"] == "write").sum() == CHECKPOINT_WRITES
    assert set(seg.loc[seg["op"] == "write", "rank"]) == {0}
    # each file is read 4 times an epoch, all by one rank's one worker within an epoch
    jpeg = seg[seg["path"].astype(str).str.endswith(".JPEG")]
    per_file = jpeg.groupby(["path", "pid"], observed=True).size()
    assert (per_file == 4).all() and len(per_file) == 1_601 * RANKS * EPOCHS
    # the counters: a record per (worker, file) and each rank's config and checkpoints
    assert open_store(tmp_path / "store").table("counters", ["rank"]).num_rows == (
        1_601 * RANKS * EPOCHS + RANKS + EPOCHS
    )


def test_the_store_written_directly_has_the_same_reads_in_rank_order(tmp_path):
    shape = write_imagenet_store(tmp_path / "store", FILES, RANKS, WORKERS, EPOCHS)
    assert shape.segments == READS + CHECKPOINT_WRITES
    seg = open_store(tmp_path / "store").table("segments", ["rank", "op", "length"]).to_pandas()
    assert len(seg) == shape.segments
    assert (np.diff(seg["rank"].to_numpy()) >= 0).all()  # as a store is written
    assert (seg["op"] == "read").sum() == READS
    assert seg.groupby("rank").size().drop(0).eq(1_601 * EPOCHS * 4).all()
