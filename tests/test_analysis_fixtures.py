"""Acceptance: the analysis states, as data, the facts the shared fixtures are known to hold
(../shared/data/README.md). Each run is ingested (iosweep.trace.ingest) and analysed once."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from conftest import unavailable

from iosweep.analysis import analyze_run, analyze_sweep
from iosweep.analysis.patterns.temporal import human_bytes
from iosweep.trace import ingest as ingest_mod

IDX = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
]


@pytest.fixture(scope="module")
def analysed(shared_data, tmp_path_factory):
    """``analysed(rel)``: (summary, analysis dir) of ``shared/data/<rel>``, computed once."""
    base = tmp_path_factory.mktemp("analysis")
    done: dict[str, tuple[dict, Path]] = {}

    def get(rel: str) -> tuple[dict, Path]:
        if rel not in done:
            src = shared_data / rel
            if not src.is_dir():
                unavailable(f"shared fixture {rel} not found at {src}")
            name = rel.replace(os.sep, "_")
            ingest_mod.ingest([src], base / name / "store")
            out = base / name / "analysis"
            done[rel] = (analyze_run(base / name / "store", out), out)
        return done[rel]

    return get


@pytest.mark.parametrize("np_", [2, 4])
def test_pytorch_idx_files_shared_and_read_whole_by_every_rank(analysed, np_):
    sm, out = analysed(f"horovod-pytorch-mnist/darshan-np{np_}")
    assert sm["analysis_status"] == "complete" and sm["ranks"]["count"] == np_
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert acc["strategy"] == "shared-whole"
    assert acc["evidence"]["files"] == 4 and acc["evidence"]["files_whole_by_every_rank"] == 4
    files = pd.read_parquet(out / "files.parquet")
    ds = files[files["class"] == "dataset"]
    assert sorted(p.rsplit("/", 1)[-1] for p in ds["path"]) == sorted(IDX)
    assert (ds["n_readers"] == np_).all() and (ds["whole_readers"] == np_).all()
    assert (ds["read_strategy"] == "shared-whole").all()
    # Per rank: each IDX file is one read of its full size at offset 0, then 0 B at EOF.
    sizes = dict(zip(ds["path"].str.rsplit("/", n=1).str[-1], ds["size"], strict=True))
    for r in range(np_):
        sig = sm["temporal"]["signatures"][str(r)]["signature"]
        for name in IDX:
            assert f"{name}: read {human_bytes(sizes[name])} @0, read 0 B @EOF" in sig
    fr = pd.read_parquet(out / "file_ranks.parquet")
    d = fr[fr["class"] == "dataset"]
    assert (
        (d["reads"] == 2).all() and d["read_whole"].all() and (d["eof_at"] == d["file_size"]).all()
    )
    assert sm["temporal"]["same_sequence"]["dataset"] is True
    assert sm["nodes"][0]["read_once_per"] == "rank"


@pytest.mark.parametrize(
    ("rel", "epochs"),
    [("darshan-np1", 2), ("darshan-np2", 2), ("darshan-np4", 2), ("darshan-2nodes-np4", 1)],
)
def test_pytorch_only_rank0_writes_a_checkpoint_per_epoch(analysed, rel, epochs):
    sm, out = analysed(f"horovod-pytorch-mnist/{rel}")
    ck = sm["checkpoints"]
    assert ck["writers"] == [0] and ck["files_written"] == epochs and ck["n_checkpoints"] == epochs
    per_file = pd.read_parquet(out / "files.parquet").query("`class` == 'checkpoint'")[
        "bytes_written"
    ]
    assert len(per_file) == epochs and per_file.between(50_000, 70_000).all()
    assert sm["access"]["checkpoint"]["write"] == "single-rank"


def test_pytorch_dftracer_did_not_see_checkpoints(analysed):
    sm, _ = analysed("horovod-pytorch-mnist/dftracer-np2")
    assert sm["classes"]["dataset"]["access"]["read"]["strategy"] == "shared-whole"
    assert sm["checkpoints"]["writers"] == []


def test_pytorch_bytes_per_rank_do_not_shrink_as_ranks_grow(analysed, tmp_path):
    sums = [analysed(f"horovod-pytorch-mnist/darshan-np{n}")[0] for n in (1, 2, 4)]
    res = analyze_sweep(sums, tmp_path / "sweep")
    (series,) = res["scaling"]["series"]
    assert [p["ranks"] for p in series["points"]] == [1, 2, 4]
    # the README's fact, as ratios: every rank reads the whole dataset whatever the ranks
    m = series["metrics"]["dataset_bytes_read_per_rank"]
    assert m["ratio"] == pytest.approx([1.0, 1.0, 1.0], rel=0.01)
    assert series["metrics"]["bytes_read_per_rank_max"]["ratio"] == pytest.approx(
        [1.0] * 3, rel=0.01
    )
    tot = series["metrics"]["dataset_bytes_read"]
    assert tot["ratio"] == pytest.approx([1.0, 2.0, 4.0], rel=0.01)
    # one run per point: no trend word is fitted to them
    assert m["trend"] == "noisy" and tot["exponent"] is None
    ins = res["insights_across"]["series"][0]["insights"]
    assert ins["redundant_reads"]["appears_at"]["ranks"] == 2


def test_pytorch_two_nodes_per_node_figures(analysed):
    sm, _ = analysed("horovod-pytorch-mnist/darshan-2nodes-np4")
    nodes = {n["host"]: n for n in sm["nodes"]}
    assert set(nodes) == {"simnode1", "simnode2"}
    assert all(n["ranks"] == 2 and n["read_once_per"] == "rank" for n in nodes.values())
    assert sm["classes"]["dataset"]["access"]["read"]["strategy"] == "shared-whole"


@pytest.mark.parametrize("rel", ["darshan-np2", "darshan-np4", "dftracer-np2"])
def test_tf2_file_per_process(analysed, rel):
    sm, out = analysed(f"horovod-tf2-mnist/{rel}")
    acc = sm["classes"]["dataset"]["access"]["read"]
    assert acc["strategy"] == "file-per-process"
    fr = pd.read_parquet(out / "file_ranks.parquet")
    d = fr[(fr["class"] == "dataset") & (fr["reads"] > 0)]
    assert sorted(d["rank"]) == list(range(sm["ranks"]["count"]))
    assert all(p.endswith(f"/mnist-{r}.npz") for r, p in zip(d["rank"], d["path"], strict=True))
    # The zip directory first (4 KiB at 0), then the members in chunks of ~256 KiB.
    sig = sm["temporal"]["signatures"]["0"]["signature"]
    assert "mnist-0.npz: read 4.1 kB @0" in sig
    assert sm["sizes"]["by_class"]["dataset"]["read"]["max"] <= 256 * 1024


@pytest.mark.parametrize("rel", ["darshan-np2", "darshan-np4"])
def test_tf2_only_rank0_writes_checkpoints(analysed, rel):
    sm, _ = analysed(f"horovod-tf2-mnist/{rel}")
    assert sm["checkpoints"]["writers"] == [0] and sm["checkpoints"]["bytes_written"] > 0


def test_dlio_access_strategy_and_request_sizes(analysed):
    sm, out = analysed("darshan-logs/dlio_logs")
    acc = sm["classes"]["dataset"]["access"]["read"]
    # Each training file is read by one process; processes read 7-14 files each.
    assert acc["strategy"] == "partitioned"
    assert (
        acc["evidence"]["ranks_per_file"]["max"] == 1
        and acc["evidence"]["files_per_rank"]["max"] > 4
    )
    sz = sm["sizes"]["by_class"]["dataset"]["read"]
    assert sz["ops"] > 10_000 and sz["ops_from_counters"] == sz["ops"]
    assert sz["median_bin"] == "1M_4M" and 0 < sz["small_share"] < 1
    table = pd.read_parquet(out / "sizes.parquet")
    assert (table.query("binning == 'darshan' and `class` == 'dataset'")["count"].sum()) == sz[
        "ops"
    ]


def test_darshan_fd_reuse_artefact_is_set_apart(analysed):
    # README (darshan-live-np2): after the last checkpoint, Darshan charged a 10 kB write at
    # offset 0 and 163 kB of reads to checkpoint-1.pt; only the two 90,835-byte writes are
    # the checkpoints
    sm, _ = analysed("horovod-pytorch-mnist/darshan-live-np2")
    (a,) = sm["artefacts"]
    assert a["path"].endswith("checkpoints/checkpoint-1.pt") and a["rank"] == 0
    assert a["bytes_read"] == pytest.approx(163_000, rel=0.01) and a["bytes_written"] == 10_286
    assert a["start"] == pytest.approx(15.25, abs=0.01)
    ck = sm["checkpoints"]
    assert ck["bytes_written"] == 2 * 90_835 and ck["bytes_read"] == 0 and ck["n_checkpoints"] == 2
    assert [round(e["start"], 1) for e in ck["events"]] == [10.9, 13.7]


def test_sysfs_through_a_directory_descriptor_is_not_data(analysed):
    # README: Darshan records /sys paths opened relative to a directory descriptor as
    # <cwd>/class/block/...: they are left out with the other system files
    _sm, out = analysed("horovod-pytorch-mnist/darshan-live-np2")
    files = pd.read_parquet(out / "files.parquet")
    assert not files["path"].str.contains("/class/block").any()
    assert all(not p.endswith("/class") for p in files["path"])


@pytest.mark.parametrize(
    "rel", ["horovod-pytorch-mnist/darshan-np2", "horovod-tf2-mnist/darshan-np4"]
)
def test_median_read_size_is_never_an_eof_probe(analysed, rel):
    sm, _ = analysed(rel)
    r = sm["sizes"]["by_class"]["all"]["read"]
    assert r["median"] > 0 and r["min"] > 0 and sm["headline"]["read_size_median"] > 0
    if rel.startswith("horovod-pytorch"):
        # per rank 4 whole reads: 10,008 / 60,008 / 7,840,016 / 47,040,016 B: the lower middle
        assert r["median"] == 60_008 and r["zero_length"] == 8
