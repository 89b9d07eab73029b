"""Unit tests of iosweep.analysis on small hand-built trace stores with known answers."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from factories import make_store, seg_table

from iosweep.analysis import AnalysisSettings, analyze_run, analyze_sweep, intervals
from iosweep.analysis.classify import classify_path, matches
from iosweep.analysis.data import StringCodes
from iosweep.analysis.patterns.temporal import human_bytes
from iosweep.analysis.summary import SummaryError, read_sweep_file
from iosweep.cli import analyze as acli
from iosweep.trace.schema import Issue, RunMeta
from iosweep.trace.store import write_store


def run(tmp_path: Path, store: Path, **settings) -> dict:
    return analyze_run(store, tmp_path / "out", AnalysisSettings.from_dict(settings))


def whole_read(rank: int, path: str, size: int, t0: float) -> list[tuple]:
    """torchvision-style: one read of the whole file at 0, then a zero-length read at EOF."""
    return [
        (rank, path, "read", 0, size, t0, t0 + 0.1),
        (rank, path, "read", size, 0, t0 + 0.2, t0 + 0.21),
    ]


# ----------------------------------------------------------------------------------------
# Access strategies


def test_file_per_process(tmp_path):
    segs = []
    for r in range(4):
        for k in range(10):
            segs.append(
                (r, f"/data/shard-{r}.npz", "read", k * 100, 100, 1 + k * 0.01, 1.005 + k * 0.01)
            )
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert acc["strategy"] == "file-per-process"
    ev = acc["evidence"]
    assert ev["files"] == 4 and ev["ranks"] == 4
    assert ev["ranks_per_file"]["max"] == 1 and ev["files_per_rank"]["max"] == 1
    assert ev["bytes_per_rank"]["min"] == ev["bytes_per_rank"]["max"] == 1000
    assert sm["classes"]["dataset"]["spatial"]["share_by_category"]["contiguous"] == 1.0
    fr = pd.read_parquet(tmp_path / "out" / "file_ranks.parquet")
    assert (fr["pattern"] == "whole-file").all()
    # Rank r touched only its own file.
    assert all(p.endswith(f"shard-{r}.npz") for r, p in zip(fr["rank"], fr["path"], strict=True))
    assert sm["temporal"]["same_sequence"]["dataset"] is True
    assert (
        sm["temporal"]["signatures"]["0"]["signature"]
        == "shard-0.npz: read 100 B @0, read 100 B x9 contiguous"
    )


def test_partitioned_many_files_per_rank(tmp_path):
    segs = [
        (r, f"/data/train/img_{r}_{i}.npz", "read", 0, 50, 1 + i, 1.1 + i)
        for r in range(2)
        for i in range(6)
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2))
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert acc["strategy"] == "partitioned"
    assert acc["evidence"]["files_per_rank"] == {"min": 6.0, "median": 6.0, "max": 6.0}


def test_shared_file_read_whole_by_every_rank(tmp_path):
    p = "/data/train-images-idx3-ubyte"
    segs = [s for r in range(4) for s in whole_read(r, p, 47_040_016, 1 + r * 0.01)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert acc["strategy"] == "shared-whole"
    ev = acc["evidence"]
    assert ev["files_whole_by_every_rank"] == 1
    assert ev["ranks_per_file"]["min"] == 4
    assert ev["offset_overlap"] == 1.0
    assert ev["bytes_per_rank_per_file"]["min"] == 47_040_016
    files = pd.read_parquet(tmp_path / "out" / "files.parquet")
    row = files.set_index("path").loc[p]
    assert (
        row["size"] == 47_040_016
        and row["whole_readers"] == 4
        and row["read_strategy"] == "shared-whole"
    )
    sig = sm["temporal"]["signatures"]
    assert {sig[str(r)]["signature"] for r in range(4)} == {
        "train-images-idx3-ubyte: read 47.0 MB @0, read 0 B @EOF"
    }
    assert sm["temporal"]["same_sequence"]["all"] is True
    ins = {i["id"]: i for i in sm["insights"]}
    assert ins["redundant_reads"]["numbers"]["redundant_bytes"] == 3 * 47_040_016
    assert ins["redundant_reads"]["numbers"]["unique_bytes"] == 47_040_016
    assert sm["nodes"][0]["read_once_per"] == "rank"
    assert sm["nodes"][0]["read_redundancy"] == pytest.approx(4.0)


def test_redundant_reads_message_by_hand(tmp_path):
    # a.bin (4 MiB) read whole by 4 ranks, b.bin (4 MiB) by ranks 0 and 1: 12 + 4 MiB of the
    # 24 MiB read are repeats (16.8 MB of 25.2 MB)
    segs = [(r, "/data/a.bin", "read", 0, 4 * M, 1.0 + r, 1.5 + r) for r in range(4)]
    segs += [(r, "/data/b.bin", "read", 0, 4 * M, 6.0 + r, 6.5 + r) for r in range(2)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    (red,) = [i for i in sm["insights"] if i["id"] == "redundant_reads"]
    assert red["message"].startswith(
        "2 files are read by 2-4 ranks each; 16.8 MB of the 25.2 MB read from them are repeats "
        "of bytes another rank (or read) already moved"
    )
    n = red["numbers"]
    assert (n["files"], n["ranks_per_file_max"], n["redundant_bytes"]) == (2, 4, 16 * M)
    assert (n["bytes_read"], n["unique_bytes"]) == (24 * M, 8 * M)


def test_shared_file_disjoint_parts(tmp_path):
    segs = [(r, "/data/big.h5", "read", r * 250, 250, 1.0, 1.1) for r in range(4)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert acc["strategy"] == "shared-disjoint"
    assert acc["evidence"]["offset_overlap"] == 0.0
    assert acc["evidence"]["offset_union_bytes"] == 1000
    assert not [i for i in sm["insights"] if i["id"] == "redundant_reads"]
    assert sm["nodes"][0]["read_once_per"] == "node"


def test_shared_file_overlapping_parts(tmp_path):
    # Rank r reads [r*200, r*200 + 400): neighbours share 200 bytes.
    segs = [(r, "/data/big.h5", "read", r * 200, 400, 1.0, 1.1) for r in range(4)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert acc["strategy"] == "shared-overlapping"
    assert acc["evidence"]["offset_union_bytes"] == 1000
    assert acc["evidence"]["offset_shared_bytes"] == 600


def test_strided_interleaved_ranks(tmp_path):
    # Rank r reads block k*4 + r (100 B blocks): each rank strides by 300 B.
    segs = [
        (
            r,
            "/data/big.h5",
            "read",
            (k * 4 + r) * 100,
            100,
            1 + k * 0.1 + r * 0.01,
            1.005 + k * 0.1 + r * 0.01,
        )
        for r in range(4)
        for k in range(10)
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    assert sm["classes"]["dataset"]["access"]["read"]["strategy"] == "shared-disjoint"
    # Rank 0 starts at 0 (contiguous), ranks 1-2 jump first (sequential), rank 3's first
    # jump is already 300 B (strided); every later op strides by 300 B.
    cats = sm["spatial"]["ops_by_category"]
    assert cats == {"contiguous": 1, "sequential": 2, "strided": 37, "random": 0, "unknown": 0}
    fr = pd.read_parquet(tmp_path / "out" / "file_ranks.parquet")
    assert (fr["pattern"] == "strided").all()
    assert "stride 300 B" in sm["temporal"]["signatures"]["1"]["signature"]
    assert sm["temporal"]["same_sequence"]["dataset"] is False  # rank 0 and 3 start differently


def test_random_access(tmp_path):
    rng = np.random.default_rng(7)
    order = rng.permutation(200)
    segs = [
        (0, "/data/x.npy", "read", int(b) * 4096, 4096, 1 + i * 0.001, 1.0005 + i * 0.001)
        for i, b in enumerate(order)
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs), random_ops_min_count=10)
    off = order * 4096
    expect_random = int((off[1:] < off[:-1] + 4096).sum())
    assert sm["spatial"]["ops_by_category"]["random"] == expect_random
    ins = {i["id"]: i for i in sm["insights"]}
    assert ins["random_access"]["numbers"]["random"] == expect_random
    assert ins["random_access"]["numbers"]["share"] == pytest.approx(expect_random / 200)
    # Every block read once: the coverage is the whole file whatever the order.
    fr = pd.read_parquet(tmp_path / "out" / "file_ranks.parquet")
    assert fr.loc[0, "read_coverage_frac"] == 1.0


# ----------------------------------------------------------------------------------------
# Sizes, metadata, volume


def test_request_size_distribution(tmp_path):
    lengths = [0, 1, 100, 4096, 4096, 4096, 1 << 20, (1 << 20) + 1, 3 << 20]
    segs, off = [], 0
    for i, ln in enumerate(lengths):
        segs.append((0, "/data/d.tfrecord", "read", off, ln, 1 + i, 1.5 + i))
        off += ln
    sm = run(tmp_path, make_store(tmp_path / "s", segs), top_sizes=2)
    d = sm["sizes"]["by_class"]["dataset"]["read"]
    assert d["ops"] == 9 and d["zero_length"] == 1
    assert d["small"] == 5  # 1, 100 and three 4096: > 0 and < 1 MiB
    # the zero-byte read is counted apart: 5 of the 8 sized reads are small
    assert d["small_share"] == pytest.approx(5 / 8)
    # median of the 8 sized reads 1, 100, 4096 x3, 1 MiB, 1 MiB + 1, 3 MiB: the 4th, 4096
    assert d["median"] == 4096 and d["max"] == 3 << 20 and d["min"] == 1
    assert d["top_sizes"][0] == {"size": 4096, "count": 3, "share": pytest.approx(3 / 9)}
    assert len(d["top_sizes"]) == 2
    t = pd.read_parquet(tmp_path / "out" / "sizes.parquet")
    lg = t[(t["binning"] == "log2") & (t["class"] == "dataset")].set_index("bin")
    assert lg.loc[0, "count"] == 1 and lg.loc[13, "count"] == 3  # 4096 in [4096, 8192)
    assert lg.loc[13, "bin_lower"] == 4096 and lg.loc[21, "count"] == 2  # 1 MiB and 1 MiB + 1
    assert lg["cum_fraction"].iloc[-1] == 1.0
    ds = t[(t["binning"] == "darshan") & (t["class"] == "dataset")].set_index("bin")
    # 0, 1 and 100 bytes in 0_100 (Darshan's bins hold their upper bound: "< 101")
    assert ds["count"].sum() == 9 and ds.loc[0, "count"] == 3


def test_zero_byte_eof_reads_never_make_the_median(tmp_path):
    # the PyTorch MNIST pattern: each file one whole read, then 0 B at end of file
    segs = []
    for i, size in enumerate((47_040_016, 60_008, 7_840_016, 10_008)):
        p = f"/data/f{i}-idx3-ubyte"
        segs += [
            (0, p, "read", 0, size, 1 + i, 1.2 + i),
            (0, p, "read", size, 0, 1.3 + i, 1.31 + i),
        ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs))
    d = sm["sizes"]["by_class"]["dataset"]["read"]
    assert d["zero_length"] == 4 and d["ops"] == 8
    # median of 10,008 / 60,008 / 7,840,016 / 47,040,016 (lower middle, as the quantile rule says)
    assert d["median"] == 60_008 and d["min"] == 10_008
    assert d["small"] == 2 and d["small_share"] == pytest.approx(2 / 4)
    assert sm["headline"]["read_size_median"] == 60_008


def test_sizes_from_counters_only(tmp_path):
    c = [
        {
            "rank": r,
            "path": f"/data/train/img_{r}.npz",
            "reads": 10,
            "bytes_read": 10 * 2_000_000,
            "max_byte_read": 20_000_000 - 1,
            "size_read_1M_4M": 8,
            "size_read_0_100": 2,
            "read_time": 1.0,
        }
        for r in range(3)
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", counters=c, n_ranks=3))
    d = sm["sizes"]["by_class"]["dataset"]["read"]
    assert d["ops"] == 30 and d["ops_from_counters"] == 30 and d["small_source"] == "counters"
    assert d["median_bin"] == "1M_4M" and d["small"] == 6
    assert sm["classes"]["dataset"]["access"]["read"]["strategy"] == "file-per-process"
    assert sm["classes"]["dataset"]["access"]["read"]["evidence"]["offsets_known"] is False
    assert any("no per-operation trace" in x for x in sm["limitations"])
    assert sm["headline"]["bytes_read"] == 60_000_000


def test_metadata_heavy(tmp_path):
    c = [
        {
            "rank": r,
            "path": f"/data/f{r}.npy",
            "opens": 10_000,
            "stats": 20_000,
            "seeks": 5,
            "fsyncs": 1,
            "reads": 100,
            "bytes_read": 100,
            "max_byte_read": 99,
            "read_time": 1.0,
            "meta_time": 5.0,
        }
        for r in range(2)
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", counters=c, n_ranks=2))
    md = sm["metadata"]
    assert md["source"] == "counters"
    assert md["totals"] == {"opens": 20_000, "stats": 40_000, "seeks": 10, "fsyncs": 2}
    assert md["per_second"]["opens"] == pytest.approx(200.0)  # run of 100 s
    assert md["meta_time_share"] == pytest.approx(5 / 6)
    ins = {i["id"]: i for i in sm["insights"]}
    assert ins["metadata_heavy"]["numbers"]["meta_time_share"] == pytest.approx(5 / 6)
    ranks = pd.read_parquet(tmp_path / "out" / "ranks.parquet")
    assert ranks["opens_per_s"].tolist() == [100.0, 100.0]


def test_counters_fill_modules_dxt_does_not_trace(tmp_path):
    # DXT saw the POSIX reads; the STDIO checkpoint writes exist only as counters (as in TF2).
    segs = whole_read(0, "/data/mnist-0.npz", 1000, 1.0)
    c = [
        {
            "rank": 0,
            "path": "/data/mnist-0.npz",
            "reads": 2,
            "bytes_read": 1000,
            "max_byte_read": 999,
            "opens": 1,
        },
        {
            "rank": 0,
            "path": "/run/checkpoints/ckpt-1.index",
            "module": "STDIO",
            "writes": 7,
            "bytes_written": 1038,
            "max_byte_written": 1037,
            "write_time": 0.01,
            "open_start": 50.0,
            "close_end": 50.2,
        },
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, counters=c, n_ranks=2))
    assert sm["trace"]["completeness"] == 1.0
    assert sm["headline"]["bytes_written"] == 1038
    ck = sm["checkpoints"]
    assert ck["writers"] == [0] and ck["n_checkpoints"] == 1
    assert ck["events"][0]["start"] == 50.0 and ck["events"][0]["duration"] == pytest.approx(0.2)


def test_volume_bandwidth_imbalance_stragglers(tmp_path):
    segs = []
    for r in range(4):
        dur = 1.0 if r < 3 else 4.0  # rank 3 is slow
        segs.append((r, f"/data/s{r}.npz", "read", 0, 1_000_000 * (r + 1), 10.0, 10.0 + dur))
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    ranks = pd.read_parquet(tmp_path / "out" / "ranks.parquet").set_index("rank")
    assert ranks.loc[3, "io_time"] == pytest.approx(4.0)
    assert ranks.loc[1, "bandwidth"] == pytest.approx(2_000_000.0)
    assert ranks["straggler"].tolist() == [False, False, False, True]
    assert sm["imbalance"]["bytes"] == pytest.approx(0.75)
    assert sm["imbalance"]["io_time"] == pytest.approx(0.75)
    assert sm["headline"]["io_time_max"] == pytest.approx(4.0)
    assert sm["headline"]["bandwidth_aggregate"] == pytest.approx(10_000_000 / 4.0)
    assert sm["headline"]["io_share_max"] == pytest.approx(0.04)
    ins = {i["id"]: i for i in sm["insights"]}
    assert ins["imbalance"]["numbers"]["stragglers"] == [3]


def test_io_time_is_union_of_overlapping_worker_ops(tmp_path):
    # Two DataLoader workers of rank 0 (pids 2000, 2001) read at overlapping times.
    segs = [
        (0, "/data/a.npy", "read", 0, 10, 1.0, 3.0, 2000),
        (0, "/data/b.npy", "read", 0, 10, 2.0, 4.0, 2001),
    ]
    run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=1))
    r = pd.read_parquet(tmp_path / "out" / "ranks.parquet").iloc[0]
    assert r["io_time"] == pytest.approx(3.0) and r["io_busy_time"] == pytest.approx(4.0)
    assert r["processes"] == 2


def test_per_node_read_once_per_node(tmp_path):
    # Two nodes, two ranks each: on each node the ranks read disjoint halves of the file.
    hosts = {0: "a", 1: "a", 2: "b", 3: "b"}
    segs = [
        (r, "/data/f.npz", "read", (r % 2) * 500, 500, 1, 2, 1000 + r, hosts[r]) for r in range(4)
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4, hosts=hosts))
    nodes = {n["host"]: n for n in sm["nodes"]}
    assert set(nodes) == {"a", "b"}
    assert nodes["a"]["ranks"] == 2 and nodes["a"]["unique_bytes_read"] == 1000
    assert nodes["a"]["read_once_per"] == "node"
    assert sm["ranks"]["per_node"] == {"a": 2, "b": 2}
    # Across nodes each byte is read twice (once per node): shared-overlapping per file.
    assert sm["classes"]["dataset"]["access"]["read"]["strategy"] == "shared-overlapping"


# ----------------------------------------------------------------------------------------
# Temporal: phases, checkpoints, overlap with compute


def test_checkpoints_and_phases_relative_to_epochs(tmp_path):
    steps = []
    for r in range(2):
        for e in range(2):
            steps.append((r, e, -1, 10 + e * 20, 28 + e * 20))
            for s in range(3):
                steps.append((r, e, s, 12 + e * 20 + s * 5, 15 + e * 20 + s * 5))
    segs = [s for r in range(2) for s in whole_read(r, "/data/train-images-idx3-ubyte", 4000, 1.0)]
    for e in range(2):  # rank 0 saves after each epoch
        t = 28.5 + e * 20
        segs += [
            (0, f"/run/checkpoint-{e}.pt", "write", 0, 59904, t, t + 0.01),
            (0, f"/run/checkpoint-{e}.pt", "write", 59904, 1231, t + 0.02, t + 0.03),
        ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2, steps=steps))
    ck = sm["checkpoints"]
    assert ck["writers"] == [0] and ck["only_one_rank_writes"] is True
    assert ck["n_checkpoints"] == 2 and ck["bytes_written"] == 2 * 61135
    assert [e["after_epoch"] for e in ck["events"]] == [0, 1]
    assert ck["interval_mean"] == pytest.approx(20.0)
    assert ck["duration_mean"] == pytest.approx(0.03)
    ins = {i["id"]: i for i in sm["insights"]}
    assert ins["single_rank_checkpoint"]["numbers"]["writer"] == 0
    ph = pd.read_parquet(tmp_path / "out" / "phases.parquet")
    assert ph["where"].tolist() == [
        "before the first epoch",
        "between epochs 0 and 1",
        "after the last epoch",
    ]
    assert ph["bytes_read"].tolist() == [8000, 0, 0]
    assert sm["access"]["checkpoint"]["write"] == "single-rank"


def test_io_overlap_with_compute_per_epoch(tmp_path):
    steps = [(0, 0, -1, 0.0, 10.0), (0, 0, 0, 1.0, 2.0), (0, 0, 1, 3.0, 4.0)]
    segs = [
        (0, "/data/a.npy", "read", 0, 10, 0.5, 1.5),  # half under step 0
        (0, "/data/a.npy", "read", 10, 10, 2.2, 2.8),  # between steps: exposed
        (0, "/data/a.npy", "read", 20, 10, 20.0, 21.0),  # after the epoch
    ]
    # one steady step: min_steady_steps lowered to judge it (this test is about the loop)
    sm = run(tmp_path, make_store(tmp_path / "s", segs, steps=steps), exposed_io_share=0.05,
             min_steady_steps=1)  # fmt: skip
    ov = pd.read_parquet(tmp_path / "out" / "overlap.parquet").set_index("epoch")
    assert ov.loc[0, "io_time"] == pytest.approx(1.6)
    assert ov.loc[0, "overlapped_io_time"] == pytest.approx(0.5)
    assert ov.loc[0, "exposed_io_time"] == pytest.approx(1.1)
    assert ov.loc[0, "compute_time"] == pytest.approx(2.0)
    assert ov.loc[0, "exposed_share"] == pytest.approx(0.11)
    assert ov.loc[-1, "io_time"] == pytest.approx(1.0)
    assert sm["overlap"]["available"] and sm["overlap"]["compute_source"] == "steps"
    ph = pd.read_parquet(tmp_path / "out" / "phases.parquet")
    assert ph["where"].tolist() == ["epoch 0, step 0", "after the last epoch"]
    assert ph["epoch"].tolist()[0] == 0
    # The verdict supersedes "exposed I/O": step 1 computes 1 s of the 8 s after step 0
    # (AU 0.125) and waited [2, 3] s for its batch, with a read in flight 2.2-2.8 s (0.6 of it);
    # the other 6 s (4-10 s) the loop neither computes nor waits for a batch, and nothing
    # timed or traced says what it did: not "held back by the loop", a guess, but 6 s
    # unexplained after the last step of epoch 0.
    ins = {i["id"]: i for i in sm["insights"]}
    assert "exposed_io" not in ins
    n = ins["unexplained"]["numbers"]
    assert n["au"] == pytest.approx(0.125) and n["storage_share_of_wait"] == pytest.approx(0.6)
    assert n["wait_per_rank"] == pytest.approx(1.0) and n["idle_per_rank"] == pytest.approx(7.0)
    v = sm["pipeline"]["verdict"]
    assert v["kind"] == "unexplained" and sm["pipeline"]["wait_source"] == "gaps"
    assert v["title"].endswith("6.0 s a rank unexplained, after the last step of epoch 0")
    acc = {x["kind"]: x["seconds"] for x in sm["pipeline"]["account"]["slices"]}
    # the window: the run's start (0 s) to the last step (4 s) ... the epoch's end (10 s)
    assert acc == pytest.approx({"checkpoint": 0.0, "evaluation": 0.0, "wait_phase_start": 1.0,
                                 "wait_steady": 1.0, "collectives": 0.0, "compute": 2.0,
                                 "startup": 0.0, "unexplained": 6.0})  # fmt: skip


def test_an_estimated_wait_is_never_read_as_loop_bound(tmp_path):
    # The same steps as above, but the wait estimated (Keras fit's compiled steps): a lower
    # bound, so the 6 s neither computing nor waiting may be wait the estimate missed.
    steps = [(0, 0, -1, 0.0, 10.0), (0, 0, 0, 1.0, 2.0), (0, 0, 1, 3.0, 4.0)]
    segs = [(0, "/data/a.npy", "read", 0, 10, 0.5, 1.5)]
    timing = {"source": "hooks", "wait": "estimated", "method": "call time less the fastest"}
    store = make_store(tmp_path / "s", segs, steps=steps, manifest={"timing": timing})
    v = run(tmp_path, store, min_steady_steps=1)["pipeline"]["verdict"]
    assert v["kind"] == "input-bound-preprocessing" and v["numbers"]["au"] == pytest.approx(0.125)
    assert "even by an estimate that can only underrate the wait" in v["text"]


def test_dftracer_events_give_compute_and_metadata(tmp_path):
    # DFTracer: no counters; open/seek calls and "compute" annotations are app events.
    segs = [
        (0, "/data/a.npy", "read", 0, 100, 1.0, 2.0),
        (0, "/data/a.npy", "read", 100, 100, 5.0, 6.0),
    ]
    ev = [
        (0, "POSIX", "open64", 0.9, 0.95),
        (0, "POSIX", "lseek64", 0.96, 0.97),
        (0, "POSIX", "__xstat64", 0.97, 0.98),
        (0, "POSIX", "close", 6.1, 6.2),
        (0, "compute", "forward", 1.5, 5.5),
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, tracer="dftracer", app_events=ev))
    md = sm["metadata"]
    assert md["source"] == "events"
    assert md["totals"] == {"opens": 1, "stats": 1, "seeks": 1, "fsyncs": 0}
    assert md["meta_time"] == pytest.approx(0.05 + 0.01 + 0.01 + 0.1)
    ov = pd.read_parquet(tmp_path / "out" / "overlap.parquet")
    # The one compute event is the one step, so epoch 0 spans it (1.5-5.5 s): the halves of
    # the reads inside it (1.5-2 s, 5-5.5 s) overlap it; the halves outside are exposed.
    e0, out = ov.set_index("epoch").loc[0], ov.set_index("epoch").loc[-1]
    assert (e0.start, e0.end) == (1.5, 5.5)
    assert e0.io_time == pytest.approx(1.0) and e0.overlapped_io_time == pytest.approx(1.0)
    assert out.io_time == pytest.approx(1.0) and out.exposed_io_time == pytest.approx(1.0)
    assert sm["overlap"]["compute_source"] == "app_events"


def test_checkpoints_placed_from_opens_by_hand(tmp_path):
    # DFTracer sees torch.save's fopen/fclose, not its writes. Rank 0 saves model and optimizer
    # (10.0-10.51 s and 11.0-11.2 s: 0.49 s apart, within phase_gap_s 1.0: one checkpoint of
    # 1,000 + 500 bytes on disk); rank 1 saves another at 50-50.6 s (2,000 bytes). The read of
    # a checkpoint and the opens of dataset files are not saves.
    ev = [
        (0, "STDIO", "fopen", 10.0, 10.01, "/ckpt/model-0.pth"),
        (0, "STDIO", "fclose", 10.5, 10.51, "/ckpt/model-0.pth"),
        (0, "STDIO", "fopen", 11.0, 11.01, "/ckpt/optim-0.pth"),
        (0, "STDIO", "fclose", 11.1, 11.2, "/ckpt/optim-0.pth"),
        (0, "POSIX", "read", 30.0, 31.0, "/ckpt/optim-0.pth"),
        (0, "POSIX", "open64", 20.0, 20.1, "/data/a.jpg"),
        (1, "POSIX", "open64", 50.0, 50.1, "/ckpt/model-1.pth"),
        (1, "POSIX", "close", 50.5, 50.6, "/ckpt/model-1.pth"),
    ]
    outputs = [
        {"path": "/ckpt/model-0.pth", "size": 1000},
        {"path": "/elsewhere/optim-0.pth", "bytes": 500},  # found by its name
        {"path": "/ckpt/model-1.pth", "size": 2000},
    ]
    segs = [(0, "/data/a.jpg", "read", 0, 100, 20.2, 20.3)]
    store = make_store(
        tmp_path / "s", segs, n_ranks=2, tracer="dftracer", app_events=ev,
        manifest={"outputs": outputs},
    )  # fmt: skip
    ck = run(tmp_path, store)["checkpoints"]
    assert ck["bytes_written"] == 0 and ck["on_disk"] == {"files": 3, "bytes": 3500}
    got = [{k: e[k] for k in ("files", "bytes", "ranks", "traced")} for e in ck["opened"]]
    assert got == [
        {"files": 2, "bytes": 1500, "ranks": 1, "traced": False},
        {"files": 1, "bytes": 2000, "ranks": 1, "traced": False},
    ]
    first, second = ck["opened"]
    assert (first["start"], first["end"]) == (10.0, 11.2)
    assert first["duration"] == pytest.approx(1.2)
    assert (second["start"], second["end"]) == (50.0, 50.6)
    assert ck["marks"] == ck["opened"]


@pytest.mark.parametrize("on_disk, missed", [(201_999, False), (202_000, False), (202_001, True)])
def test_missed_checkpoint_writes_boundary(on_disk, missed):
    # up to 1% more on disk than the trace wrote is the same checkpoint (file headers, sizes
    # rounded); beyond it the tracer missed writes. Traced: 200,000 bytes
    from iosweep.analysis.pipeline.completeness import _checkpoint_check

    got = _checkpoint_check({"on_disk": {"files": 2, "bytes": on_disk}, "bytes_written": 200_000})
    assert (got is not None) == missed
    if missed:
        assert (got["kind"], got["expected"], got["seen"]) == (
            "checkpoint-writes",
            202_001,
            200_000,
        )
        assert got["message"].startswith(
            "the job left 2 checkpoint file(s) (202.0 kB) on disk, but the trace holds 200.0 kB "
            "of checkpoint writes: the tracer missed"
        )
    # nothing on disk, or no file recorded: nothing to compare
    assert _checkpoint_check({"on_disk": {"files": 0, "bytes": 0}, "bytes_written": 0}) is None


@pytest.mark.parametrize("seen, blind", [(1799, True), (1800, False), (1801, False)])
def test_missed_dataset_reads_boundary(seen, blind):
    # an ImageNet-style run of whole epochs (steps: 0) over a 1,000-byte dataset of 10 files,
    # 2 epochs: 2,000 bytes must be read; under 90% of them (1,800) the tracer missed reads
    from types import SimpleNamespace

    from iosweep.analysis.pipeline.completeness import _dataset_check

    data = {"workload": "imagenet", "bytes": 1000, "files": 10}
    meta = SimpleNamespace(manifest={"data": data}, params={"steps": 0})
    pipeline = {"totals": {"epochs": 2, "samples": 20}}
    got = _dataset_check(meta, seen, 10, pipeline)
    assert (got is not None) == blind
    if blind:
        assert got == {
            "kind": "dataset-reads", "expected": 2000, "seen": 1799,
            "message": "the tracer saw 1.8 kB of the 2.0 kB of dataset reads that 2 whole "
            "epoch(s) over 10 files must have made",
        }  # fmt: skip
    # a run cut to some steps reads part of the data: only "none at all" is a sure miss
    meta.params["steps"] = 5
    assert _dataset_check(meta, seen, 10, pipeline) is None
    assert _dataset_check(meta, 0, 0, pipeline) == {
        "kind": "dataset-reads", "expected": None, "seen": 0,
        "message": "the tracer saw no dataset reads at all, while the run consumed 20 samples",
    }  # fmt: skip


def test_a_training_trace_without_any_dataset_read_cannot_tell():
    # a Darshan log of a training job whose loader workers were not traced (darshan-hpc/
    # darshan issue 872): steps, no sample count, not one dataset file read: "cannot tell",
    # never complete
    from types import SimpleNamespace

    from iosweep.analysis.pipeline.completeness import _dataset_check

    meta = SimpleNamespace(manifest={}, params={})
    pipeline = {"available": True, "totals": {"epochs": 2, "samples": None,
                                              "steady_steps_per_rank": 48.0}}  # fmt: skip
    got = _dataset_check(meta, 0, 0, pipeline)
    assert got["kind"] == "dataset-reads" and got["seen"] == 0 and got["expected"] is None
    assert got["message"].startswith(
        "the trace holds no read of a dataset file, while the ranks trained 48 steps each"
    )
    assert got["message"].endswith("whether training waited for storage cannot be told here")
    # a dataset file read, or no training steps: nothing to say
    assert _dataset_check(meta, 10, 1, pipeline) is None
    assert _dataset_check(meta, 0, 0, {"available": False, "totals": {}}) is None


# ----------------------------------------------------------------------------------------
# Bad input: incomplete, empty, unattributed


def test_ranks_without_a_trace_are_named(tmp_path):
    # 3 ranks expected, processes unknown (a store from elsewhere): rank 1 did I/O, rank 0
    # only opened a file (a trace, still), rank 2 left nothing
    ctr = [
        {"rank": 0, "path": "/data/a.bin", "opens": 1},
        {"rank": 1, "path": "/data/a.bin", "reads": 1, "bytes_read": 10},
    ]
    store = make_store(tmp_path / "s", [], n_ranks=3, counters=ctr, processes=False)
    sm = run(tmp_path, store)
    (miss,) = [i for i in sm["issues"] if i["kind"] == "missing-log"]
    assert (miss["source"], miss["message"]) == ("rank 2", "rank 2 of 3 left no trace")
    # what ingest or the launcher already said of rank 2 is not said twice
    for kind in ("missing-log", "failed-rank"):
        said = Issue("rank 2", kind, "rank 2 exited with code 9")
        store = make_store(
            tmp_path / kind, [], n_ranks=3, counters=ctr, processes=False, issues=[said]
        )
        sm = analyze_run(store, tmp_path / f"out-{kind}", AnalysisSettings.from_dict({}))
        assert [
            (i["source"], i["kind"], i["message"]) for i in sm["issues"] if i["source"] == "rank 2"
        ] == [("rank 2", kind, "rank 2 exited with code 9")]


def test_truncated_and_incomplete_run(tmp_path):
    segs = [(0, "/data/a.npy", "read", i * 10, 10, 1 + i, 1.5 + i) for i in range(50)]
    c = [{"rank": 0, "path": "/data/a.npy", "reads": 100, "bytes_read": 1000, "max_byte_read": 999}]
    store = make_store(
        tmp_path / "s",
        segs,
        counters=c,
        n_ranks=2,
        processes=False,
        incomplete=True,
        issues=[Issue("log-0.darshan", "partial-dxt", "DXT_POSIX ran out of memory")],
    )
    sm = run(tmp_path, store)
    assert sm["analysis_status"] == "partial" and sm["incomplete"] is True
    assert sm["trace"]["completeness"] == pytest.approx(0.5)
    kinds = {i["kind"] for i in sm["issues"]}
    assert {"partial-dxt", "missing-log"} <= kinds  # rank 1 left no trace
    assert any(i["source"] == "rank 1" for i in sm["issues"])
    ins = {i["id"]: i for i in sm["insights"]}
    assert ins["truncated_trace"]["numbers"]["completeness"] == pytest.approx(0.5)
    # Counters say more than DXT kept: totals take the larger.
    assert sm["headline"]["bytes_read"] == 1000 and sm["headline"]["reads"] == 100


def test_empty_run_gives_marked_empty_result(tmp_path):
    store = make_store(tmp_path / "s", n_ranks=2, processes=False)
    sm = run(tmp_path, store)
    assert sm["analysis_status"] == "empty" and sm["empty"] is True and sm["incomplete"] is True
    assert any(i["kind"] == "empty" for i in sm["issues"])
    assert [i["id"] for i in sm["insights"]] == ["no_io_recorded"]
    assert sm["headline"]["bytes_read"] == 0
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert on_disk["analysis_status"] == "empty"
    for t in ("files", "file_ranks", "ranks", "nodes", "sizes", "phases", "overlap"):
        assert (tmp_path / "out" / f"{t}.parquet").exists()
    assert len(pd.read_parquet(tmp_path / "out" / "files.parquet")) == 0


def test_untraced_run(tmp_path):
    sm = run(tmp_path, make_store(tmp_path / "s", n_ranks=2, tracer="none", processes=False))
    assert sm["analysis_status"] == "untraced" and sm["incomplete"] is False
    assert sm["run"]["run_time"] == 100.0


def test_unattributed_ops_count_in_totals_only(tmp_path):
    segs = [
        *whole_read(0, "/data/a.npy", 100, 1.0),
        (-1, "/data/a.npy", "read", 0, 100, 2.0, 2.1, 4242),
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=1))
    assert sm["trace"]["unattributed"]["bytes"] == 100
    assert sm["headline"]["bytes_read"] == 200
    assert sm["volume"]["bytes_read"]["sum"] == 100
    assert any(i["kind"] == "unattributed" for i in sm["issues"])


def test_processes_as_actors_without_ranks(tmp_path):
    # Like the DLIO logs: no rank files; each process is analysed as its own actor.
    segs = [(-1, f"/data/train/f{p}.npz", "read", 0, 100, 1, 2, 500 + p) for p in range(3)]
    meta = RunMeta(run_id="x", clock_zero=0.0, tracer="darshan")
    store = write_store(tmp_path / "s", meta, {"segments": seg_table(segs)})
    sm = analyze_run(store, tmp_path / "out")
    assert sm["ranks"]["kind"] == "process" and sm["ranks"]["count"] == 3
    assert sm["classes"]["dataset"]["access"]["read"]["strategy"] == "file-per-process"


def test_excluded_paths_and_modules(tmp_path):
    segs = [
        (0, "<STDOUT>", "write", 0, 10, 1, 2),
        (0, "/data/a.npy", "read", 0, 10, 1, 2, 1000, "n0", "MPIIO"),
        (0, "/data/a.npy", "read", 0, 10, 1, 2),
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs))
    assert sm["trace"]["excluded_ops"] == 2 and sm["headline"]["reads"] == 1


def test_not_a_store(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"run\.json"):
        analyze_run(tmp_path / "nowhere", tmp_path / "out")


# ----------------------------------------------------------------------------------------
# Settings and classes


def test_settings_reject_unknown_and_bad_values():
    with pytest.raises(KeyError, match="small_request_byte"):
        AnalysisSettings.from_dict({"small_request_byte": 5})
    with pytest.raises(TypeError, match="top_sizes"):
        AnalysisSettings.from_dict({"top_sizes": "ten"})
    with pytest.raises(ValueError, match="whole_file_coverage"):
        AnalysisSettings.from_dict({"whole_file_coverage": 1.5})
    with pytest.raises(ValueError, match=r"file_classes\[0\].pattern"):
        AnalysisSettings.from_dict({"file_classes": [{"name": "dataset", "pattern": "(["}]})
    with pytest.raises(ValueError, match=r"file_classes\[0\]"):
        AnalysisSettings.from_dict({"file_classes": [{"name": "dataset"}]})
    s = AnalysisSettings.from_dict({"phase_gap_s": 2})
    assert s.phase_gap_s == 2.0 and isinstance(s.phase_gap_s, float)
    assert AnalysisSettings.from_dict(s.to_dict()) == s


def test_file_class_rules_first_match_wins():
    s = AnalysisSettings()
    assert classify_path("/scratch/data/train-images-idx3-ubyte", s) == "dataset"
    assert classify_path("/data/train/checkpoint-3.pt", s) == "checkpoint"  # before /train/
    assert classify_path("/run/checkpoints/ckpt-1.data-00000-of-00001", s) == "checkpoint"
    assert (
        classify_path("/venv/lib/python3.11/site-packages/distutils-precedence.pth", s) == "other"
    )
    assert classify_path("/tmp/onfl3gln", s) == "other"
    custom = AnalysisSettings.from_dict(
        {
            "file_classes": [
                {"name": "labels", "pattern": "labels"},
                {"name": "dataset", "pattern": "ubyte$"},
            ]
        }
    )
    assert custom.class_names == ["labels", "dataset", "other"]
    assert classify_path("/d/train-labels-idx1-ubyte", custom) == "labels"
    assert classify_path("/d/train-images-idx3-ubyte", custom) == "dataset"


def test_path_rules_run_over_all_paths_as_python_re_would():
    """``matches`` runs RE2 over the whole column and falls back to Python's ``re`` for what
    RE2 lacks; either way the answer is ``re.search``'s, checked here against ``re`` itself."""
    # every path of up to four characters after /dev/ over an alphabet that spells shm/
    tails = ["".join(t) for n in range(5) for t in itertools.product("shm/x", repeat=n)]
    paths = [f"/dev/{t}" for t in tails] + ["/dev", "/devx", "/x/dev/null", "/dev/shm/torch_1"]
    lookahead = r"^/dev/(?!shm/)"  # not RE2: the one-path-at-a-time fallback
    expected = [bool(re.search(lookahead, p)) for p in paths]
    assert list(matches(paths, lookahead)) == expected
    # the default exclude pattern spells the same rule without lookahead (RE2)
    default = AnalysisSettings().exclude_pattern
    assert "(?!" not in default
    dev_rule = r"^/dev/([^s]|s[^h]|sh[^m]|shm[^/]|(s|sh|shm)?$)"
    assert f"|{dev_rule}|" in default
    assert list(matches(paths, dev_rule)) == expected
    assert list(matches(paths, default)) == [bool(re.search(default, p)) for p in paths]
    assert sum(expected) == 780  # the 781 tails but "shm/"; none of the four others
    assert matches([], "x").shape == (0,)


