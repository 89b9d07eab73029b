"""Real Horovod jobs under Open MPI, traced by DFTracer (the pip package's LD_PRELOAD library)."""

import json
from pathlib import Path

import pytest
from conftest import unavailable

from iosweep.config import expand_sweep, validate_config
from iosweep.run.dataset import IDX_FILES, prepare_dataset
from iosweep.run.program import resolve_python
from iosweep.run.runner import run_point
from iosweep.run.tracers import find_dftracer_lib

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("mnist")
    prepare_dataset(out, train_size=2048, test_size=256, npz_copies=2, log=lambda m: None)
    return out


def _config(**training):
    return validate_config(
        {
            "sweep": {
                "procs_per_node": [2],
                "epochs": [1],
                "steps_per_epoch": [3],
                "tracers": ["dftracer"],
            },
            "dataset": {"train_size": 2048, "test_size": 256},
            "training": {"collect_wait": 20, "timeout": 600, **training},
        }
    )


def _require_horovod_torch():
    python, _, why = resolve_python("pytorch", None)
    if python is None:
        unavailable(f"no Horovod PyTorch stack (run tools/setup.sh): {why}")


def test_two_rank_job_traced_by_dftracer(tmp_path, small_dataset):
    _require_horovod_torch()
    if find_dftracer_lib() is None:
        unavailable("dftracer pip package not installed (run tools/setup.sh)")
    from iosweep.trace.dftracer.read import read_dftracer_trace

    config = _config()
    point = expand_sweep(config)[0]
    run_dir = tmp_path / point.run_id
    manifest = run_point(config, point, run_dir, small_dataset, log=lambda m: None)

    assert manifest["status"] == "ok", (manifest["reason"], manifest["log_tail"])
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "ok"
    ranks = {r["rank"]: r for r in manifest["ranks"]}
    assert sorted(ranks) == [0, 1] and ranks[0]["pid"] != ranks[1]["pid"]
    assert all(r["size"] == 2 for r in ranks.values())
    assert manifest["versions"]["horovod"] == "0.28.1"
    assert manifest["tracer"]["name"] == "dftracer"
    # per-step timestamps for every rank: 3 steps + the epoch row
    for r in (0, 1):
        rows = [s for s in manifest["steps"] if s["rank"] == r]
        assert len(rows) == 4 and all(s["end"] >= s["start"] for s in rows)
    assert manifest["start_time"] <= min(s["start"] for s in manifest["steps"])
    # each step's wait for its gradients' all-reduce (DistributedOptimizer.synchronize), timed
    # apart inside the step
    for r in (0, 1):
        steps = sorted((s for s in manifest["steps"] if s["rank"] == r and s["step"] >= 0),
                       key=lambda s: s["start"])  # fmt: skip
        waits = [manifest["phases"][str(r)][f"collective-{k}"] for k in range(3)]
        assert all(s["start"] <= a <= b <= s["end"] for (a, b), s in zip(waits, steps, strict=True))
    assert (run_dir / "checkpoints" / "checkpoint-0.pt").exists()  # rank 0 checkpointed

    for r in (0, 1):
        traces = sorted((run_dir / "traces" / f"rank-{r}").glob("*.pfw*"))
        assert traces, f"rank {r} left no trace"
        logs = [read_dftracer_trace(t) for t in traces]
        assert ranks[r]["pid"] in {log.pid for log in logs}, "trace pid is not the rank's pid"
        paths = {str(p) for log in logs for p in log.segments.column("path").to_pylist()}
        for name in (IDX_FILES["train_images"], IDX_FILES["train_labels"]):
            assert str(small_dataset / name) in paths, f"rank {r} trace lacks {name}: {paths}"


def test_failing_job_is_reported_and_does_not_raise(tmp_path):
    _require_horovod_torch()
    config = _config()
    point = expand_sweep(config)[0]
    # no dataset there: every rank fails while reading it
    manifest = run_point(
        config, point, tmp_path / "run", tmp_path / "no-such-dataset", log=lambda m: None
    )
    assert manifest["status"] == "failed"
    assert manifest["exit_code"] != 0
    assert "exited with code" in manifest["reason"]
    assert "train-images-idx3-ubyte" in manifest["log_tail"]
    assert manifest["failed_ranks"] == [0, 1]


def test_run_over_its_timeout_is_killed_and_reported(tmp_path, small_dataset):
    _require_horovod_torch()
    # the SLURM rule's runtime is training.timeout + 5 min, so this fires before SLURM's limit
    config = _config(timeout=10)
    # an epoch of the small dataset is a few dozen steps: ask for far more epochs than fit
    config["sweep"]["epochs"] = [100000]
    point = expand_sweep(config)[0]
    manifest = run_point(config, point, tmp_path / "run", small_dataset, log=lambda m: None)
    assert manifest["status"] == "failed"
    assert "timed out after 10 s (training.timeout)" in manifest["reason"]
    assert manifest["end_time"] - manifest["start_time"] < 60


def test_missing_framework_stack_is_skipped_with_reason(tmp_path, small_dataset):
    config = validate_config(
        {
            "sweep": {"frameworks": ["tensorflow"], "procs_per_node": [1]},
            "training": {"python": {"tensorflow": str(tmp_path / "no-python")}},
        }
    )
    point = expand_sweep(config)[0]
    manifest = run_point(config, point, tmp_path / "run", small_dataset, log=lambda m: None)
    assert manifest["status"] == "skipped"
    assert "no Horovod tensorflow stack" in manifest["reason"] and "no-python" in manifest["reason"]


def test_untraced_baseline_runs_without_preload(tmp_path, small_dataset):
    _require_horovod_torch()
    config = _config()
    config["sweep"]["tracers"] = ["none"]
    config["sweep"]["procs_per_node"] = [1]
    point = expand_sweep(config)[0]
    manifest = run_point(config, point, tmp_path / "run", small_dataset, log=lambda m: None)
    assert manifest["status"] == "ok", manifest["log_tail"]
    assert manifest["tracer"]["name"] == "none"
    assert not (tmp_path / "run" / "traces").exists() or not any(
        (tmp_path / "run" / "traces").rglob("*.pfw*")
    )
    assert isinstance(manifest["metrics"]["accuracy"], float)


def test_tensorflow_two_ranks_file_per_process(tmp_path, small_dataset):
    python, _, why = resolve_python("tensorflow", None)
    if python is None:
        unavailable(why)
    if find_dftracer_lib() is None:
        unavailable("dftracer pip package not installed (run tools/setup.sh)")
    from iosweep.trace.dftracer.read import read_dftracer_trace

    config = _config()
    config["sweep"]["frameworks"] = ["tensorflow"]
    point = expand_sweep(config)[0]
    run_dir = tmp_path / "run"
    manifest = run_point(config, point, run_dir, small_dataset, log=lambda m: None)
    if manifest["status"] == "skipped":
        unavailable(manifest["reason"])
    assert manifest["status"] == "ok", (manifest["reason"], manifest["log_tail"])
    for r in (0, 1):
        logs = [read_dftracer_trace(t) for t in (run_dir / "traces" / f"rank-{r}").glob("*.pfw*")]
        paths = {p for log in logs for p in log.segments.column("path").to_pylist()}
        npz = {Path(p).name for p in paths if p.endswith(".npz")}
        assert npz == {f"mnist-{r}.npz"}, f"rank {r} read {npz}"
