"""Your own training job, unmodified, through the workflow as a user runs it.

One sweep holds three training scripts that are not iosweep's (tests/jobs/README.md): Horovod
+ a map-style Dataset over NPZ shards (mpirun), DDP + an IterableDataset over tar shards
(torchrun), Keras fit over tf.data (Horovod, mpirun). Each runs twice, with costs that fix
the truth by construction: per batch, 8 samples x 20 ms of CPU in the loader against a 5 ms
step, with no loader workers (input-bound by preprocessing: AU about 5/165; the Keras and tar
jobs 8 x 60 ms, AU about 5/485), and 8 x 0.2 ms against a 600 ms step (compute-bound: AU about
600/602 plus reading, which a busy second core made 25 ms a batch for the NPZ job, that opens
a shard a sample: still under half the 10% the verdict allows); each job's data sized so its
training lasts twice its start-up under load (NPZ_SHARDS and beside). Beside them, a script
with a syntax error, one that exits 3 on rank 1, and one that never iterates a data loader:
each is named with its reason, and the others' points and report come out whole. Then the
README's example config, as written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO, assert_verdict_or_host_held, html_lines, snakemake, unavailable
from PIL import Image

from iosweep.run.program import resolve_python

pytestmark = pytest.mark.integration
JOBS = REPO / "tests" / "jobs"
# (workload, loader cost, step cost) -> the verdict by construction
INPUT, COMPUTE = dict(sample=20, step=5), dict(sample=0.2, step=600)
# Keras's step is slower than its 5 ms under load (TF's call, Horovod's allreduce waiting on
# a starved peer): with a core busy its 20 ms job read AU 0.25-0.52, so it pays 3x a sample
# (AU 0.068 so, with a busy loop on one core: docs/testing.md); the tar job 3x as well, for
# its training to outlast start-up (below)
KERAS_INPUT = TAR_INPUT = dict(sample=60, step=5)
# Each job's data, sized so that its training is at least twice its start-up with a busy loop
# on one core (12-03: torchrun's 26 s, Keras's 22-26 s, mpirun's 16 s before the first step;
# 6-8 s quiet); shorter, the run is rightly "Dominated by start-up" and judges nothing else.
NPZ_SHARDS = {"input": 40, "compute": 15}  # of 32 samples: 26 s and 36 s of steps a rank
TAR_SHARDS = {"input": 16, "compute": 16}  # of 40 PNGs: 38 s and 48 s
KERAS_IMAGES = {"input": 400, "compute": 640}  # 24 s and 48 s

BROKEN = {
    "syntax_error.py": "import torch\nfor x in range(3)\n    print(x)\n",
    "exit_rank1.py": (
        "import sys, time\nimport horovod.torch as hvd\nhvd.init()\ntime.sleep(1)\n"
        "sys.exit(3 if hvd.rank() == 1 else 0)\n"
    ),
    "by_hand.py": (  # batches sliced from an array it loads: no loader for the hooks to time
        "import sys\nimport numpy as np\nimport torch\n"
        "x = torch.from_numpy(np.load(sys.argv[1]))\nw = torch.zeros(10, requires_grad=True)\n"
        "for epoch in range(2):\n    for i in range(0, 256, 16):\n"
        "        (x[i:i + 16] @ w).sum().backward()\n"
    ),
}


def _workloads(tmp: Path) -> dict:
    c = {"workdir": str(JOBS), "framework": "pytorch"}
    npz = ("{python} npz_hvd.py --data-root {data} --num-workers {loader_workers} --bs 8 "
           "--n-epochs {epochs} --sample-ms %(sample)s --step-ms %(step)s")  # fmt: skip
    tars = ("{python} tar_ddp.py --shards-glob '{data}/*.tar' --loader-procs {loader_workers} "
            "--micro-batch 8 --epochs-total {epochs} --decode-ms %(sample)s --fwd-ms %(step)s")  # fmt: skip
    keras = ("PER_SAMPLE_MS=%(sample)s STEP_MS=%(step)s {python} keras_fit.py {data} "
             "{loader_workers} {epochs}")  # fmt: skip
    out = {}
    for case, cost in (("input", INPUT), ("compute", COMPUTE)):
        keras_cost, tar_cost = (KERAS_INPUT, TAR_INPUT) if case == "input" else (cost, cost)
        out[f"npz-{case}"] = {**c, "command": npz % cost,
                              "prepare": f"{{python}} make_npz.py --out {{data}} --shards {NPZ_SHARDS[case]} --per-shard 32"}  # fmt: skip
        out[f"tars-{case}"] = {**c, "command": tars % tar_cost, "launch": "torchrun",
                               "prepare": f"{{python}} make_tars.py {{data}} -n {TAR_SHARDS[case]} -k 40"}  # fmt: skip
        out[f"keras-{case}"] = {**c, "command": keras % keras_cost, "framework": "tensorflow"}
    out["keras-input"]["prepare"] = f"{{python}} make_images.py {{data}} {KERAS_IMAGES['input']}"
    out["keras-compute"]["data"] = str(tmp / "pngs")  # a dataset that exists: no prepare
    broken = {"workdir": str(tmp / "broken"), "framework": "pytorch"}
    out["syntax"] = {**broken, "command": "{python} syntax_error.py --epochs {epochs}"}
    out["exit-rank1"] = {**broken, "command": "{python} exit_rank1.py --epochs {epochs}"}
    out["no-loader"] = {**broken, "command": "{python} by_hand.py {data} --epochs {epochs}",
                        "data": str(tmp / "xs.npy"), "launch": "single"}  # fmt: skip
    return out


def _pngs(folder: Path, count: int) -> None:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(5)
    for n in range(count):
        Image.fromarray(rng.integers(0, 255, (20, 20, 3), dtype=np.uint8)).save(
            folder / f"{n % 3}_{n:05d}.png"
        )


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    for fw in ("pytorch", "tensorflow"):
        if resolve_python(fw, None)[0] is None:
            unavailable(f"no Horovod {fw} stack (run tools/setup.sh --with-tensorflow)")
    tmp = tmp_path_factory.mktemp("own-job")
    _pngs(tmp / "pngs", KERAS_IMAGES["compute"])
    (tmp / "broken").mkdir()
    np.save(tmp / "xs.npy", np.random.default_rng(1).standard_normal((256, 10), np.float32))
    for name, text in BROKEN.items():
        (tmp / "broken" / name).write_text(text)
    workloads = _workloads(tmp)
    config = {
        "results": str(tmp / "results"),
        "workloads": workloads,
        "sweep": {"workloads": [w for w in workloads if w != "no-loader"],
                  "frameworks": ["pytorch"], "procs_per_node": [2], "epochs": [2],
                  "loader_workers": [0], "tracers": ["auto"],
                  "include": [{"workloads": ["no-loader"], "procs_per_node": [1]}]},
        "training": {"collect_wait": 20, "timeout": 600},
        "report": {"title": "Jobs that are not iosweep's"},
    }  # fmt: skip
    (tmp / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake("--cores", "2", "--configfile", str(tmp / "config.yaml"), "--keep-going")
    return tmp


def _run(sweep: Path, workload: str) -> tuple[dict, dict]:
    (run,) = [p.parent for p in (sweep / "results" / "runs").rglob("manifest.json")
              if json.loads(p.read_text())["workload"]["name"] == workload]  # fmt: skip
    manifest = json.loads((run / "manifest.json").read_text())
    return manifest, json.loads((run / "analysis" / "summary.json").read_text())


def _report_text(sweep: Path) -> str:
    return "\n".join(html_lines((sweep / "results" / "report" / "report.html").read_text()))


@pytest.mark.parametrize("job", ["npz", "tars", "keras"])
def test_a_job_input_bound_by_construction_is_found_waiting_for_preprocessing(sweep, job):
    manifest, sm = _run(sweep, f"{job}-input")
    assert manifest["status"] == "ok", (manifest["reason"], manifest["log_tail"])
    assert manifest["launcher"] == ("torchrun" if job == "tars" else "mpirun")
    p = sm["pipeline"]
    assert p["timing"]["source"] == "hooks" and p["timing"]["wait"] == "measured"
    # preprocessing, or, where the job's own ranks left no core free (2 ranks spinning, and
    # Horovod's background thread, on CI's 2 cores), the host's CPU: the kernel's figures say
    assert_verdict_or_host_held(p, "input-bound-preprocessing")
    assert p["totals"]["au"] < 0.5, p["totals"]
    assert p["totals"]["epochs"] == 2 and p["totals"]["ranks"] == 2
    steps = [s for s in manifest["steps"] if s["step"] >= 0]
    assert {s["samples"] for s in steps} == {8}  # every batch of 8, as the script asks
    assert f"pytorch · {job}-input" in _report_text(sweep) or job == "keras"


@pytest.mark.parametrize("job", ["npz", "tars", "keras"])
def test_a_job_compute_bound_by_construction_is_found_compute_bound(sweep, job):
    manifest, sm = _run(sweep, f"{job}-compute")
    assert manifest["status"] == "ok", (manifest["reason"], manifest["log_tail"])
    p = sm["pipeline"]
    assert p["verdict"]["kind"] == "compute-bound", (p["verdict"], p["totals"])
    assert p["totals"]["au"] >= 0.9


def test_the_report_leads_with_each_jobs_verdict_and_says_how_it_was_timed(sweep):
    text = _report_text(sweep)
    for job, fw in (("npz", "pytorch"), ("tars", "pytorch"), ("keras", "tensorflow")):
        # (on a host with no core to spare: "Input-bound by preprocessing (...), on a host ...")
        v = _run(sweep, f"{job}-input")[1]["pipeline"]["verdict"]
        assert "input-bound-preprocessing" in (v["kind"], v["trace_kind"]), v
        title = "Input-bound by preprocessing"
        assert f"{fw} · {job}-input: {title}" in text
        assert f"{fw} · {job}-compute: Compute-bound" in text
    assert (
        "Steps timed by iosweep's hooks, without changing the script: keras-fit at keras_fit.py:"
        in text
    )
    assert (
        "Keras fit: each batch fetched eagerly by iosweep and handed to the compiled train step"
        in text
    )
    assert "time blocked in next() on the torch iterator" in text
    # provenance: the template and the command that ran, and what the hooks cost
    assert "command: {python} tar_ddp.py --shards-glob '{data}/*.tar'" in text
    assert "launch: torchrun" in text and "iosweep's hooks," in text


def test_broken_jobs_are_named_with_their_reason_and_lose_no_other_point(sweep):
    manifest, _ = _run(sweep, "syntax")
    assert manifest["status"] == "failed"
    assert "rank 0: SyntaxError: " in manifest["reason"], manifest["reason"]
    manifest, _ = _run(sweep, "exit-rank1")
    assert manifest["status"] == "failed"
    assert "rank 1: exited with code 3" in manifest["reason"], manifest["reason"]
    assert manifest["exit_codes"] == {"1": 3}
    manifest, sm = _run(sweep, "no-loader")
    assert manifest["status"] == "ok" and manifest["launcher"] == "none"
    assert sm["pipeline"]["available"] is False
    assert sm["pipeline"]["reason"].startswith(
        "the job never took a batch from the loaders the step hooks time"
    )
    text = _report_text(sweep)
    assert "Whether training waits for its data: not known" in text
    assert "SyntaxError" in text and "exited with code 3" in text
    # the sweep table holds every point, the broken ones too
    sweep_csv = (sweep / "results" / "sweep" / "sweep.csv").read_text()
    assert sweep_csv.count("\n") - 1 == 9


def test_a_bad_placeholder_stops_the_workflow_before_it_runs_and_keeps_the_results(sweep):
    config = yaml.safe_load((sweep / "config.yaml").read_text())
    config["workloads"]["npz-input"]["command"] += " --seed {sed}"
    bad = sweep / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    kept = {p: p.stat().st_mtime_ns for p in (sweep / "results").rglob("*") if p.is_file()}
    proc = snakemake("--cores", "2", "--configfile", str(bad), check=False)
    assert proc.returncode != 0
    assert (
        "config key 'workloads.npz-input.command': unknown placeholder {sed}; known:"
        in proc.stdout + proc.stderr
    )
    assert {p: p.stat().st_mtime_ns for p in kept} == kept


def test_the_readme_example_runs_as_written(tmp_path):
    if resolve_python("pytorch", None)[0] is None:
        unavailable("no Horovod PyTorch stack (run tools/setup.sh)")
    readme = (REPO / "README.md").read_text()
    example = (REPO / "examples" / "own-job" / "config.yaml").read_text()
    assert example.strip() in readme, "the README shows examples/own-job/config.yaml as it is"
    results = tmp_path / "results"
    snakemake("--cores", "2", "--configfile", "examples/own-job/config.yaml",
              "--config", f"results={results}")  # fmt: skip
    runs = sorted((results / "runs").rglob("summary.json"))
    assert len(runs) == 4
    for s in runs:
        sm = json.loads(s.read_text())
        assert sm["status"] == "ok" and sm["pipeline"]["available"], sm["pipeline"]["reason"]
        assert sm["params"]["lr"] in (0.05, 0.2)
    assert (results / "report" / "report.html").exists()
    assert not (REPO / "results-own-job").exists()
    assert os.environ.get("IOSWEEP_HOOKS_OUT") is None