def test_string_codes_share_one_numbering_across_columns():
    """Codes of dictionary columns with different dictionaries, repeats and nulls."""
    codes = StringCodes()
    a = pa.chunked_array([pa.array(["/b", "/a", None, "/b"]).dictionary_encode()])
    assert list(codes.codes(a, "<unknown>")) == [0, 1, 2, 0]
    assert codes.values == ["/b", "/a", "<unknown>"]
    # another column: known values keep their codes, new ones are added, nulls may stay -1
    b = pa.chunked_array([pa.array(["/c", "/a"]), pa.array([None, "/c", "/d"])])
    assert list(codes.codes(b, None)) == [3, 1, -1, 3, 4]
    assert codes.values == ["/b", "/a", "<unknown>", "/c", "/d"]
    # a dictionary that repeats a value (Parquet does not promise unique dictionaries)
    d = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2]), pa.array(["/e", "/e", "/b"]))
    assert list(codes.codes(pa.chunked_array([d]), None)) == [5, 5, 0]


def test_human_bytes():
    assert human_bytes(47_040_016) == "47.0 MB"
    assert human_bytes(0) == "0 B" and human_bytes(999) == "999 B" and human_bytes(1000) == "1.0 kB"


# ----------------------------------------------------------------------------------------
# Interval arithmetic against brute force


