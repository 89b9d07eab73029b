"""A measured run replayed with DLIO (``iosweep replay``, docs/replay.md).

1. The workload written from a real run iosweep did not make (the H100 ImageNet-style run,
   Darshan-traced, in ``shared/data``): every figure against the fixture's README and its
   manifest, read here without iosweep (files, folders, batch, workers, the mean step time
   without the warm-up, the checkpoint); its files are not on this machine, so DLIO is told
   to make its own, and the header says what that costs.
2. DLIO as a workload of the sweep (examples/dlio/config.yaml): a verdict, DLIO's own AU.
3. What cannot be replayed says why: a dataset that is not one image per file, a workload
   path DLIO could not find.

A real run replayed at its own scale, its AU against the replay's, is test_replay_at_scale.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO, shared_fixture

from iosweep.analysis import analyze_run
from iosweep.replay.measure import ReplayError
from iosweep.replay.workload import write_replay
from iosweep.trace.ingest import ingest

H100 = "imagenet-style-resnet50-h100/darshan8"


def _analysed(src: Path, base: Path) -> tuple[Path, dict]:
    ingest([src], base / "store")
    return base / "store", analyze_run(base / "store", base / "analysis")


@pytest.fixture(scope="module")
def h100(tmp_path_factory) -> tuple[Path, dict, Path]:
    src = shared_fixture(H100)
    base = tmp_path_factory.mktemp("h100")
    store, summary = _analysed(src, base)
    r = write_replay(store, summary, base / "cfg" / "workload" / "d8.yaml")
    return src, yaml.safe_load(r.workload.read_text()), r.workload


def test_h100_run_s_workload_has_the_readme_s_figures(h100):
    src, w, _ = h100
    man = json.loads((src / "manifest.json").read_text())
    steps = sorted((s for s in man["steps"] if s["step"] >= 0), key=lambda s: s["step"])
    compute = [s["end"] - s["start"] for s in steps[1:]]  # the first holds cuDNN's warm-up
    ds, rd, tr, ck = w["dataset"], w["reader"], w["train"], w["checkpoint"]
    assert (ds["num_files_train"], ds["num_subfolders_train"]) == (19_968, 100)
    assert ds["format"] == "jpeg" and ds["num_samples_per_file"] == 1
    assert 60_000 < ds["record_length"] < 110_000  # "60-110 KB each"
    assert (rd["batch_size"], rd["read_threads"], rd["data_loader"]) == (256, 8, "pytorch")
    assert tr["epochs"] == 1
    assert tr["computation_time"] == pytest.approx(np.mean(compute), rel=1e-4)
    assert tr["computation_time_stdev"] == pytest.approx(np.std(compute), rel=1e-3)
    # "Only rank 0's main process writes: the checkpoint, about 190 MB"
    assert ck["type"] == "rank_zero" and 180e6 < ck["model_size"] < 200e6
    assert w["workflow"]["checkpoint"] is True
    assert w["workflow"]["generate_data"] is True  # its JPEGs are not on this machine


def test_every_key_says_where_it_was_measured_and_the_header_what_dlio_cannot_do(h100):
    _, _, path = h100
    text = path.read_text()
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    keys = [ln for ln in body if re.match(r"^\s*\w+: \S", ln)]
    silent = [ln for ln in keys if "  # " not in ln and not ln.strip().startswith("train: true")]
    assert keys and not silent, silent
    header = text.split("\nmodel:")[0]
    for limit in ("a sleep per step", "does not compete for cores", "not on this machine"):
        assert limit in header
    assert "verdict input-bound-preprocessing" in header


def test_a_dataset_that_is_not_an_image_per_file_cannot_be_replayed(tmp_path):
    store, summary = _analysed(shared_fixture("horovod-pytorch-mnist/darshan-np2"), tmp_path)
    with pytest.raises(ReplayError, match="one image per file"):
        write_replay(store, summary, tmp_path / "cfg" / "workload" / "m.yaml")


def test_a_workload_dlio_could_not_find_is_refused(h100, tmp_path):
    with pytest.raises(ReplayError, match=r"DIR/workload/NAME\.yaml"):
        write_replay(Path(), {}, tmp_path / "m.yaml")


# --- DLIO as a workload of the sweep ----------------------------------------------------------
@pytest.mark.integration
def test_dlio_runs_as_a_sweep_point_with_iosweep_s_verdict_and_its_own_au(tmp_path):
    """examples/dlio/config.yaml's point of 2 ranks without read threads, run by the sweep's
    runner: DLIO traces itself, iosweep takes the steps from its annotations, reads every
    read it traced and sets DLIO's own AU (its summary.json) beside its own."""
    from iosweep.config import expand_sweep, validate_config
    from iosweep.run.runner import run_point
    from iosweep.run.workload_data import prepare_workload_data
    from iosweep.workloads import all_workloads

    cfg = yaml.safe_load((REPO / "examples" / "dlio" / "config.yaml").read_text())
    # 5 epochs x 32 steps of 150 ms: 24 s of compute a rank against DLIO's start-up, 10 s on an
    # idle host (steps of the example's 50 ms trained 11 s, and a busy second core made the
    # start-up the longer of the two): the training outlasts start-up twice over under load
    dlio = cfg["workloads"]["dlio"]
    assert "computation_time=0.05" in dlio["command"]
    dlio["command"] = dlio["command"].replace("computation_time=0.05", "computation_time=0.15")
    cfg["sweep"] |= {"procs_per_node": [2], "loader_workers": [0], "epochs": [5]}
    cfg = validate_config(cfg)
    (point,) = expand_sweep(cfg)
    desc = prepare_workload_data(
        all_workloads(cfg)["dlio"], tmp_path / "ds", cfg["training"], log=lambda m: None
    )
    assert desc["status"] == "ok", desc.get("reason")
    run = tmp_path / "run"
    man = run_point(cfg, point, run, tmp_path / "ds", log=lambda m: None)
    assert man["status"] == "ok", (man.get("reason"), man.get("log_tail"))
    ingest([run], run / "store", manifest=run / "manifest.json")
    sm = analyze_run(run / "store", run / "analysis")
    p = sm["pipeline"]
    assert p["available"] and p["timing"]["source"] == "events"
    assert p["verdict"]["kind"] != "startup", p["verdict"]  # the training outlasts DLIO's imports
    theirs = json.loads((run / "dlio" / "summary.json").read_text())["metric"]
    assert p["dlio"]["au_mean"] == pytest.approx(theirs["train_au_mean_percentage"] / 100)
    # 2 ranks x 5 epochs x 512 files / 2 ranks / batch 8
    assert p["timing"]["batches"] == 2 * 5 * 32
    assert sm["classes"]["dataset"]["files"] == 512


