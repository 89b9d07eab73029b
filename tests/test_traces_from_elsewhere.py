"""Traces other tools wrote on other machines (shared/data/traces-from-elsewhere/), against
the figures their READMEs give: what was published and what was checked there by hand from
the trace, never iosweep's own output."""

from __future__ import annotations

import json

import pytest
from conftest import shared_fixture

from iosweep.analysis import analyze_run
from iosweep.analysis.settings import AnalysisSettings
from iosweep.trace.ingest import ingest

STORMER = "traces-from-elsewhere/dftracer-stormer-polaris"
UNET3D = "traces-from-elsewhere/dftracer-dlio-unet3d-v100-hdf5"


@pytest.fixture(scope="module")
def stormer(tmp_path_factory):
    out = tmp_path_factory.mktemp("stormer")
    meta = ingest([shared_fixture(STORMER) / "traces"], out / "store")
    analyze_run(out / "store", out / "analysis", AnalysisSettings())
    return meta, json.loads((out / "analysis" / "summary.json").read_text())


@pytest.fixture(scope="module")
def unet3d(tmp_path_factory):
    out = tmp_path_factory.mktemp("unet3d")
    ingest([shared_fixture(UNET3D) / "traces"], out / "store")
    analyze_run(out / "store", out / "analysis", AnalysisSettings())
    return json.loads((out / "analysis" / "summary.json").read_text())


def test_stormer_s_app_and_posix_files_are_one_process_each_8_ranks(stormer):
    # README: 8 processes (pids 1064335-1064338, 1075739-1075742), each an app-annotation
    # file and a POSIX file; 16 ranks was each file taken for a process
    meta, sm = stormer
    ranks = {p.rank: set() for p in meta.processes}
    for p in meta.processes:
        ranks[p.rank].add(p.pid)
    assert sorted(ranks) == list(range(8))
    assert sorted(pid for pids in ranks.values() for pid in pids) == [
        *range(1064335, 1064339),
        *range(1075739, 1075743),
    ]
    assert all(len([p for p in meta.processes if p.rank == r]) == 2 for r in ranks)
    assert sm["ranks"]["count"] == 8
    # the loader workers' events share ids with their parent's (forked counters): events of
    # their own, kept, said as a warning; only the two lines a newline in a file name broke
    # (README of the trace: "/dev/shm/FI_NAMED_AV_0\n") are lost
    reused = [i for i in meta.issues if i.kind == "reused-ids"]
    assert len(reused) == 16 and {i.severity for i in reused} == {"warning"}
    assert not [i for i in meta.issues if i.kind == "corrupt" and "repeat the id" in i.message]


def test_stormer_waits_at_each_phase_start_not_held_back_by_its_loop(stormer):
    # README, by hand: loop window 347.6-347.7 s a rank; 186 waits (170 train + 16 eval)
    # totalling 54.3-59.0 s (16-17%); train compute (fwd+bwd+H2D) 240.3-242.9 s (69%);
    # 54.0 s of rank 1064335's 54.9 s of wait in the first batch after each pre-train /
    # pre-eval. It was "Held back by the loop itself (AU 36%)", 16 ranks, waits 39.8 s
    _, sm = stormer
    p = sm["pipeline"]
    acc = p["account"]
    assert 347.0 <= acc["loop_per_rank"] <= 348.5
    assert 54.0 <= acc["wait_per_rank"] <= 59.0
    assert 0.14 <= acc["loop_wait_share"] <= 0.19
    assert acc["phase_start_share_of_wait"] >= 0.90
    compute = next(s for s in acc["slices"] if s["kind"] == "compute")
    assert 240.0 <= compute["seconds"] <= 243.0
    for r in acc["per_rank"]:  # each second of a rank's window in exactly one slice
        assert sum(r["seconds"].values()) == pytest.approx(r["window"], abs=1e-6)
    assert p["verdict"]["kind"] == "input-bound-phase-start"
    assert "persistent_workers" in p["verdict"]["levers"][0]["text"]
    assert p["totals"]["epochs"] == 5  # 5 train epochs; the 4 evaluation loops start none