def test_shared_coverage_matches_brute_force():
    rng = np.random.default_rng(3)
    n = 400
    group = rng.integers(0, 5, n)
    member = rng.integers(0, 4, n)
    lo = rng.integers(0, 300, n)
    hi = lo + rng.integers(0, 60, n)
    one, two = intervals.shared_coverage(group, member, lo, hi, 5)
    for g in range(5):
        depth = np.zeros((4, 400), bool)
        for m, a, b in zip(member[group == g], lo[group == g], hi[group == g], strict=True):
            depth[m, a:b] = True
        per_byte = depth.sum(axis=0)
        assert one[g] == (per_byte >= 1).sum() and two[g] == (per_byte >= 2).sum()
    u = intervals.union_length(group, lo, hi, 5)
    assert np.array_equal(u, one)
    # Offsets too far apart for one composite sort key take the lexsort path: same answers.
    far = 1 << 61
    g2 = np.concatenate([group, [0, 0, 4]])
    m2 = np.concatenate([member, [0, 1, 2]])
    lo2 = np.concatenate([lo, [far, far + 5, far]])
    hi2 = np.concatenate([hi, [far + 10, far + 20, far + 1]])
    one2, two2 = intervals.shared_coverage(g2, m2, lo2, hi2, 5)
    assert one2[0] == one[0] + 20 and two2[0] == two[0] + 5
    assert one2[4] == one[4] + 1 and two2[4] == two[4]
    assert np.array_equal(one2[1:4], one[1:4]) and np.array_equal(two2[1:4], two[1:4])
    assert intervals.union_length(g2, lo2, hi2, 5)[0] == one[0] + 20
    # Time spans (floats) per group.
    t_lo = np.array([0.5, 2.0, 1.0, 0.0, 10.0])
    t_hi = np.array([1.5, 3.0, 1.2, 5.0, 11.0])
    tg = np.array([0, 0, 0, 1, 1])
    assert intervals.union_length(tg, t_lo, t_hi, 2).tolist() == [2.0, 6.0]


def test_intersect_and_measure_in():
    lo, hi = intervals.intersect(
        np.array([0.0, 5.0]), np.array([3.0, 9.0]), np.array([2.0, 8.0]), np.array([6.0, 10.0])
    )
    assert list(zip(lo, hi, strict=True)) == [(2.0, 3.0), (5.0, 6.0), (8.0, 9.0)]
    m = intervals.measure_in(lo, hi, np.array([0.0, 2.5, 7.0]), np.array([10.0, 5.5, 7.5]))
    assert m.tolist() == [3.0, 1.0, 0.0]


# ----------------------------------------------------------------------------------------
# Across the sweep and the CLI


def _pt_like(
    path: Path, ranks: int, rep: int = 0, tracer: str = "darshan", end: float = 100.0
) -> Path:
    segs = [
        s
        for r in range(ranks)
        for s in whole_read(r, "/data/train-images-idx3-ubyte", 4_000_000, 1.0 + r)
    ]
    segs += [(0, "/run/checkpoint-0.pt", "write", 0, 60_000, 50.0, 50.1)]
    params = {
        "framework": "pytorch",
        "tracer": tracer,
        "nodes": 1,
        "ppn": ranks,
        "ranks": ranks,
        "rep": rep,
    }
    return make_store(
        path,
        segs if tracer != "none" else None,
        n_ranks=ranks,
        params=params,
        tracer=tracer,
        end=end,
        run_id=f"pt/ppn~{ranks}/{tracer}/rep~{rep}",
        processes=tracer != "none",
    )


