"""The ImageNet-style workload for real: Horovod jobs of 2 ranks reading one JPEG per sample,
with DataLoader workers / tf.data parallelism, traced by DFTracer or untraced, staged or not.
What is checked comes from the traces and the files on disk, against the sampler's contract:
every image is read by exactly one rank per epoch, and the partition moves between epochs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from iosweep.config import expand_sweep, validate_config
from iosweep.run.imagenet import prepare_imagenet
from iosweep.run.program import resolve_python
from iosweep.run.runner import run_point
from iosweep.run.workload_data import prepare_workload_data
from iosweep.trace.ingest import ingest
from iosweep.trace.store import open_store
from iosweep.workloads import all_workloads

pytestmark = pytest.mark.integration

CLASSES, PER_CLASS = 4, 16  # 64 images: 32 per rank, 4 steps of 8 per epoch


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imagenet")
    desc = prepare_imagenet(out, classes=CLASSES, images_per_class=PER_CLASS, log=lambda m: None)
    assert desc["status"] == "ok" and desc["files"] == CLASSES * PER_CLASS
    return out


def _config(framework: str, workers: int, tracer: str, stage: str = "none", **extra) -> dict:
    return validate_config(
        {
            "sweep": {
                "frameworks": [framework],
                "workloads": ["imagenet"],
                "tracers": [tracer],
                "procs_per_node": [2],
                "epochs": [2],
                "steps_per_epoch": [0],
                "batch_size": [8],
                "loader_workers": [workers],
                "staging": [stage],
            },
            "training": {"collect_wait": 20, "timeout": 600, "imagenet": {"image_size": 32}},
            **extra,
        }
    )


def _run(tmp_path: Path, images: Path, *args, **kw) -> tuple[dict, Path]:
    config = _config(*args, **kw)
    (point,) = expand_sweep(config)
    python, _, why = resolve_python(point.framework, None)
    if python is None:
        pytest.fail(f"no Horovod {point.framework} stack: {why}")
    run_dir = tmp_path / "run"
    man = run_point(config, point, run_dir, images, log=lambda m: None)
    assert man["status"] == "ok", (man["reason"], man["log_tail"])
    return man, run_dir


def _image_reads(run_dir: Path, man: dict) -> pd.DataFrame:
    """The traced reads of image files, each with the epoch (of its rank) it fell in."""
    store = run_dir / "store"
    ingest([run_dir], store, manifest=run_dir / "manifest.json")
    seg = open_store(store).table("segments").to_pandas()
    seg = seg[seg["path"].astype(str).str.endswith(".JPEG") & (seg["op"] == "read")]
    steps = pd.DataFrame(man["steps"])
    epochs = steps[steps["step"] < 0]
    clock = json.loads((store / "run.json").read_text())["clock_zero"]
    seg = seg.assign(epoch=-1)
    for e in epochs.itertuples():
        inside = (seg["rank"] == e.rank) & seg["start"].between(e.start - clock, e.end - clock)
        seg.loc[inside, "epoch"] = e.epoch
    return seg


def _check_partition(seg: pd.DataFrame, n_files: int) -> None:
    assert (seg["epoch"] >= 0).all(), "image reads outside every epoch"
    readers = seg.groupby(["epoch", "path"], observed=True)["rank"].nunique()
    assert (readers == 1).all(), "an image read by two ranks in one epoch"
    per_epoch = seg.groupby("epoch")["path"].nunique()
    assert per_epoch.tolist() == [n_files, n_files], "every image once per epoch"
    parts = {e: set(g.loc[g["rank"] == 0, "path"]) for e, g in seg.groupby("epoch")}
    assert parts[0] != parts[1], "the sampler did not reshuffle the partition between epochs"


def _checkpoints(man: dict, names: list[str]) -> None:
    on_disk = {Path(o["path"]).name for o in man["outputs"]}
    assert set(names) <= on_disk, on_disk


@pytest.mark.parametrize("workers", [0, 2])
def test_pytorch_imagenet_traced_by_dftracer(tmp_path, images, workers):
    man, run_dir = _run(tmp_path, images, "pytorch", workers, "dftracer")
    seg = _image_reads(run_dir, man)
    _check_partition(seg, CLASSES * PER_CLASS)
    meta = json.loads((run_dir / "store" / "run.json").read_text())
    rank_pid = {r["rank"]: r["pid"] for r in man["ranks"]}
    workers_seen = [p for p in meta["processes"] if p["role"] == "worker"]
    if workers:
        # the reads are the forked workers', and each is attributed to the rank that forked it
        assert not set(seg["pid"]) & set(rank_pid.values())
        assert {p["rank"] for p in workers_seen} == {0, 1}
        assert len(workers_seen) == 2 * workers * 2  # per rank, per epoch (workers re-forked)
    else:
        assert set(seg["pid"]) == set(rank_pid.values())
    # compute and wait timed apart, every step; the app events of DFTracer say the same
    rows = [s for s in man["steps"] if s["step"] >= 0]
    assert len(rows) == 2 * 2 * 4 and all(s["wait_end"] == s["start"] for s in rows)
    app = open_store(run_dir / "store").table("app_events").to_pandas()
    assert (app["cat"] == "compute").sum() == len(rows) and (app["cat"] == "fetch").sum() >= len(
        rows
    )
    _checkpoints(man, ["checkpoint-0.pt", "checkpoint-1.pt"])
    # DFTracer's Python API (the app events) opens dft.log in the current folder: the ranks'
    # is the run folder, never the repository
    assert (run_dir / "dft.log").exists()
    assert not (Path(__file__).resolve().parents[1] / "dft.log").exists()


def test_pytorch_imagenet_untraced(tmp_path, images):
    man, run_dir = _run(tmp_path, images, "pytorch", 2, "none")
    assert man["tracer"]["name"] == "none" and not list((run_dir / "traces").rglob("*.pfw*"))
    _checkpoints(man, ["checkpoint-0.pt", "checkpoint-1.pt"])


def test_tensorflow_imagenet_traced_by_dftracer(tmp_path, images):
    man, run_dir = _run(tmp_path, images, "tensorflow", 2, "dftracer")
    _check_partition(_image_reads(run_dir, man), CLASSES * PER_CLASS)
    _checkpoints(man, ["ckpt-0.index", "ckpt-1.index"])


def test_staged_run_reads_its_node_local_copy(tmp_path, images):
    stage_root = tmp_path / "node-local"
    stage_root.mkdir()
    man, run_dir = _run(
        tmp_path, images, "pytorch", 2, "dftracer", "node-local", staging={"dir": str(stage_root)}
    )
    st = man["staging"]
    assert Path(st["dir"]).parent == stage_root and st["files"] == CLASSES * PER_CLASS
    assert [n["host"] for n in st["nodes"]] == [man["host"]] and st["end"] >= st["start"]
    seg = _image_reads(run_dir, man)
    # the dataset reads are in the trace, and all of them are of the copy
    assert seg["path"].astype(str).str.startswith(st["dir"] + "/").all()
    _check_partition(seg, CLASSES * PER_CLASS)
    assert not Path(st["dir"]).exists(), "the staged copy was not removed after the run"


def test_bad_image_folder_fails_the_point_with_its_path(tmp_path):
    empty = tmp_path / "empty"
    (empty / "train" / "n0").mkdir(parents=True)
    desc = prepare_imagenet(tmp_path / "ds", source=str(empty), log=lambda m: None)
    assert desc["status"] == "failed" and str(empty / "train") in desc["reason"]
    config = _config("pytorch", 0, "none")
    (point,) = expand_sweep(config)
    man = run_point(config, point, tmp_path / "run", tmp_path / "ds", log=lambda m: None)
    assert man["status"] == "failed" and "no images" in man["reason"]


def test_corrupt_jpeg_fails_the_point_naming_the_file(tmp_path, images):
    bad = tmp_path / "bad"
    for f in (images / "train").rglob("*.JPEG"):
        dest = bad / "train" / f.parent.name / f.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(f.read_bytes())
    victim = sorted((bad / "train").rglob("*.JPEG"))[5]
    victim.write_bytes(b"\xff\xd8\xff not a JPEG")
    prepare_imagenet(tmp_path / "ds", source=str(bad), log=lambda m: None)
    config = _config("pytorch", 0, "none")
    (point,) = expand_sweep(config)
    man = run_point(config, point, tmp_path / "run", tmp_path / "ds", log=lambda m: None)
    assert man["status"] == "failed"
    assert str(victim) in man["reason"] and "cannot read or decode the image" in man["reason"]


def test_staging_without_room_fails_with_the_space_needed(tmp_path, images):
    from iosweep.run.stage import StagingError, check_room

    with pytest.raises(StagingError, match=r"/dev/shm has .* GB free; the dataset needs"):
        check_room(Path("/dev/shm/iosweep-test"), 1 << 60)


@pytest.mark.parametrize(("framework", "workers"), [("pytorch", 2), ("tensorflow", 0)])
def test_the_step_hooks_agree_with_a_script_that_times_itself(tmp_path, images, framework, workers):
    """iosweep's ImageNet-style script, run unmodified as a user's job under the step hooks:
    the script's own record of each step (its progress file, timed around its own next()
    call) is the account the hooks must match: a DataLoader with workers (PyTorch) and
    tf.data iterated in an eager loop (TensorFlow)."""
    module = {"pytorch": "pytorch_imagenet", "tensorflow": "tensorflow2_imagenet"}[framework]
    config = _config(framework, workers, "none", workloads={
        "own": {"framework": framework, "data": str(images),
                "command": f"{{python}} -m iosweep.run.training.{module} --data {{data}} "
                "--epochs {epochs} --steps-per-epoch 0 --batch-size {batch_size} --image-size 32 "
                "--loader-workers {loader_workers} --progress {progress}"}})  # fmt: skip
    config["sweep"]["workloads"] = ["own"]
    (point,) = expand_sweep(config)
    desc = prepare_workload_data(
        all_workloads(config)["own"], tmp_path / "ds", config["training"], log=lambda m: None
    )
    assert desc["status"] == "ok" and desc["path"] == str(images)
    man = run_point(config, point, tmp_path / "run", tmp_path / "ds", log=lambda m: None)
    assert man["status"] == "ok", (man["reason"], man["log_tail"])
    assert man["timing"]["loop"].startswith("torch at" if framework == "pytorch" else "tf.data at")
    for rank in (0, 1):
        own = json.loads((tmp_path / "run" / "progress" / f"rank-{rank}.json").read_text())
        mine = [s for s in own["steps"] if s["step"] >= 0]
        hooked = [s for s in man["steps"] if s["rank"] == rank and s["step"] >= 0]
        assert [(s["epoch"], s["step"]) for s in hooked] == [(s["epoch"], s["step"]) for s in mine]
        for h, s in zip(hooked, mine, strict=True):
            # the same next() call: the hooks' timing lies inside the script's (one clock, one
            # process), a few statements in; how few depends on the machine's load (7 ms seen)
            assert s["wait_start"] <= h["wait_start"] <= h["wait_end"] <= s["wait_end"]
            assert h["samples"] == s["samples"]
        wait_own = sum(s["wait_end"] - s["wait_start"] for s in mine)
        wait_hooked = sum(s["wait_end"] - s["wait_start"] for s in hooked)
        assert wait_hooked == pytest.approx(wait_own, rel=0.05, abs=0.02)