def test_unet3d_reads_synchronous_in_the_training_process_overlap_first(unet3d):
    # README: AU ~62%, every rank waits ~16 s of ~55 s (by hand: loop.iter 14.86-16.36 s),
    # pread 15.1-16.2 s in the same (main) process, read_threads=0: the lever is overlap, not
    # staging (which iosweep said first)
    p = unet3d["pipeline"]
    assert p["totals"]["au"] == pytest.approx(0.62, abs=0.03)
    assert 15.0 <= p["totals"]["wait_per_rank"] <= 17.0
    assert p["verdict"]["kind"] == "input-bound-storage"
    assert p["totals"]["own_read_in_wait_share"] >= 0.9
    first = p["verdict"]["levers"][0]
    assert first["text"].startswith("overlap the reads with the steps")
    assert first["param"] == "loader_workers" and first["direction"] == "more"


DLIO_OUTPUT = "traces-from-elsewhere/dlio-output-unet3d-docker-2rank"
KINETO = "traces-from-elsewhere/kineto-resnet50-cifar10-v100"


@pytest.fixture(scope="module")
def dlio_output(tmp_path_factory):
    out = tmp_path_factory.mktemp("dlio-output")
    meta = ingest([shared_fixture(DLIO_OUTPUT)], out / "store")
    analyze_run(out / "store", out / "analysis", AnalysisSettings())
    return meta, json.loads((out / "analysis" / "summary.json").read_text())


def test_a_dlio_output_folder_without_traces_is_read_as_a_run_by_dlio_s_own_times(dlio_output):
    # README: DLIO's summary.json, AU per epoch 99.29/99.10/98.97/94.60, mean 97.99%; epoch
    # durations 32.90/33.08/32.60/33.61 s, 21 steps of 4 samples a rank, 2 ranks; rank 0's
    # first step's load 2.96/3.84/1.99/3.36 s; config 2 epochs against 4 run
    meta, sm = dlio_output
    assert [r.rank for r in meta.ranks] == [0, 1] and meta.tracer == "none"
    assert not [i for i in meta.issues if i.severity == "error"], meta.issues
    assert {i.kind for i in meta.issues} == {"no-traces", "mismatch"}
    p = sm["pipeline"]
    assert p["dlio"]["au_mean"] == pytest.approx(0.9799, abs=1e-4)
    assert p["dlio"]["au_per_epoch"] == pytest.approx([0.9929, 0.9910, 0.9897, 0.9460], abs=1e-4)
    for e, duration in zip(p["epochs"], (32.90, 33.08, 32.60, 33.61), strict=True):
        assert e["samples"] == 2 * 21 * 4
        assert e["samples_per_s"] == pytest.approx(168 / duration, rel=0.005)
    # not input-bound in steady state; the only wait worth a word is each epoch's first batch
    v = p["verdict"]
    assert v["kind"] == "compute-bound" and v["title"].startswith("Compute-bound in steady state")
    rank0 = next(a["seconds"] for a in p["account"]["per_rank"] if a["rank"] == 0)
    assert rank0["wait_phase_start"] == pytest.approx(2.96 + 3.84 + 1.99 + 3.36, abs=0.02)
    # nothing was traced: what reads did in the wait is unknown, not zero
    assert p["totals"]["read_in_wait_share"] is None and p["totals"]["bytes_read_in_epochs"] is None


def test_a_folder_of_profiler_traces_says_what_it_holds(tmp_path):
    # README: two Kineto traces (worker0.*.pt.trace.json.gz), the generating script and the
    # plugin's expected output as .txt files, the README itself
    meta = ingest([shared_fixture(KINETO)], tmp_path / "store")
    (issue,) = [i for i in meta.issues if i.kind == "no-logs"]
    assert issue.severity == "error"
    assert issue.message.startswith(
        "5 files, none a log iosweep reads (Darshan *.darshan, DFTracer *.pfw[.gz], a DLIO "
        "output folder): 2 PyTorch profiler (Kineto) traces, which iosweep does not read yet"
    ), issue.message
    assert issue.message.endswith("; 2 .txt files; 1 .md file"), issue.message