def test_sweep_scaling_insights_and_overhead(tmp_path):
    sums = []
    for ranks in (1, 2, 4):
        for tracer, end in (("darshan", 110.0), ("none", 100.0)):
            st = _pt_like(tmp_path / f"s{ranks}{tracer}", ranks, tracer=tracer, end=end)
            sums.append(analyze_run(st, tmp_path / f"a{ranks}{tracer}"))
    res = analyze_sweep(sums, tmp_path / "sweep")
    df = pd.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert len(df) == 6 and {"framework", "tracer", "nodes", "ppn", "ranks", "rep"} <= set(
        df.columns
    )
    assert pd.read_parquet(tmp_path / "sweep" / "sweep.parquet").shape == df.shape
    sc = json.loads((tmp_path / "sweep" / "scaling.json").read_text())
    ser = next(s for s in sc["series"] if s["key"]["tracer"] == "darshan")
    assert [p["ranks"] for p in ser["points"]] == [1, 2, 4]
    br = ser["metrics"]["bytes_read"]
    # one run per point: the ratios, but no slope and no trend word
    assert br["ratio"] == [1.0, 2.0, 4.0] and br["exponent"] is None and br["trend"] == "noisy"
    assert br["note"] == "one run per point: no trend fitted" and br["judgement"] == ""
    busiest = ser["metrics"]["bytes_read_per_rank_max"]
    assert busiest["ratio"] == [1.0, 1.0, 1.0] and busiest["unit"] == "bytes"
    ia = json.loads((tmp_path / "sweep" / "insights_across.json").read_text())
    ins = next(s for s in ia["series"] if s["key"]["tracer"] == "darshan")["insights"]
    assert ins["redundant_reads"]["status"] == "appears"
    assert ins["redundant_reads"]["appears_at"] == {"ranks": 2, "nodes": 1}
    # one traced and one untraced run per point: an overhead of 10 %, but no verdict
    ov = json.loads((tmp_path / "sweep" / "overhead.json").read_text())["points"]
    assert len(ov) == 3 and all(o["overhead"] == pytest.approx(0.1) for o in ov)
    assert not any(o["fired"] for o in ov) and all(
        o["verdict"].startswith("no verdict") for o in ov
    )
    # a damaged sweep file is refused naming the file and the first bad field
    f = tmp_path / "sweep" / "scaling.json"
    sc["series"][0]["points"][0]["ranks"] = "two"
    f.write_text(json.dumps(sc))
    with pytest.raises(SummaryError) as e:
        read_sweep_file(f)
    assert str(e.value).startswith(f"{f}: series.0.points.0.ranks.int: Input should be a valid")
    assert "tracer_overhead" not in ins
    traced = df[df["tracer"] == "darshan"]
    assert traced["tracer_overhead"].tolist() == pytest.approx([0.1, 0.1, 0.1])
    assert res["runs"] == 6


def test_trends_and_overhead_need_repeats(tmp_path):
    sums = []
    # two repeats per point; run times 100/101 s untraced, 110/111 s traced: no overlap
    for ranks in (1, 2, 4):
        for tracer, end in (("darshan", 110.0), ("none", 100.0)):
            for rep in (0, 1):
                st = _pt_like(
                    tmp_path / f"s{ranks}{tracer}{rep}", ranks, tracer=tracer, end=end + rep
                )
                meta = json.loads((st / "run.json").read_text())
                meta["params"]["rep"] = rep
                (st / "run.json").write_text(json.dumps(meta))
                sums.append(analyze_run(st, tmp_path / f"a{ranks}{tracer}{rep}"))
    analyze_sweep(sums, tmp_path / "sweep")
    sc = json.loads((tmp_path / "sweep" / "scaling.json").read_text())
    ser = next(s for s in sc["series"] if s["key"]["tracer"] == "darshan")
    br = ser["metrics"]["bytes_read"]
    assert br["trend"] == "linear" and br["exponent"] == pytest.approx(1.0)
    assert br["judgement"] == "as expected"  # a total grows with the ranks
    busiest = ser["metrics"]["bytes_read_per_rank_max"]
    assert busiest["trend"] == "flat" and busiest["judgement"] == "ideal"
    ov = json.loads((tmp_path / "sweep" / "overhead.json").read_text())["points"]
    # traced 110-111 s against untraced 100-101 s: 10.4 %, above the 5 % threshold
    assert all(o["fired"] and o["verdict"] == "above threshold" for o in ov)
    assert all(o["overhead"] == pytest.approx(110.5 / 100.5 - 1) for o in ov)


def test_cli_analyzes_stores_and_survives_a_bad_one(tmp_path, capsys):
    a = _pt_like(tmp_path / "a", 1)
    b = _pt_like(tmp_path / "b", 2)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run.json").write_text("{not json")
    rc = acli.main([str(a), str(b), str(bad), "-o", str(tmp_path / "out")])
    assert rc == 1
    err = capsys.readouterr().err
    assert str(bad) in err
    runs = sorted(p.name for p in (tmp_path / "out" / "runs").iterdir())
    assert len(runs) == 2
    df = pd.read_csv(tmp_path / "out" / "sweep.csv")
    assert df["analysis_status"].tolist().count("error") == 1
    # A single store goes straight to OUTDIR; the config's analysis: section applies.
    cfg = tmp_path / "config.yaml"
    cfg.write_text("sweep: {}\nanalysis:\n  top_sizes: 1\n")
    assert acli.main([str(b), "-o", str(tmp_path / "one"), "--config", str(cfg)]) == 0
    sm = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert sm["settings"]["top_sizes"] == 1
    assert len(sm["sizes"]["by_class"]["dataset"]["read"]["top_sizes"]) == 1
    # The same through the iosweep command line.
    from iosweep.cli import main as iosweep_main

    assert iosweep_main(["analyze", str(a), "-o", str(tmp_path / "via-cli")]) == 0
    assert (
        json.loads((tmp_path / "via-cli" / "summary.json").read_text())["run_id"]
        == "pt/ppn~1/darshan/rep~0"
    )
    cfg.write_text("analysis:\n  no_such_key: 1\n")
    with pytest.raises(SystemExit, match="no_such_key"):
        acli.main([str(b), "-o", str(tmp_path / "two"), "--config", str(cfg)])


def test_sweep_from_paths_keeps_other_params_apart(tmp_path):
    dirs = []
    for batch in (32, 64):
        for ranks in (1, 2):
            st = _pt_like(tmp_path / f"s{batch}-{ranks}", ranks)
            meta = json.loads((st / "run.json").read_text())
            meta["params"]["batch_size"] = batch
            (st / "run.json").write_text(json.dumps(meta))
            analyze_run(st, tmp_path / f"a{batch}-{ranks}")
            dirs.append(tmp_path / f"a{batch}-{ranks}")
    # Paths to analysis directories and to summary.json files both work.
    res = analyze_sweep([*dirs[:2], *(d / "summary.json" for d in dirs[2:])], tmp_path / "sweep")
    keys = [s["key"] for s in res["scaling"]["series"]]
    assert keys == [
        {"framework": "pytorch", "tracer": "darshan", "batch_size": 32},
        {"framework": "pytorch", "tracer": "darshan", "batch_size": 64},
    ]
    assert all([p["ranks"] for p in s["points"]] == [1, 2] for s in res["scaling"]["series"])
    df = pd.read_csv(tmp_path / "sweep" / "sweep.csv")
    assert sorted(df["batch_size"]) == [32, 32, 64, 64]
    assert df["summary_path"].str.endswith("summary.json").all()
    with pytest.raises(FileNotFoundError, match="summary"):
        analyze_sweep([tmp_path / "nothing-here"], tmp_path / "sweep2")


def _epochs_of_reads(tmp_path: Path, who: dict[int, list[list[int]]]) -> dict:
    """2 ranks; epoch e is [10e, 10e + 9] s; ``who[e][r]``: the files f<i> (100 bytes each)
    rank r reads in epoch e; rank 1 also writes a file it never reads."""
    segs, steps = [], []
    for e, ranks in who.items():
        for r, files in enumerate(ranks):
            steps += [(r, e, 0, 10 * e + 0.5, 10 * e + 8.0), (r, e, -1, 10 * e, 10 * e + 9)]
            for k, f in enumerate(files):
                t = 10 * e + 1 + k
                segs.append((r, f"/data/f{f}.bin", "read", 0, 100, t, t + 0.5))
    segs.append((1, "/data/out.bin", "write", 0, 100, 5.0, 5.5))
    return run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2, steps=steps))


def test_per_epoch_reads_by_hand(tmp_path):
    # Epoch 0: rank 0 reads f0, f1, rank 1 f2, f3; epoch 1: rank 0 f0, f2, rank 1 f1, f3 (f1
    # and f2 changed reader, f0 and f3 did not); epoch 2: both read f0 (shared in the epoch:
    # 100 bytes twice), rank 0 f1, rank 1 f2 (both changed reader again). Readers changed on
    # 4 of the 6 files read by one rank in two consecutive epochs; 1 of the 11 (epoch, file)
    # pairs is shared
    sm = _epochs_of_reads(tmp_path, {0: [[0, 1], [2, 3]], 1: [[0, 2], [1, 3]], 2: [[0, 1], [0, 2]]})
    pe = sm["classes"]["dataset"]["per_epoch"]
    assert (pe["epochs"], pe["files_per_epoch"], pe["max_readers_in_epoch"]) == (3, [4, 4, 3], 2)
    assert pe["shared_in_epoch_share"] == pytest.approx(1 / 11)
    assert pe["redundant_bytes_in_epochs"] == 100
    assert pe["reader_changed_share"] == pytest.approx(4 / 6)
    # (rank, file) pairs that read: rank 0 f0-f2, rank 1 f0-f3; the written file is not one
    assert sm["classes"]["dataset"]["spatial"]["read_pairs"] == 7


@pytest.mark.parametrize(
    "run_strategy, shared, epochs, moved, said",
    [
        ("shared-whole", 0.0, 2, 0.5, "partitioned-reshuffled"),
        ("shared-whole", 0.0, 2, 0.0, "partitioned"),  # the same partition every epoch
        ("shared-whole", 0.0, 1, None, "partitioned"),
        ("file-per-process", 0.0, 1, None, "file-per-process"),
        ("partitioned", 0.0, 3, 0.0, "partitioned"),
        ("shared-whole", 0.01, 2, 0.5, "partitioned-reshuffled"),  # disjoint_overlap_max 0.01
        ("shared-whole", 0.011, 2, 0.5, "shared-whole"),
        ("single-rank", 0.0, 2, 0.5, "single-rank"),
        (None, 0.0, 2, 0.5, None),
    ],
)
def test_epoch_strategy_by_hand(run_strategy, shared, epochs, moved, said):
    from iosweep.analysis.patterns.access import epoch_strategy

    pe = {"shared_in_epoch_share": shared, "epochs": epochs, "reader_changed_share": moved}
    assert epoch_strategy(run_strategy, pe, AnalysisSettings()) == said
    assert epoch_strategy(run_strategy, None, AnalysisSettings()) == run_strategy


def test_a_partition_reshuffled_each_epoch_is_judged_within_epochs(tmp_path):
    # every file read by one rank an epoch, by the other in the next: over the run all four
    # are read by both ranks, within each epoch none is
    sm = _epochs_of_reads(tmp_path, {0: [[0, 1], [2, 3]], 1: [[2, 3], [0, 1]]})
    pe = sm["classes"]["dataset"]["per_epoch"]
    assert (pe["shared_in_epoch_share"], pe["reader_changed_share"]) == (0.0, 1.0)
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert (acc["run_strategy"], acc["strategy"]) == ("shared-whole", "partitioned-reshuffled")
    assert not [i for i in sm["insights"] if i["id"] == "redundant_reads"]


def test_placement_boundaries_by_hand(tmp_path):
    # one epoch [0.5, 5.0] s: reads starting at 0.4 s (before training), exactly at 0.5 s and
    # exactly at 5.0 s (both ends belong to the epoch), at 5.1 s (after training); one read
    # before training runs into the epoch: the I/O time counts their overlap once
    steps = [(0, 0, 0, 1.0, 2.0), (0, 0, 1, 3.0, 4.0), (0, 0, -1, 0.5, 5.0)]
    segs = [
        (0, "/data/a.npy", "read", 0, 10, 0.4, 0.45),
        (0, "/data/a.npy", "read", 90, 5, 0.45, 0.55),
        (0, "/data/a.npy", "read", 10, 20, 0.5, 0.6),
        (0, "/data/a.npy", "read", 30, 40, 5.0, 5.05),
        (0, "/data/a.npy", "read", 70, 80, 5.1, 5.3),
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, steps=steps))
    pl = sm["placement"]["places"]
    got = {k: (v["ops"], v["bytes_read"]) for k, v in pl.items()}
    assert got == {
        "before training": (2, 15), "in epochs": (2, 60), "between epochs": (0, 0),
        "after training": (1, 80), "checkpoints": (0, 0),
    }  # fmt: skip
    assert pl["before training"]["io_time"] == pytest.approx(0.15)  # [0.4, 0.55]
    assert pl["in epochs"]["io_time"] == pytest.approx(0.1 + 0.05)
    assert pl["after training"]["io_time"] == pytest.approx(0.2)
    # [0.4, 0.6], [5.0, 5.05], [5.1, 5.3]
    assert sm["placement"]["io_time"] == pytest.approx(0.2 + 0.05 + 0.2)


def test_epochs_from_steps_alone_and_a_rank_without_steps(tmp_path):
    # no epoch records (step -1): rank 1's epoch 0 spans its steps, [1, 4] s, step 0 included;
    # rank 0 logged no steps (often only rank 0 does; here the other way round): its reads
    # are placed by the run's epochs, and it does not stop rank 1's from being placed
    steps = [(1, 0, 0, 1.0, 2.0), (1, 0, 1, 3.0, 4.0)]
    segs = [
        (0, "/data/a.npy", "read", 0, 10, 1.5, 1.6),  # rank 0, inside the run's epoch 0
        (0, "/data/a.npy", "read", 10, 5, 0.5, 0.6),  # rank 0, before it
        (1, "/data/b.npy", "read", 0, 20, 1.5, 1.6),  # during step 0
        (1, "/data/b.npy", "read", 20, 40, 3.5, 3.6),  # during step 1
        (1, "/data/b.npy", "read", 60, 80, 6.0, 6.1),  # after its epoch
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2, steps=steps))
    got = {k: v["bytes_read"] for k, v in sm["placement"]["places"].items()}
    assert got == {
        "before training": 5, "in epochs": 70, "between epochs": 0,
        "after training": 80, "checkpoints": 0,
    }  # fmt: skip


@pytest.mark.parametrize("first_step, warned", [(214.0, False), (216.0, True)])
def test_a_step_log_outside_the_traced_io_is_said(tmp_path, first_step, warned):
    # I/O from 100 to 200 s; the steps must lie within 0.1 x 100 + 5 = 15 s of it, else they
    # are another run's (or the clocks disagree)
    segs = [
        (0, "/data/a.npy", "read", 0, 10, 100.0, 100.5),
        (0, "/data/a.npy", "read", 10, 10, 199.5, 200.0),
    ]
    steps = [(0, 0, k, first_step + 10 * k, first_step + 10 * k + 5) for k in range(3)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, steps=steps, end=400.0))
    cov = sm["pipeline"]["coverage"]
    if warned:
        assert cov == (
            f"the step log ({first_step:.1f}-{first_step + 25:.1f} s) lies outside the traced I/O "
            "(100.0-200.0 s): another run's manifest, or clocks that disagree; the wait analysis "
            "may be wrong"
        )
    else:
        assert cov == ""