def test_a_run_without_dataset_reads_cannot_be_replayed_and_says_why(tmp_path):
    # an MPI benchmark's log: files of no dataset class, no training loop
    store, summary = _analysed(shared_fixture("darshan-logs/mpi_io_test_with_dxt"), tmp_path)
    with pytest.raises(ReplayError, match="no reads of dataset files: nothing to replay"):
        write_replay(store, summary, tmp_path / "cfg" / "workload" / "m.yaml")


def test_a_calibration_that_asks_a_negative_sleep_says_the_replay_waits_longer():
    from iosweep.replay.dlio import calibration_shortfall
    from iosweep.replay.measure import Measured, ReplayMeasures

    # the figures of a replay under load (2026-12-03): the run's load of a sample 6.47 ms,
    # DLIO's decode 1.55 ms, the calibration pass 6.36 ms slower than the run
    m = ReplayMeasures("r", {"sample_time": Measured(6.47e-3, "gaps")}, [])
    decode = Measured(1.55e-3, "timed")
    said = calibration_shortfall(m, decode, Measured(-6.36e-3, "calibrated"))
    assert said is not None and "longer than the run's (6.47 ms) by 1.44 ms" in said
    assert "no sleep can shorten" in said
    # a sleep of 0.92 ms, or of exactly nothing, is one DLIO can take: nothing to say
    assert calibration_shortfall(m, decode, Measured(-4.0e-3, "calibrated")) is None
    assert calibration_shortfall(m, decode, Measured(-4.92e-3, "calibrated")) is None
