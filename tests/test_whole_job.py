"""See the whole job before answering: training scripts in styles that give a partial view
(tests/jobs/README.md), each timing its own main thread as the truth the verdict must match.

A thread prefetcher around a DataLoader: the loader is iterated in a producer thread, and the
training loop in the main thread takes batches off a queue.Queue. Three costs fix the truth by
construction (8 samples a batch): 20 ms a sample against a 5 ms step (input-bound: the main
thread waits ~155 ms a batch); 13 ms a sample against a 150 ms step (the producer is busy
~70% of the time, yet the main thread hardly waits: compute-bound; the hooks used to time the
producer's next() and call it input-bound); 0.2 ms against 150 ms (compute-bound, a producer
mostly idle).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

from iosweep.analysis.findings.run import analyze_run
from iosweep.config import expand_sweep, validate_config
from iosweep.run.program import resolve_python
from iosweep.run.runner import run_point
from iosweep.run.workload_data import prepare_workload_data
from iosweep.trace.ingest import ingest
from iosweep.workloads import all_workloads

pytestmark = pytest.mark.integration
JOBS = REPO / "tests" / "jobs"
SAMPLES = 256  # 128 a rank: 16 batches of 8 an epoch, 3 epochs (training well past start-up)
AU_TOLERANCE = 0.05  # the hooks' AU against the script's own, absolute

PREFETCH = {  # case -> (ms a sample, ms a step, the verdict by construction)
    "input": (20.0, 5.0, "input-bound-preprocessing"),
    "busy-producer": (13.0, 150.0, "compute-bound"),
    "compute": (0.2, 150.0, "compute-bound"),
}


@pytest.fixture(scope="module")
def npy(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("npy")
    rng = np.random.default_rng(3)
    for n in range(SAMPLES):
        np.save(out / f"s{n:04d}.npy", rng.standard_normal((16, 16), np.float32))
    return out


def _own_job(tmp: Path, data: Path, command: str, tracer: str = "auto") -> tuple[dict, dict]:
    """Run a user's command as a workload of 2 ranks, ingest and analyse it: (manifest,
    summary)."""
    config = validate_config({
        "workloads": {"own": {"command": command, "workdir": str(JOBS), "framework": "pytorch",
                              "data": str(data)}},
        "sweep": {"workloads": ["own"], "frameworks": ["pytorch"], "procs_per_node": [2],
                  "epochs": [3], "loader_workers": [0], "tracers": [tracer]},
        "training": {"collect_wait": 20, "timeout": 600},
    })  # fmt: skip
    (point,) = expand_sweep(config)
    if resolve_python("pytorch", None, horovod=False)[0] is None:
        pytest.fail("no PyTorch stack (tools/setup.sh)")
    desc = prepare_workload_data(all_workloads(config)["own"], tmp / "ds", config["training"],
                                 log=lambda m: None)  # fmt: skip
    assert desc["status"] == "ok" and desc["path"] == str(data), desc
    run_dir = tmp / "run"
    man = run_point(config, point, run_dir, tmp / "ds", log=lambda m: None)
    assert man["status"] == "ok", (man["reason"], man["log_tail"])
    ingest([run_dir], run_dir / "store", manifest=run_dir / "manifest.json")
    return man, analyze_run(run_dir / "store", run_dir / "analysis")


@pytest.mark.parametrize("case", list(PREFETCH))
def test_a_thread_prefetcher_is_judged_by_what_the_training_thread_waited_for(tmp_path, npy, case):
    sample_ms, step_ms, kind = PREFETCH[case]
    truth = tmp_path / "truth"
    truth.mkdir()
    man, sm = _own_job(tmp_path, npy, (
        "{python} thread_prefetch.py --data {data} --rank {rank} --world-size {world_size} "
        f"--epochs {{epochs}} --sample-ms {sample_ms} --step-ms {step_ms} "
        f"--truth {truth}/rank-{{rank}}.json"))  # fmt: skip
    own = [json.loads((truth / f"rank-{r}.json").read_text()) for r in (0, 1)]
    p = sm["pipeline"]
    assert p["available"], p["reason"]
    assert p["verdict"]["kind"] == kind, (p["verdict"], p["totals"], [o["au"] for o in own])
    truth_au = float(np.mean([o["au"] for o in own]))
    assert p["totals"]["au"] == pytest.approx(truth_au, abs=AU_TOLERANCE), (p["totals"], own)
    # the main thread's hand-off is what was timed, named as such, the producer beside it
    assert p["timing"]["loop"].startswith("hand-off at thread_prefetch.py:"), p["timing"]
    assert "fed by torch at thread_prefetch.py:" in p["timing"]["loop"]
    assert "thread 'prefetcher'" in p["timing"]["loop"]
    assert p["timing"]["training_thread"].startswith("MainThread: it ran the training calls")
    assert p["totals"]["ranks"] == 2 and p["totals"]["epochs"] == 3
    assert p["totals"]["samples"] == sum(o["samples"] for o in own) == 3 * SAMPLES
    for r, o in enumerate(own):  # step for step, the main thread's own count
        steps = [s for s in man["steps"] if s["rank"] == r and s["step"] >= 0]
        assert len(steps) == sum(e["steps"] for e in o["epochs"])
        wait = sum(s["wait_end"] - s["wait_start"] for s in steps)
        assert wait == pytest.approx(sum(e["wait"] for e in o["epochs"]), rel=0.1, abs=0.05)