def test_pipeline_table_by_hand(tmp_path):
    # two ranks, one epoch [0, 10] s of three steps [1, 2], [4, 5], [7, 8] s: each rank waits
    # 1 s for its first batch, then [2, 4] and [5, 7] (4 s); computes 1 s in step 0 (warm-up,
    # left out of AU) and 2 s after it; AU = 2 / (10 - 2) = 25%; 2 s of tail after step 2.
    # Rank 0 reads 100 B in 2.5-3.0 s and 200 B in 5.0-6.0 s, both inside its waits (1.5 s of
    # its 4 s); rank 1 reads 50 B in 0.2-0.4 s (the first wait) and 400 B in 8.5-9.0 s (the
    # tail): none of its 4 s of waiting has a read in flight
    steps = [(r, 0, k, 1.0 + 3 * k, 2.0 + 3 * k) for r in (0, 1) for k in range(3)]
    steps += [(r, 0, -1, 0.0, 10.0) for r in (0, 1)]
    segs = [
        (0, "/data/a.npy", "read", 0, 100, 2.5, 3.0),
        (0, "/data/a.npy", "read", 100, 200, 5.0, 6.0),
        (1, "/data/b.npy", "read", 0, 50, 0.2, 0.4),
        (1, "/data/b.npy", "read", 50, 400, 8.5, 9.0),
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2, steps=steps))
    pt = pd.read_parquet(tmp_path / "out" / "pipeline.parquet").set_index("rank")
    cols = ["epoch_time", "steps", "first_wait", "first_step", "compute", "wait", "tail", "au"]
    assert pt[cols].to_numpy().tolist() == [[10.0, 3, 1.0, 1.0, 2.0, 4.0, 2.0, 0.25]] * 2
    assert pt["reads"].tolist() == [2, 2] and pt["bytes_read"].tolist() == [300, 450]
    assert pt["read_time"].tolist() == pytest.approx([1.5, 0.7])
    assert pt["read_in_wait"].tolist() == pytest.approx([1.5, 0.0])
    assert pt["no_read_share"].tolist() == pytest.approx([2.5 / 4, 1.0])
    assert pt["other_in_wait"].tolist() == pytest.approx([2.5, 4.0])
    t = sm["pipeline"]["totals"]
    assert t["au"] == pytest.approx(0.25) and t["wait_per_rank"] == pytest.approx(4.0)
    assert t["read_in_wait_share"] == pytest.approx(1.5 / 8)
    assert t["no_read_share"] == pytest.approx(6.5 / 8)
    # every step's compute, warm-up included, over the epoch: 3 s of 10 s
    assert t["compute_share"] == pytest.approx(0.3) and t["compute_per_rank"] == 2.0
    assert (t["ranks"], t["epochs"], t["epoch_time_per_rank"], t["training_time"]) == (
        2,
        1,
        10.0,
        10.0,
    )
    assert t["read_time_per_rank"] == pytest.approx(1.1) and t["bytes_read_in_epochs"] == 750
    assert t["read_bandwidth_per_rank"] == pytest.approx(750 / 20)
    (ep,) = sm["pipeline"]["epochs"]
    assert (ep["epoch"], ep["epoch_time"], ep["compute_mean"], ep["wait_max"]) == (
        0,
        10.0,
        2.0,
        4.0,
    )
    assert (ep["au_mean"], ep["au_min"], ep["bytes_read"]) == (0.25, 0.25, 750)


def _totals(**kw) -> dict:
    """A run's pipeline totals: 60 s of training after 1 s of start-up in a 61 s run, AU 50%,
    10 s of wait per rank; ``kw`` overrides."""
    tot = {
        "au": 0.5, "wait_per_rank": 10.0, "epoch_time_per_rank": 60.0, "epochs": 1,
        "read_in_wait_share": 0.3, "meta_in_wait_share": 0.1, "no_read_share": 0.7,
        "startup": 1.0, "training_time": 60.0, "run_time": 61.0,
    }  # fmt: skip
    return tot | kw


@pytest.mark.parametrize(
    "kw, kind",
    [
        ({"au": 0.89}, "input-bound-preprocessing"),  # au_threshold 0.9 (schema default)
        ({"au": 0.9}, "compute-bound"),
        ({"au": None}, "startup"),  # one step an epoch: only warm-up
        # storage_wait_share 0.5: reads + metadata in flight during 0.49 / 0.5 of the wait
        ({"read_in_wait_share": 0.39}, "input-bound-preprocessing"),
        ({"read_in_wait_share": 0.4}, "input-bound-storage"),
        ({"read_in_wait_share": 0.5, "meta_in_wait_share": None}, "input-bound-storage"),
        # start-up above half the run and longer than training (startup_share 0.5)
        ({"startup": 61.0, "run_time": 122.0}, "input-bound-preprocessing"),  # exactly half
        ({"startup": 62.0, "run_time": 122.0}, "startup"),
        ({"startup": 59.0, "training_time": 58.0, "run_time": 100.0}, "startup"),
        ({"startup": 59.0, "training_time": 60.0, "run_time": 100.0}, "input-bound-preprocessing"),
    ],
)
def test_verdict_boundaries(kw, kind):
    from iosweep.analysis.pipeline.verdict import verdict

    v = verdict(_totals(**kw), {"loader_workers": 4}, AnalysisSettings())
    assert v["kind"] == kind
    n = v["numbers"]
    storage = (kw.get("read_in_wait_share", 0.3)) + (kw.get("meta_in_wait_share", 0.1) or 0.0)
    assert n["storage_share_of_wait"] == pytest.approx(storage)
    assert (n["au_threshold"], n["storage_threshold"]) == (0.9, 0.5)
    assert (n["wait_per_rank_s"], n["epoch_time_per_rank_s"]) == (10.0, 60.0)


def _texts(v: dict) -> list[str]:
    return [lv["text"] for lv in v["levers"]]


def test_verdict_text_and_levers_by_kind():
    from iosweep.analysis.pipeline.verdict import verdict

    s = AnalysisSettings()
    small = {"file_size_median": 100_000, "read_size_median": 65_536}
    v = verdict(_totals(read_in_wait_share=0.45), {"loader_workers": 4, **small}, s)
    # 10 s of wait in 60 s of epoch (no steady state given: of the whole epoch): 17%
    assert v["title"] == "Input-bound by storage (moderately: 17% of the step time waiting)"
    assert v["grade"] == "moderate"
    assert v["text"] == (
        "the ranks compute 50% of their epoch time (MLPerf-Storage-style AU) and wait 10.0 s of "
        "60.0 s for data; storage reads or metadata calls were in flight during 55% of that wait"
    )
    assert _texts(v) == [
        "stage the data to node-local storage (sweep.staging: node-local)",
        "pack the small files into larger record files (TFRecord, WebDataset tar, HDF5)",
        "larger reads (a bigger read buffer, whole-file reads)",
        "more loader workers or deeper prefetch, to keep more reads in flight",
    ]
    # staged already, files and reads of 1 MiB (not small): only more reads in flight
    big = {"staging": "node-local", "file_size_median": 1 << 20, "read_size_median": 1 << 20}
    v = verdict(_totals(read_in_wait_share=0.45), big, s)
    assert _texts(v) == ["more loader workers or deeper prefetch, to keep more reads in flight"]
    v = verdict(_totals(au=0.95), {}, s)
    assert (v["title"], v["levers"]) == ("Compute-bound", [])
    assert v["text"].endswith("wait 10.0 s of 60.0 s for data; the input pipeline keeps up")
    v = verdict(_totals(startup=70.0, run_time=131.0), {}, s)
    assert v["title"] == "Dominated by start-up"
    assert v["text"] == (
        "70.0 s passed before the first step, against 60.0 s of training in 1 epoch(s): the run "
        "is too short to judge its input pipeline"
    )
    assert _texts(v) == ["run more steps or epochs before judging the input pipeline"]
    # the levers a sweep parameter turns say which, and which way
    assert [(lv["param"], lv["direction"]) for lv in verdict(_totals(), {}, s)["levers"]] == [
        ("loader_workers", "more"),
        ("", ""),
        ("", ""),
    ]
    v = verdict(_totals(), {"loader_workers": 0}, s)
    assert _texts(v)[0].startswith("loader workers (DataLoader num_workers > 0")
    assert len(v["levers"]) == 3 and _texts(v)[2] == "store samples pre-decoded or pre-resized"


def test_reads_before_training_are_not_counted_in_an_epoch(tmp_path):
    # MNIST-like: both ranks read the data before epoch 0 and the test set after epoch 1;
    # nothing is read inside the epochs
    steps = [
        (r, e, k, 10.0 + 10 * e + k, 10.5 + 10 * e + k)
        for r in (0, 1)
        for e in (0, 1)
        for k in range(3)
    ]
    steps += [(r, e, -1, 9.5 + 10 * e, 13.0 + 10 * e) for r in (0, 1) for e in (0, 1)]
    segs = [(r, "/data/train-images-idx3-ubyte", "read", 0, 1000, 1.0 + r, 1.1 + r) for r in (0, 1)]
    segs += [
        (r, "/data/t10k-images-idx3-ubyte", "read", 0, 100, 30.0 + r, 30.1 + r) for r in (0, 1)
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2, steps=steps))
    pt = pd.read_parquet(tmp_path / "out" / "pipeline.parquet")
    assert len(pt) == 4 and (pt["reads"] == 0).all() and (pt["bytes_read"] == 0).all()
    pl = sm["placement"]["places"]
    assert pl["before training"]["bytes_read"] == 2000 and pl["after training"]["bytes_read"] == 200
    assert pl["in epochs"]["ops"] == 0


# ----------------------------------------------------------------------------------------
# Boundaries: each threshold just below, at and just above it (expected values by hand)

M = 1 << 20


def test_darshan_size_bins_hold_their_upper_bound(tmp_path):
    # darshan-common.h's DARSHAN_BUCKET_INC: "< 101" is 0_100, "< 1025" 100_1K, ...,
    # "< 1048577" 100K_1M: 100 B and 1 MiB are the last sizes of their bins
    sizes = [100, 101, 1024, 1025, M, M + 1]
    segs = [(0, "/data/a.bin", "read", i * 4 * M, n, 1 + i, 1.5 + i) for i, n in enumerate(sizes)]
    run(tmp_path, make_store(tmp_path / "s", segs))
    t = pd.read_parquet(tmp_path / "out" / "sizes.parquet")
    t = t[(t["binning"] == "darshan") & (t["class"] == "dataset")]
    assert dict(zip(t["bin"], t["count"], strict=True)) == {0: 1, 1: 2, 2: 1, 4: 1, 5: 1}


def test_file_shape_by_hand(tmp_path):
    # three files read alike in epoch 0 by rank 0: 512 B at offset 100 (not 0), then 1,000 B
    # contiguous reads, the last shorter (300 B), then a 0-byte read at end of file
    steps = [(0, 0, 0, 1.0, 2.0), (0, 0, -1, 0.0, 50.0)]
    segs = []
    for f in range(3):
        reads = [(100, 512), (612, 1000), (1612, 1000), (2612, 300), (2912, 0)]
        for k, (off, n) in enumerate(reads):
            t = 3 + 10 * f + k
            segs.append((0, f"/data/f{f}.bin", "read", off, n, t, t + 0.5))
    sm = run(tmp_path, make_store(tmp_path / "s", segs, steps=steps))
    (top,) = sm["file_shapes"]["shapes"]
    assert (top["files"], top["first_read"], top["first_at_0"], top["eof_read"]) == (
        3,
        512,
        False,
        True,
    )
    assert (top["body_read_min"], top["body_read_max"]) == (1000, 1000)
    assert top["text"] == (
        "3 files, each read once per epoch by one process: 512 B at an offset, then 1.0 kB "
        "contiguous reads (the last of a file shorter), then 0 B at EOF"
    )


def test_log2_size_bins_by_hand(tmp_path):
    # bin b holds [2^(b-1), 2^b): 1 B in bin 1, 4095 B in bin 12, 4096 and 4097 B in bin 13;
    # a 100-byte write in bin 7 of the writes
    segs = [
        (0, "/data/a.bin", "read", i * 8192, n, 1 + i, 1.5 + i)
        for i, n in enumerate([1, 4095, 4096, 4097])
    ]
    segs.append((0, "/data/b.bin", "write", 0, 100, 9.0, 9.5))
    run(tmp_path, make_store(tmp_path / "s", segs))
    t = pd.read_parquet(tmp_path / "out" / "sizes.parquet")
    t = t[(t["binning"] == "log2") & (t["class"] == "dataset")]
    cols = ["op", "bin", "bin_lower", "bin_upper", "count", "bytes"]
    assert t[cols].values.tolist() == [
        ["read", 1, 1, 2, 1, 1],
        ["read", 12, 2048, 4096, 1, 4095],
        ["read", 13, 4096, 8192, 2, 8193],
        ["write", 7, 64, 128, 1, 100],
    ]
    assert t["cum_fraction"].tolist() == pytest.approx([0.25, 0.5, 1.0, 1.0])


def test_small_requests_are_strictly_below_the_threshold(tmp_path):
    segs = [
        (0, "/data/a.bin", "read", i * 4 * M, n, 1 + i, 1.5 + i)
        for i, n in enumerate([M - 1, M, M + 1, 4096])
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs))
    d = sm["sizes"]["by_class"]["dataset"]["read"]
    assert (d["small"], d["ops"]) == (2, 4)  # M - 1 and 4096; exactly 1 MiB is not small


def test_small_requests_from_counters_only_count_bins_wholly_below(tmp_path):
    # Without DXT a request's size is only its Darshan bin: 100K_1M holds 1 MiB requests,
    # which are not small, so only the bins below 100 KiB count as small at 1 MiB.
    ctr = {"rank": 0, "path": "/data/a.bin", "reads": 30, "bytes_read": 10 * 50 + 20 * M}
    ctr |= {"size_read_10K_100K": 10, "size_read_100K_1M": 20}
    sm = run(tmp_path, make_store(tmp_path / "s", [], counters=[ctr]))
    d = sm["sizes"]["by_class"]["dataset"]["read"]
    assert (d["small"], d["ops"], d["small_source"]) == (10, 30, "counters")


@pytest.mark.parametrize("per_rank, strategy", [(3, "file-per-process"), (4, "file-per-process"), (5, "partitioned")])  # fmt: skip
def test_files_per_rank_boundary_of_file_per_process(tmp_path, per_rank, strategy):
    # fpp_max_files_per_rank = 4 (config default): up to 4 unshared files a rank is FPP
    segs = [
        (r, f"/data/shard-{r}-{k}.npz", "read", 0, 100, 1 + k, 1.1 + k)
        for r in range(2)
        for k in range(per_rank)
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2))
    assert sm["classes"]["dataset"]["access"]["read"]["strategy"] == strategy


def test_a_shared_file_read_whole_by_some_ranks_only_is_not_shared_whole(tmp_path):
    # ranks 0-2 read the 1000-byte file whole, rank 3 its first half: every byte read by 2+
    # ranks (overlapping), 3 whole readers of 4
    p = "/data/train.bin"
    segs = [s for r in range(3) for s in whole_read(r, p, 1000, 1 + r)]
    segs.append((3, p, "read", 0, 500, 5.0, 5.1))
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert acc["strategy"] == "shared-overlapping"
    assert acc["evidence"]["files_whole_by_every_rank"] == 0
    row = pd.read_parquet(tmp_path / "out" / "files.parquet").set_index("path").loc[p]
    assert (row["whole_readers"], row["n_readers"], row["read_strategy"]) == (
        3,
        4,
        "shared-overlapping",
    )


@pytest.mark.parametrize("readers", [0, 1, 3])
def test_checkpoint_writers_are_the_ranks_that_write_it(tmp_path, readers):
    # rank 0 writes checkpoint-1.pt (61,135 B in two writes); ranks 1..readers read it back
    # (a resume): they touched the checkpoint but wrote nothing
    p = "/run/checkpoint-1.pt"
    segs = [(0, p, "write", 0, 59904, 10.0, 10.01), (0, p, "write", 59904, 1231, 10.02, 10.03)]
    segs += [(r, p, "read", 0, 61135, 20.0 + r, 20.1 + r) for r in range(1, readers + 1)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    ck = sm["checkpoints"]
    assert (ck["writers"], ck["n_writers"], ck["bytes_written"]) == ([0], 1, 61135)
    assert ck["only_one_rank_writes"] is True


@pytest.mark.parametrize("shared, strategy", [(10, "shared-disjoint"), (11, "shared-overlapping")])
def test_disjoint_overlap_boundary(tmp_path, shared, strategy):
    # disjoint_overlap_max = 0.01: of 1000 bytes touched, 10 read by both ranks is disjoint
    # enough, 11 is not (rank 0 reads [0, 500 + shared), rank 1 [500, 1000))
    segs = [
        (0, "/data/big.h5", "read", 0, 500 + shared, 1.0, 1.1),
        (1, "/data/big.h5", "read", 500, 500, 1.0, 1.1),
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2))
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert acc["strategy"] == strategy
    assert acc["evidence"]["offset_union_bytes"] == 1000


@pytest.mark.parametrize("slow, straggler", [(1.5, False), (1.625, True)])
def test_straggler_boundary(tmp_path, slow, straggler):
    # straggler_excess = 0.5: a rank is one when its I/O time exceeds the median's by more
    # than half; ranks of 1 s, 1 s and `slow` s (exact in binary)
    segs = [(r, f"/data/s{r}", "read", 0, 100, 10.0, 10.0 + t) for r, t in enumerate([1, 1, slow])]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=3))
    assert sm["imbalance"]["stragglers"] == ([2] if straggler else [])


def test_stragglers_are_judged_against_the_ranks_doing_io(tmp_path):
    # ranks 0 and 1 do no I/O, ranks 2 and 3 one second each: the median rank (0.5 s) would
    # make both "stragglers" (MPI-IO aggregators look like this); among the ranks doing I/O
    # neither is slower than the other
    segs = [(r, f"/data/s{r}", "read", 0, 100, 10.0, 11.0) for r in (2, 3)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=4))
    assert sm["imbalance"]["stragglers"] == []
    assert sm["ranks"]["with_io"] == 2


@pytest.mark.parametrize("fast, fires", [(0.75, False), (0.7421875, True)])
def test_imbalance_boundary(tmp_path, fast, fires):
    # imbalance_share 0.25: (max - min) / max of the ranks' I/O time must exceed it
    segs = [(r, f"/data/s{r}", "read", 0, 100, 10.0, 10.0 + t) for r, t in enumerate([1.0, fast])]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2), imbalance_share=0.25)
    assert sm["imbalance"]["io_time"] == 1.0 - fast
    assert any(i["id"] == "imbalance" for i in sm["insights"]) is fires


@pytest.mark.parametrize("io, fires", [(20.0, False), (20.5, True)])
def test_io_share_boundary(tmp_path, io, fires):
    # io_time_share 0.2 of a 100 s run (make_store's [0, 100] s)
    segs = [(0, "/data/a", "read", 0, 100, 10.0, 10.0 + io)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs))
    assert sm["headline"]["io_share_max"] == io / 100
    assert any(i["id"] == "io_bound" for i in sm["insights"]) is fires


@pytest.mark.parametrize("small, total, fires", [(1000, 10000, False), (1001, 10000, True), (999, 2000, False)])  # fmt: skip
def test_small_requests_insight_boundary(tmp_path, small, total, fires):
    # small_requests_share 0.1 (strictly above) and small_requests_min_count 1000 (at least)
    lens = [4096] * small + [2 * M] * (total - small)
    segs = [(0, "/data/a.bin", "read", i * 2 * M, n, 1 + i * 1e-4, 1 + i * 1e-4 + 5e-5) for i, n in enumerate(lens)]  # fmt: skip
    sm = run(tmp_path, make_store(tmp_path / "s", segs))
    assert any(i["id"] == "small_requests" for i in sm["insights"]) is fires


@pytest.mark.parametrize("offset, warned", [(0.0, False), (400.0, True)])
def test_a_step_log_outside_the_traced_span_is_flagged(tmp_path, offset, warned):
    # I/O at 10-20 s; 10 steps of 1 s from 10 s, or from 410 s: far beyond the slack of
    # 10% of the span + 5 s (another run's manifest, or clocks that disagree); the epoch row
    # (step -1) spans the log to 420 s
    segs = [(0, "/data/a.bin", "read", i * 100, 100, 10.0 + i, 10.5 + i) for i in range(10)]
    steps = [(0, 0, -1, 10.0 + offset, 20.0 + offset)]
    steps += [(0, 0, k, 10.0 + offset + k, 10.8 + offset + k) for k in range(10)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, steps=steps, end=500.0))
    cov = sm["pipeline"]["coverage"]
    assert bool(cov) is warned
    if warned:
        assert cov.startswith(
            "the step log (410.0-420.0 s) lies outside the traced I/O (10.0-19.5 s)"
        )


def test_a_run_without_steps_gets_the_io_analysis_and_says_why_not_the_wait(tmp_path):
    segs = [(0, "/data/a.bin", "read", i * 100, 100, 10.0 + i, 10.5 + i) for i in range(10)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs))
    assert sm["pipeline"]["available"] is False and "no compute phases" in sm["pipeline"]["reason"]
    assert sm["headline"]["bytes_read"] == 1000  # the I/O analysis is there


@pytest.mark.parametrize(
    "e, trend",
    [(None, None), (-0.15, "shrinks"), (-0.149, "flat"), (0.149, "flat"), (0.15, "sublinear"),
     (0.849, "sublinear"), (0.85, "linear"), (1.15, "linear"), (1.151, "superlinear")],
)  # fmt: skip
def test_scaling_trend_boundaries(e, trend):
    # docs/analysis.md: flat |e| < 0.15, shrinks e <= -0.15, linear 0.85-1.15 (both ends in)
    from iosweep.analysis.findings.sweep import _trend

    assert _trend(e) == trend


def test_a_sweep_row_takes_its_scale_from_the_params_or_the_ranks_seen():
    from iosweep.analysis.findings.sweep import _row

    # logs from elsewhere: no params; 4 ranks seen on 2 hosts: 2 a node. The headline's own
    # counts (hosts seen, ranks traced) do not override the point
    sm = {"run_id": "x", "ranks": {"count": 4, "nodes": 2}, "headline": {"nodes": 9, "ranks": 9}}
    r = _row(sm)
    assert (r["nodes"], r["ppn"], r["ranks"], r["rep"]) == (2, 2, 4, 0)
    # a sweep point: 1 node x 2 processes, the ranks not written: 2
    r = _row({"params": {"nodes": 1, "ppn": 2, "rep": 3, "loader_workers": 4, "x": [1]}})
    assert (r["nodes"], r["ppn"], r["ranks"], r["rep"]) == (1, 2, 2, 3)
    assert r["loader_workers"] == 4 and "x" not in r  # a list is no sweep-table cell
    assert (r["status"], r["analysis_status"], r["incomplete"], r["issues"]) == ("", "", False, 0)
    r = _row({"error": "boom", "issues": [{}, {}]})
    assert (r["analysis_status"], r["incomplete"], r["issues"]) == ("error", True, 2)


@pytest.mark.parametrize(
    "mean, reps, want",
    [
        ([1.0, 2.0, 4.0], [2, 2, 2], (1.0, "linear", "")),
        ([1.0, 2.0, 4.0], [2, 1, 2], (None, "noisy", "one run per point: no trend fitted")),
        ([1.0, 3.0, 2.0], [2, 2, 2], (None, "noisy", "not monotonic: no trend fitted")),
        ([1.0, np.nan, np.nan], [2, 2, 2], (None, None, "")),
    ],
)
def test_fit_trend_by_hand(mean, reps, want):
    # ranks 1, 2, 4: a mean that doubles with the ranks has slope 1 in log-log (linear)
    from iosweep.analysis.findings.sweep import fit_trend

    e, trend, why = fit_trend(np.array([1, 2, 4]), np.array(mean), reps)
    assert (e if e is None else pytest.approx(e), trend, why) == want


def test_changes_under_2_percent_of_the_values_are_no_direction():
    # 100 -> 101 -> 100.5: up 1% then down 0.5%: noise, not a turn; a flat series is fitted
    # (its least-squares slope in log-log is about 0.004)
    from iosweep.analysis.findings.sweep import fit_trend

    ranks, mean = np.array([1, 2, 4]), np.array([100.0, 101.0, 100.5])
    e, trend, why = fit_trend(ranks, mean, [2, 2, 2])
    assert (trend, why) == ("flat", "")
    assert e == pytest.approx(np.polyfit(np.log(ranks), np.log(mean), 1)[0])
    # 100 -> 110 -> 105: a turn of 10% and 5%
    assert fit_trend(ranks, np.array([100.0, 110.0, 105.0]), [2, 2, 2])[1] == "noisy"


@pytest.mark.parametrize(
    "metric, trend, said",
    [
        ("au", "flat", "ideal"),  # AU should stay flat as ranks grow, higher is better
        ("au", "shrinks", "worse than ideal"),
        ("samples_per_s", "linear", "as expected"),
        ("samples_per_s", "superlinear", "better than ideal"),
        ("samples_per_s", "sublinear", "worse than ideal"),
        ("wait_per_rank", "linear", "worse than ideal"),  # lower is better
        ("wait_per_rank", "shrinks", "better than ideal"),
        ("bytes_read", "superlinear", "more than ideal"),  # no better or worse: only more
        ("bytes_read", "sublinear", "less than ideal"),
        ("bytes_written", "linear", ""),  # no ideal
        ("au", "noisy", ""),
        ("au", None, ""),
        ("not_a_metric", "flat", ""),
    ],
)
def test_scaling_judgement_by_hand(metric, trend, said):
    from iosweep.analysis.findings.sweep import judge

    assert judge(metric, trend) == said


P1, P2, P4 = ({"ranks": r, "nodes": 1} for r in (1, 2, 4))


@pytest.mark.parametrize(
    "frac, status, appears, disappears",
    [
        ([1.0, 1.0, 1.0], "always", None, None),
        ([0.0, 0.0, 0.0], "never", None, None),
        ([0.0, 0.5, 1.0], "appears", P2, None),  # half the repeats at 2 ranks is fired
        ([1.0, 0.0, 0.0], "disappears", None, P2),
        ([1.0, 1.0, 0.0], "disappears", None, P4),
        ([0.0, 1.0, 0.0], "intermittent", P2, None),
        ([1.0, 0.0, 1.0], "intermittent", None, P2),
    ],
)
def test_insight_changes_across_scale_by_hand(frac, status, appears, disappears):
    from iosweep.analysis.findings.sweep import _changes

    got = _changes(frac, [P1, P2, P4])
    assert got == {"fired_share": frac, "status": status, "appears_at": appears,
                   "disappears_at": disappears}  # fmt: skip


@pytest.mark.parametrize(
    "traced, base, verdict",
    [
        ([11.0, 11.2], [10.0, 10.2], "above threshold"),  # +10.9% > 5%, no overlap
        ([10.4, 10.5], [10.0, 10.2], "below threshold"),  # +3.5%
        ([10.1, 11.0], [10.0, 10.2], "within the noise: the traced and untraced run times overlap"),
        ([11.0], [10.0, 10.2], "no verdict: 1 traced and 2 untraced run(s), 2 of each needed"),
    ],
)
def test_tracer_overhead_by_hand(traced, base, verdict):
    # run times of a traced point against the untraced runs of the same point; the
    # threshold is tracer_overhead_share 0.05 (schema default)
    from iosweep.analysis.findings.sweep import tracer_overhead

    rows = [("darshan", t) for t in traced] + [("none", t) for t in base]
    df = pd.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(len(rows))],
            "framework": "pytorch", "nodes": 1, "ppn": 2, "ranks": 2,
            "rep": list(range(len(rows))),
            "tracer": [t for t, _ in rows], "run_time": [x for _, x in rows],
            "analysis_status": "complete",
        }
    )  # fmt: skip
    (o,) = tracer_overhead(df, AnalysisSettings())
    assert o["tracer"] == "darshan" and o["verdict"] == verdict
    # a sweep over one parameter only (its point: the ranks) compares the same way
    (one,) = tracer_overhead(
        df[["run_id", "ranks", "tracer", "run_time", "analysis_status"]], AnalysisSettings()
    )
    assert (one["point"], one["verdict"]) == ({"ranks": 2}, verdict)
    assert o["fired"] is (verdict == "above threshold")
    assert o["overhead"] == pytest.approx(np.mean(traced) / np.mean(base) - 1)
    assert (o["traced_runs"], o["baseline_runs"]) == (len(traced), len(base))
    assert (o["traced_min"], o["traced_max"]) == (min(traced), max(traced))
    assert (o["baseline_min"], o["baseline_max"], o["threshold"]) == (10.0, 10.2, 0.05)
    assert o["point"]["ranks"] == 2 and "tracer" not in o["point"]


def test_storage_bound_projection_by_hand():
    # two runs of a sweep (sweep-table columns): the one closest to fully fed (AU 50%) sets
    # a rank's demand, 100 MB/s / 0.5 = 200 MB/s; the most the file system delivered is
    # max(2 x 100, 4 x 60) = 240 MB/s, so 240 / 200 = 1.2 ranks; opens per rank fully fed
    # 200 / 2 / 0.5 = 200/s against the most seen, 240/s: 1.2 ranks too
    from iosweep.analysis.pipeline.levers import projection

    df = pd.DataFrame(
        {
            "run_id": ["a", "b"],
            "ranks": [2, 4],
            "au": [0.5, 0.25],
            "read_bandwidth_per_rank": [100e6, 60e6],
            "dataset_files_read_per_epoch": [10, 10],
            "files_per_s": [200.0, 240.0],
        }
    )
    p = projection(df, AnalysisSettings())
    assert p is not None and p["run_id"] == "a"
    assert (p["demand_per_rank"], p["fs_bandwidth"]) == (200e6, 240e6)
    assert p["ranks_at_bandwidth"] == pytest.approx(1.2)
    assert (p["opens_per_rank"], p["fs_metadata_rate"]) == (200.0, 240.0)
    assert p["ranks_at_metadata"] == pytest.approx(1.2)
    assert p["fs_bandwidth_source"] == "highest observed"
    # a job that loads its data before training reads no files per epoch: no projection
    assert projection(df.assign(dataset_files_read_per_epoch=0), AnalysisSettings()) is None
    # a DLIO run (a replay, say) closer to fully fed does not stand for the job: run a still
    # sets the demand, while the file system's best figure counts every run
    dlio = df.assign(workload=["imagenet", "dlio:iosweep_replay_a"], au=[0.5, 0.9])
    p = projection(dlio, AnalysisSettings())
    assert p is not None and p["run_id"] == "a" and p["demand_per_rank"] == 200e6
    assert (p["fs_bandwidth"], p["fs_metadata_rate"]) == (240e6, 240.0)
    # DLIO runs alone: the projection is theirs
    only = projection(dlio.assign(workload="dlio:default"), AnalysisSettings())
    assert only is not None and only["run_id"] == "b"


def test_lever_series_by_hand():
    # sweep-table rows: loader workers 8 and 2 (two repeats at 8), staging none and node-local
    # at 8 workers, and a tensorflow run whose workers never vary (no series of its own)
    from iosweep.analysis.pipeline.levers import lever_series

    df = pd.DataFrame(
        {
            "run_id": ["w8a", "w2", "w8b", "shm", "tf"],
            "framework": ["pytorch"] * 4 + ["tensorflow"],
            "loader_workers": [8, 2, 8, 8, 4],
            "staging": ["none", "none", "none", "node-local", "none"],
            "rep": [0, 0, 1, 0, 0],
            "au": [0.4, 0.1, 0.5, 0.8, 0.3],
            "compute_share": [0.4, 0.1, 0.6, 0.8, 0.3],
            "samples_per_s": [900.0, 300.0, 1100.0, 1500.0, 200.0],
        }
    )
    got = lever_series(df, ["framework", "loader_workers", "staging", "rep"], AnalysisSettings())
    assert [(s["lever"], s["key"]) for s in got] == [
        ("loader_workers", {"framework": "pytorch", "staging": "none"}),
        ("staging", {"framework": "pytorch", "loader_workers": 8}),
    ]
    w, st = got
    # values in increasing order; the two repeats at 8 averaged: AU 45%, 1,000 samples/s
    assert w["values"] == [2, 8] and w["reps"] == [1, 2]
    assert w["au"] == pytest.approx([0.1, 0.45]) and w["samples_per_s"] == [300.0, 1000.0]
    assert w["compute_share"] == pytest.approx([0.1, 0.5])
    assert w["text"] == "loader workers 2 → 8: AU 10% → 45%, samples/s 300 → 1,000"
    assert st["values"] == ["none", "node-local"] and st["reps"] == [2, 1]
    assert st["text"] == "staging none → node-local: AU 45% → 80%, samples/s 1,000 → 1,500"
    # an untraced run has samples/s but no AU: it is in the series, its AU a "?"
    df.loc[df["run_id"] == "w2", "au"] = np.nan
    w = lever_series(df, ["framework", "loader_workers", "staging", "rep"], AnalysisSettings())[0]
    assert w["au"] == [None, pytest.approx(0.45)]
    assert w["text"] == "loader workers 2 → 8: AU ? → 45%, samples/s 300 → 1,000"
    # runs that do not say their framework (logs labelled by hand) still form their series
    unlabelled = lever_series(
        df.assign(framework=None),
        ["framework", "loader_workers", "staging", "rep"],
        AnalysisSettings(),
    )
    assert [(s["lever"], s["key"]["framework"], s["values"]) for s in unlabelled] == [
        ("loader_workers", None, [2, 4, 8]),
        ("staging", None, ["none", "node-local"]),
    ]
    # a run with neither is not a point of any series
    df.loc[df["run_id"] == "w2", "samples_per_s"] = np.nan
    assert lever_series(df, ["framework", "loader_workers", "staging", "rep"], AnalysisSettings())[
        0
    ]["lever"] == ("staging")


@pytest.mark.parametrize(
    "au8, fed", [(0.89, {"ranks": 4, "nodes": 1}), (0.9, {"ranks": 8, "nodes": 2})]
)
def test_scale_series_by_hand(au8, fed):
    # one workload at 4 ranks on 1 node (two repeats) and 8 ranks on 2 nodes; the largest point
    # at or above the 90% AU threshold is 8 ranks only when its AU reaches 0.9
    from iosweep.analysis.pipeline.levers import scale_series

    df = pd.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "workload": ["mnist"] * 3,
            "ranks": [4, 4, 8],
            "nodes": [1, 1, 2],
            "rep": [0, 1, 0],
            "au": [0.92, 0.96, au8],
            "samples_per_s": [100.0, 200.0, 280.0],
            "read_bandwidth_per_rank": [10e6, 20e6, 12e6],
        }
    )
    (sc,) = scale_series(df, ["workload", "ranks", "nodes", "rep"], AnalysisSettings())
    assert sc["key"] == {"workload": "mnist"}
    assert (sc["ranks"], sc["nodes"]) == ([4, 8], [1, 2])
    assert sc["au"] == pytest.approx([0.94, au8]) and sc["samples_per_s"] == [150.0, 280.0]
    # per node: 15 MB/s x 4 ranks on 1 node; 12 MB/s x 8 ranks on 2 nodes
    assert sc["read_bandwidth_per_rank"] == [15e6, 12e6]
    assert sc["read_bandwidth_per_node"] == [60e6, 48e6]
    assert sc["largest_fed"] == fed
    # no point fed: none named
    (sc,) = scale_series(
        df.assign(au=0.5), ["workload", "ranks", "nodes", "rep"], AnalysisSettings()
    )
    assert sc["largest_fed"] is None


def test_files_ranks_nodes_and_headline_by_hand(tmp_path):
    # rank 0 on n0 reads a.bin 0-100 (1.0-1.5 s) and 100-300 (2.0-2.5 s), writes 50 B of
    # ckpt-0.pt (5.0-5.2 s); rank 1 on n1 reads a.bin 0-100 (1.0-1.4 s) and b.bin 0-400
    # (3.0-4.0 s). Run: 100 s
    segs = [
        (0, "/data/a.bin", "read", 0, 100, 1.0, 1.5),
        (0, "/data/a.bin", "read", 100, 200, 2.0, 2.5),
        (0, "/ckpt/ckpt-0.pt", "write", 0, 50, 5.0, 5.2),
        (1, "/data/a.bin", "read", 0, 100, 1.0, 1.4),
        (1, "/data/b.bin", "read", 0, 400, 3.0, 4.0),
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2, hosts={0: "n0", 1: "n1"}))
    files = pd.read_parquet(tmp_path / "out" / "files.parquet").set_index("path")
    a, ck, b = files.loc["/data/a.bin"], files.loc["/ckpt/ckpt-0.pt"], files.loc["/data/b.bin"]
    # a.bin: 3 reads, 400 B in 1.4 s, 300 B long; rank 0 read it whole, rank 1 its first
    # 100 B, which both read: 100 of the 300 B union are shared
    assert (a["class"], a["reads"], a["bytes_read"], a["size"]) == ("dataset", 3, 400, 300)
    assert a["read_time"] == pytest.approx(1.4) and (a["first_io"], a["last_io"]) == (1.0, 2.5)
    assert (a["n_ranks"], a["n_readers"], a["whole_readers"], a["n_hosts"]) == (2, 2, 1, 2)
    assert (a["max_rank_bytes_read"], a["min_rank_bytes_read"]) == (300, 100)
    assert (a["read_union"], a["read_shared"]) == (300, 100)
    assert a["read_overlap"] == pytest.approx(1 / 3) and a["read_strategy"] == "shared-overlapping"
    assert (ck["class"], ck["writes"], ck["bytes_written"], ck["n_writers"]) == (
        "checkpoint",
        1,
        50,
        1,
    )
    assert (ck["whole_writers"], ck["write_union"], ck["write_strategy"]) == (1, 50, "exclusive")
    assert (b["reads"], b["bytes_read"], b["size"], b["read_strategy"]) == (
        1,
        400,
        400,
        "exclusive",
    )
    ranks = pd.read_parquet(tmp_path / "out" / "ranks.parquet").set_index("rank")
    cols = ["host", "reads", "writes", "bytes_read", "bytes_written", "files", "processes"]
    assert ranks[cols].values.tolist() == [["n0", 2, 1, 300, 50, 2, 1], ["n1", 2, 0, 500, 0, 2, 1]]
    assert ranks["bytes_written_checkpoint"].tolist() == [50, 0]
    assert ranks["bytes_read_dataset"].tolist() == [300, 500]
    assert ranks["io_time"].tolist() == pytest.approx([1.2, 1.4])
    assert (ranks["first_io"].tolist(), ranks["last_io"].tolist()) == ([1.0, 1.0], [5.2, 4.0])
    # bytes moved over I/O time; I/O time over the 100 s run
    assert ranks["bandwidth"].tolist() == pytest.approx([350 / 1.2, 500 / 1.4])
    assert ranks["io_share"].tolist() == pytest.approx([0.012, 0.014])
    nodes = pd.read_parquet(tmp_path / "out" / "nodes.parquet").set_index("host")
    assert nodes[["ranks", "bytes_read", "bytes_written", "unique_bytes_read"]].values.tolist() == [
        [1, 300, 50, 300],
        [1, 500, 0, 500],
    ]
    assert nodes["read_amplification"].tolist() == [1.0, 1.0]
    h = sm["headline"]
    assert (h["ranks"], h["nodes"], h["files"], h["reads"], h["writes"]) == (2, 2, 3, 4, 1)
    assert (h["bytes_read"], h["bytes_written"], h["bytes_read_per_rank"]) == (800, 50, 400.0)
    assert (h["bytes_read_per_rank_min"], h["bytes_read_per_rank_max"]) == (300, 500)
    assert (h["dataset_bytes_read"], h["dataset_files"], h["checkpoint_files"]) == (800, 2, 1)
    assert (h["ranks_writing"], h["bytes_written_per_writer"], h["checkpoint_writers"]) == (
        1,
        50.0,
        1,
    )
    assert (h["io_time_max"], h["io_time_mean"]) == pytest.approx((1.4, 1.3))
    assert h["io_busy_time_total"] == pytest.approx(2.6)
    # all bytes over the slowest rank's I/O time; the ranks' own bandwidths averaged
    assert h["bandwidth_aggregate"] == pytest.approx(850 / 1.4)
    assert h["bandwidth_per_rank_mean"] == pytest.approx((350 / 1.2 + 500 / 1.4) / 2)
    # (max - min) / max per rank: bytes 350 and 500, I/O time 1.2 and 1.4 s
    assert h["imbalance_bytes"] == pytest.approx(0.3)
    assert h["imbalance_io_time"] == pytest.approx(0.2 / 1.4)
    # sizes 100, 200, 100, 400: the nearest-rank median is 100; every read contiguous
    assert (h["read_size_median"], h["small_read_share"], h["contiguous_share"]) == (100, 1.0, 1.0)
    # gaps of at most phase_gap_s (1 s): one phase
    assert (h["phases"], h["checkpoints"]) == (1, 1)
    assert h["checkpoint_duration_mean"] == pytest.approx(0.2)


def test_file_tables_keep_the_files_that_moved_the_most(tmp_path):
    # 99 files of 1,000-1,098 bytes and two of 5 bytes (tie-a, tie-b); table_max_files 100:
    # the 99 and, of the tie, the path that sorts first; the summary counts them all
    segs = [
        (0, f"/data/f{i:03d}.bin", "read", 0, 1000 + i, 1 + i * 0.01, 1.005 + i * 0.01)
        for i in range(99)
    ]
    segs += [(0, f"/data/tie-{x}.bin", "read", 0, 5, 3.0 + k, 3.1 + k) for k, x in enumerate("ba")]
    sm = run(tmp_path, make_store(tmp_path / "s", segs), table_max_files=100)
    files = pd.read_parquet(tmp_path / "out" / "files.parquet")
    kept = set(files["path"])
    assert len(kept) == 100 and "/data/tie-a.bin" in kept and "/data/tie-b.bin" not in kept
    assert sm["file_tables"] == {
        "files": 101, "zero_byte_files": 0, "file_rank_rows": 101, "counter_only_ops": 0,
        "max_files": 100, "files_kept": 100, "file_rank_rows_kept": 100,
    }  # fmt: skip
    assert sm["headline"]["files"] == 101  # every file still counts
    assert len(pd.read_parquet(tmp_path / "out" / "file_ranks.parquet")) == 100


def test_operations_of_layers_not_analysed_are_counted_aside(tmp_path):
    # 2 POSIX reads and, above them, 3 MPI-IO reads (DXT_MPIIO), which analysis.modules
    # (POSIX, STDIO, DFS by default) leaves out of the figures: counted, not drawn
    segs = [(0, "/scratch/f.dat", "read", 100 * k, 100, 1.0 + k, 1.5 + k) for k in range(2)]
    segs += [
        (0, "/scratch/f.dat", "read", 100 * k, 100, 1.0 + k, 1.6 + k, 1000, "n0", "MPIIO")
        for k in range(3)
    ]
    sm = run(tmp_path, make_store(tmp_path / "s", segs))
    assert sm["ops_sample"]["other_layers"] == {"MPIIO": 3}
    assert (sm["headline"]["reads"], sm["headline"]["bytes_read"]) == (2, 200)


def test_the_summary_keeps_the_first_100_phases(tmp_path):
    # 150 reads of 0.1 s, 2 s apart (over phase_gap_s, 1 s): 150 phases; the summary lists
    # the first 100 and counts them all (phases.parquet has every one)
    segs = [(0, "/data/a.bin", "read", 10 * k, 10, 2.0 * k, 2.0 * k + 0.1) for k in range(150)]
    sm = run(tmp_path, make_store(tmp_path / "s", segs, end=400.0))
    ph = sm["temporal"]["phases"]
    assert ph["count"] == 150 and len(ph["phases"]) == 100
    assert ph["io_active_time"] == pytest.approx(15.0)
    assert [p["start"] for p in ph["phases"][:2]] == [0.0, 2.0] and ph["phases"][-1][
        "start"
    ] == 198.0
    assert len(pd.read_parquet(tmp_path / "out" / "phases.parquet")) == 150


def test_heatmap_bins_by_hand(tmp_path):
    # a 100 s run in 120 bins of 100/120 s: an operation counts in the bin where it starts
    # (10.2 s and 10.5 s: bin 12; 50.1 s: bin 60; 95.1 s: bin 114), rank 0 included
    segs = [
        (0, "/data/a", "read", 0, 1000, 10.2, 10.3),
        (0, "/data/b", "write", 0, 300, 10.5, 10.6),
        (0, "/data/a", "read", 1000, 50, 50.1, 50.2),
        (1, "/data/a", "read", 0, 200, 95.1, 95.2),
    ]
    run(tmp_path, make_store(tmp_path / "s", segs, n_ranks=2))
    hm = pd.read_parquet(tmp_path / "out" / "heatmap.parquet")
    got = hm[["rank", "bin", "bytes_read", "bytes_written", "ops"]].values.tolist()
    assert got == [[0, 12, 1000, 300, 2], [0, 60, 50, 0, 1], [1, 114, 200, 0, 1]]
    assert hm["t0"].tolist() == pytest.approx([10.0, 50.0, 95.0])
    assert (hm["t1"] - hm["t0"]).tolist() == pytest.approx([100 / 120] * 3)
    # no steps or epochs recorded: where each I/O phase lies in training is not known
    ph = pd.read_parquet(tmp_path / "out" / "phases.parquet")
    assert len(ph) == 3 and set(ph["where"]) == {"not known"} and ph["epoch"].isna().all()
    # phases 1 s apart at most are one: [10.2, 10.6], [50.1, 50.2], [95.1, 95.2]; bytes whole
    cols = ["ops", "reads", "writes", "bytes_read", "bytes_written"]
    assert ph[cols].values.tolist() == [[2, 1, 1, 1000, 300], [1, 1, 0, 50, 0], [1, 1, 0, 200, 0]]
    assert {str(ph[c].dtype) for c in cols} == {"int64"}


@pytest.mark.parametrize(
    "workers, who",
    [(0, "the training process itself (no loader workers)"), (1, "1 loader worker"),
     (2, "2 loader workers"), (None, "the data loader")],
)  # fmt: skip
def test_preprocessing_verdict_names_who_does_the_work(workers, who):
    from iosweep.analysis.pipeline.verdict import _verdict_text

    tot = {"au": 0.11, "wait_per_rank": 54.0, "epoch_time_per_rank": 60.7,
           "read_in_wait_share": 0.05, "no_read_share": 0.9}  # fmt: skip
    text = _verdict_text(
        "input-bound-preprocessing", tot, {"loader_workers": workers}, 0.0, AnalysisSettings()
    )
    assert text == (
        "the ranks compute 11% of their epoch time (MLPerf-Storage-style AU) and wait 54.0 s of "
        "60.7 s for data; reads were in flight during only 5% of that wait (90% of it with no "
        f"read at all): the time goes to decoding, augmentation and collation in {who}"
    )


def _steady(**kw) -> dict:
    """Totals with a steady state: 60 s a rank in epochs, 50 s of it steady (100 steps after
    each epoch's first), 25 s of compute in it (AU 50%); ``kw`` overrides."""
    return _totals(
        au=0.5, compute_per_rank=25.0, steady_time_per_rank=50.0, steady_steps_per_rank=100.0,
        idle_per_rank=25.0, wait_per_rank=20.0, wait_share=0.4,
    ) | kw  # fmt: skip


@pytest.mark.parametrize(
    ("wait", "idle", "kind", "grade"),
    [
        # wait_grades [0.05, 0.2] of the 50 s steady state: 2.5 s and 10 s
        (2.4, 2.4, "loop-bound", ""),  # 4.8%: a sliver, not input-bound, all of the idle time
        (2.5, 25.0, "loop-bound", ""),  # 5%, but under half of the 25 s idle (input_wait_share)
        (7.5, 10.0, "input-bound-preprocessing", "moderate"),  # 15%, most of the idle 10 s
        (12.5, 25.0, "input-bound-preprocessing", "high"),  # 25%, half the idle 25 s
        (9.9, 25.0, "loop-bound", ""),  # 19.8%, under half of the idle 25 s
    ],
)
def test_a_wait_is_graded_by_its_share_of_the_step_time(wait, idle, kind, grade):
    from iosweep.analysis.pipeline.verdict import verdict

    s = AnalysisSettings(au_threshold=1.0)  # AU alone decides nothing here
    tot = _steady(wait_per_rank=wait, wait_share=wait / 50.0, idle_per_rank=idle)
    v = verdict(tot, {}, s)
    assert (v["kind"], v["grade"]) == (kind, grade if kind.startswith("input") else "")
    assert v["numbers"]["wait_share_of_step"] == pytest.approx(wait / 50.0)


@pytest.mark.parametrize(
    ("ckpt", "held"),
    [(8.0, True), (7.9, False)],  # of the 25 s idle less 9 s of wait: 16 s; half is 8 s
)
def test_a_loop_whose_idle_time_is_its_checkpoints_says_so_with_their_lever(ckpt, held):
    from iosweep.analysis.pipeline.verdict import verdict

    # 50 s steady, 25 s of compute, 9 s waiting (18%, under half of the idle: loop-bound)
    tot = _steady(wait_per_rank=9.0, wait_share=0.18, checkpoint_per_rank=ckpt)
    v = verdict(tot, {}, AnalysisSettings())
    assert v["kind"] == "loop-bound" and v["numbers"]["checkpoint_per_rank_s"] == ckpt
    if held:
        assert v["title"] == (
            "Held back by the loop itself, not by its data: its synchronous checkpoints take "
            "16% of the steady time"
        )
        assert v["levers"][0]["text"].startswith("checkpoint asynchronously or less often")
        assert "8.0 s of it in synchronous checkpoints inside the steps" in v["text"]
        assert v["text"].endswith("8.0 s neither computing, waiting for a batch nor checkpointing")
    else:
        assert v["title"] == "Held back by the loop itself, not by its data"
        assert v["levers"][0]["text"].startswith("profile the loop between steps")


@pytest.mark.parametrize(
    ("share", "grade", "words"),
    [(0.049, "", None), (0.05, "moderate", "moderately: 5%"), (0.199, "moderate", "moderately: 20%"),
     (0.2, "high", "highly: 20%"), (0.9, "high", "highly: 90%")],
)  # fmt: skip
def test_the_grades_are_xprofs(share, grade, words):
    from iosweep.analysis.pipeline.verdict import grade as graded
    from iosweep.analysis.pipeline.verdict import verdict

    s = AnalysisSettings(au_threshold=1.0)  # AU alone decides nothing here
    assert graded(share, s) == grade
    # all of the idle time is waiting: only the grade decides whether it is input-bound
    v = verdict(_steady(wait_per_rank=50 * share, idle_per_rank=50 * share, au=1 - share,
                        wait_share=share), {}, s)  # fmt: skip
    if words is None:
        assert v["kind"] == "loop-bound" and "under the 5% at which" in v["text"]
    else:
        assert v["kind"] == "input-bound-preprocessing"
        assert v["title"] == f"Input-bound by preprocessing ({words} of the step time waiting)"


def test_a_run_mostly_in_its_first_wait_and_step_is_too_short_to_judge():
    from iosweep.analysis.pipeline.verdict import verdict

    s = AnalysisSettings()
    # the issue's Keras fit job: 2 epochs of 16 steps a rank, 94% of each epoch in its first
    # wait and step; 0.26 s left of 4.33 s, 30 steady steps (min_steady_share 25%)
    tot = _steady(epoch_time_per_rank=4.33, steady_time_per_rank=0.26, steady_steps_per_rank=30.0,
                  au=0.3, compute_per_rank=0.078, idle_per_rank=0.182, wait_per_rank=0.01,
                  wait_share=0.01 / 0.26, training_time=4.33, run_time=8.0)  # fmt: skip
    v = verdict(tot, {}, s)
    assert (v["kind"], v["title"]) == ("too-short", "Too short to judge")
    assert v["text"].startswith("the verdict would rest on 0.26 s of steady state a rank (30 steps")
    # warm-up 4.07 s: 25% needs 4.07 / 3 = 1.357 s steady, at 0.26 / 30 s a step: 157 steps
    assert "about 157 steady steps a rank" in v["text"]
    assert "about 157 steady steps" in v["levers"][0]["text"]
    # a quarter of the epoch time in steady state is enough; so are 5 steps
    assert verdict(tot | {"steady_time_per_rank": 4.33 / 4}, {}, s)["kind"] != "too-short"
    assert verdict(_steady(steady_steps_per_rank=4.0), {}, s)["kind"] == "too-short"
    assert verdict(_steady(steady_steps_per_rank=5.0), {}, s)["kind"] != "too-short"
    # with the time account, it says where the time went, never "waits 0 s"
    slices = [{"kind": k, "seconds": x} for k, x in
              (("wait_phase_start", 86.0), ("compute", 5.0), ("startup", 2.0), ("unexplained", 0.0))]  # fmt: skip
    acc = {"available": True, "window_per_rank": 93.0, "slices": slices}
    said = verdict(tot, {"account": acc}, s)["text"]
    assert said.endswith(
        "; where the time went, a rank: 86.0 s waiting for each epoch's first batch, 5.0 s "
        "computing, 2.0 s in start-up of 93.0 s"
    )


def test_wait_grades_out_of_order_are_a_settings_error():
    from iosweep.config import SettingsError

    with pytest.raises(SettingsError, match="wait_grades"):
        AnalysisSettings.from_dict({"wait_grades": [0.3, 0.1]})


def test_a_wait_with_only_a_metadata_call_in_flight_is_metadata_not_reads(tmp_path):
    # Steps every 2 s (1-2, 3-4, ... 13-14): six waits of 1 s between them (2-3 ... 12-13). A
    # read in flight 2.2-2.6 s (0.4 s of the first wait), an open 4.1-4.4 s (0.3 s of the
    # second, traced as an event as DFTracer traces it), nothing in the others. By hand: of
    # the 6 s of wait, 0.4 s reads, 0.3 s metadata, 5.3 s neither; read + metadata alone
    # would not tell a metadata call counted as a read.
    steps = [(0, 0, -1, 0.0, 14.0)] + [(0, 0, s, 1.0 + 2 * s, 2.0 + 2 * s) for s in range(7)]
    segs = [(0, "/data/a.bin", "read", 0, 4096, 2.2, 2.6)]
    events = [{"rank": 0, "cat": "POSIX", "name": "open64", "start": 4.1, "end": 4.4,
               "path": "/data/b.bin", "pid": 1000}]  # fmt: skip
    sm = run(tmp_path, make_store(tmp_path / "s", segs, steps=steps, app_events=events))
    (row,) = pd.read_parquet(tmp_path / "out" / "pipeline.parquet").to_dict("records")
    assert row["wait"] == pytest.approx(6.0)
    assert row["read_in_wait"] == pytest.approx(0.4)
    assert row["meta_in_wait"] == pytest.approx(0.3)
    assert row["other_in_wait"] == pytest.approx(5.3)
    t = sm["pipeline"]["totals"]
    assert t["read_in_wait_share"] == pytest.approx(0.4 / 6)
    assert t["meta_in_wait_share"] == pytest.approx(0.3 / 6)
    assert t["no_read_share"] == pytest.approx(5.6 / 6)  # the open is not a read


def test_a_ranks_bandwidth_is_over_the_union_of_its_io_time(tmp_path):
    # Rank 0 and a loader worker of it (pid 1001) read 100 bytes each, over 1-3 s and 2-4 s:
    # the rank's I/O took 3 s of wall time (the union), 4 s summed. By hand: 200 B / 3 s.
    segs = [(0, "/data/a.bin", "read", 0, 100, 1.0, 3.0, 1000),
            (0, "/data/b.bin", "read", 0, 100, 2.0, 4.0, 1001)]  # fmt: skip
    run(tmp_path, make_store(tmp_path / "s", segs))
    (r,) = pd.read_parquet(tmp_path / "out" / "ranks.parquet").to_dict("records")
    assert (r["io_time"], r["io_busy_time"]) == (pytest.approx(3.0), pytest.approx(4.0))
    assert r["bandwidth"] == pytest.approx(200 / 3.0)


def test_the_busiest_files_are_those_a_sort_of_every_file_gives():
    # only the rows that can be among the busiest are sorted: the same rows as pandas' sort of
    # all of them, ties by path, unknown bytes last
    from iosweep.analysis.patterns.access import busiest

    rng = np.random.default_rng(1)
    for trial in range(500):
        n = int(rng.integers(1, 40))
        f = pd.DataFrame(
            {
                "b": rng.integers(0, 5, n).astype(float),
                "path": [f"p{rng.integers(0, 1000)}" for _ in range(n)],
                "x": np.arange(n),
            }
        )
        if trial % 2:
            f.loc[rng.random(n) < 0.5, "b"] = np.nan
        whole = f.sort_values(["b", "path"], ascending=[False, True]).head(5)
        assert busiest(f, "b", 5).equals(whole), f


def _account(phase_start: float, steady: float, loop: float, phases: float = 5.0) -> dict:
    wait = phase_start + steady
    slices = [{"kind": "wait_phase_start", "seconds": phase_start},
              {"kind": "wait_steady", "seconds": steady}]  # fmt: skip
    return {"available": True, "window_per_rank": loop, "slices": slices, "wait_per_rank": wait,
            "loop_per_rank": loop, "loop_wait_share": wait / loop,
            "phase_start_share_of_wait": phase_start / wait, "phases_per_rank": phases}  # fmt: skip


def test_waits_at_each_epochs_start_are_their_own_verdict_under_a_steady_compute_bound():
    from iosweep.analysis.pipeline.verdict import verdict

    s = AnalysisSettings()
    # Stormer-like: steady AU 0.89, 16% of the loop waiting, 95% of it at each phase's start
    tot = _steady(au=0.89, wait_per_rank=3.0, wait_share=3.0 / 50, idle_per_rank=5.5)
    v = verdict(tot, {"account": _account(53.6, 3.0, 347.6)}, s)
    assert v["kind"] == "input-bound-phase-start" and v["grade"] == "moderate"
    assert v["title"] == (
        "Input-bound at each epoch's start (moderately: 16% of the loop waiting for data, "
        "95% of it for each epoch's or evaluation's first batch)"
    )
    assert "persistent_workers=True" in v["levers"][0]["text"]
    # one epoch: its first wait is the run's start-up, paid once
    assert verdict(tot, {"account": _account(53.6, 3.0, 347.6, 1.0)}, s)["kind"] != (
        "input-bound-phase-start"
    )
    # most of the wait in steady state: the steady reading stands
    assert verdict(tot, {"account": _account(10.0, 46.0, 347.6)}, s)["kind"] != (
        "input-bound-phase-start"
    )
    # a steady state that keeps up stays compute-bound, and says what each start costs
    v = verdict(tot | {"au": 0.95}, {"account": _account(53.6, 3.0, 347.6)}, s)
    assert v["kind"] == "compute-bound"
    assert v["title"] == (
        "Compute-bound in steady state, but 16% of its loop waits for each epoch's or "
        "evaluation's first batch"
    )
    assert "persistent_workers=True" in v["levers"][0]["text"]
    # under the first grade (5%): plain compute-bound
    v = verdict(tot | {"au": 0.95}, {"account": _account(10.0, 1.0, 347.6)}, s)
    assert (v["kind"], v["title"], v["levers"]) == ("compute-bound", "Compute-bound", [])


def test_the_time_account_gives_each_second_to_exactly_one_slice_by_hand():
    """A rank's 30 s, by hand: start-up 0-10; epoch 0 (10-20) whose iterator took 10-11 to
    build, first wait 11-13, steps 13-15 and 16-20 with a wait 15-16, an all-reduce 18-19
    in the second; a checkpoint 20-22 (also inside no step; a barrier 21-21.5 in it stays
    the checkpoint's); evaluation 1 (22-25): a wait 22-23, its step 23-25; nothing 25-27;
    epoch 1 (26-30): first wait 27-28, step 28-30."""
    import numpy as np

    from iosweep.analysis.pipeline.account import Loop, rank_account

    def arr(*v):
        return np.array(v, dtype=float)

    loops = [
        Loop("epoch 0", False, 10, 20, arr(11, 15), arr(13, 16), arr(13, 16), arr(15, 20)),
        Loop("evaluation 1", True, 22, 25, arr(22), arr(23), arr(23), arr(25)),
        Loop("epoch 1", False, 26, 30, arr(27), arr(28), arr(28), arr(30)),
    ]
    rows = rank_account(0, 0.0, loops, (arr(20), arr(22)), (arr(), arr()), (arr(10), arr(11)),
                        (arr(18, 21), arr(19, 21.5)))  # fmt: skip
    got = {(r["kind"], r["where"]): r["seconds"] for r in rows}
    assert got == {
        ("checkpoint", ""): 2.0,
        ("evaluation", ""): 2.0,
        ("wait_phase_start", ""): 5.0,  # the iterator's build 1 s + first waits 2 + 1 + 1
        ("wait_steady", ""): 1.0,
        ("collectives", ""): 1.0,
        ("compute", ""): 7.0,
        ("startup", ""): 10.0,
        ("unexplained", "before the first batch of epoch 1"): 2.0,
    }
    assert sum(got.values()) == 30.0 and {r["phases"] for r in rows} == {3}
