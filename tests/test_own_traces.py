"""Traces iosweep did not run: the verdict from the application's own annotations.

1. A small PyTorch job annotated exactly as DFTracer's overlap-analysis guide teaches
   (tests/jobs/seed_annotated.py), run under DFTracer alone (its LD_PRELOAD library and
   DFTRACER_* variables, as its docs say; no iosweep in the process). Costs fix the truth by
   construction, per batch of 8: input-bound, 8 x 25 ms of CPU in ``__getitem__`` with no loader
   workers against a 12.5 ms forward (AU = 12.5 / 212.5 = 0.059: the loop's own overheads are
   under a millisecond a batch alone; with a second job holding a core, AU 0.027 at a fifth
   of these costs says about 6 ms more a sample, and |AU - 0.059| < 0.02 holds with twice
   that); compute-bound, a 60 ms forward and
   nothing to decode (AU = 60 / (60 + the 2 to 3 ms a batch that reading 8 small files under
   the tracer, collating, backward and the optimizer step take) = 0.95 or so, > 0.9).
   The overlap figures are checked against dftracer-analyzer (``.venv-dfa``) on the same
   traces, with loader workers too: its process view's summary is each layer's largest
   process (``output.py``, ``times.max()``), compared with iosweep's per-process table.
2. A real DLIO 2.0.0 run (``.venv-dlio``: 2 ranks under mpirun, JPEG, PyTorch loader, no read
   threads, 20 ms of computation a step, DFTRACER_ENABLE=1): every read of its traces
   ingested, a verdict, and DLIO's own AU beside iosweep's within 2 points (their
   definitions differ: docs/analysis.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, html_lines, run_in_group, unavailable

pytestmark = pytest.mark.integration
JOB = REPO / "tests" / "jobs" / "seed_annotated.py"
CASES = {  # case -> the job's arguments
    "input": ["--workers", "0", "--sample-ms", "25", "--step-ms", "12.5"],
    "compute": ["--workers", "0", "--sample-ms", "0", "--step-ms", "60"],
    "workers": ["--workers", "2", "--sample-ms", "1", "--step-ms", "5"],
}
INPUT_AU = 12.5 / (12.5 + 8 * 25)


def _iosweep(*args: str | Path) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "iosweep", *map(str, args)], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    return p


def _under_dftracer(case: str, data: Path, traces: Path) -> None:
    from iosweep.run.tracers import find_dftracer_lib

    found = find_dftracer_lib()
    if found is None:
        unavailable("the dftracer package (its LD_PRELOAD library) is not installed")
    traces.mkdir(parents=True)
    env = {**os.environ, "LD_PRELOAD": found[0], "DFTRACER_ENABLE": "1",
           "DFTRACER_INIT": "PRELOAD", "DFTRACER_INC_METADATA": "1",
           "DFTRACER_TRACE_COMPRESSION": "1", "DFTRACER_DATA_DIR": str(data),
           "DFTRACER_LOG_FILE": str(traces / "trace")}  # fmt: skip
    subprocess.run([sys.executable, str(JOB), str(data), *CASES[case]], env=env, check=True,
                   cwd=traces, timeout=600)  # fmt: skip


@pytest.fixture(scope="module")
def seed_runs(tmp_path_factory) -> dict[str, Path]:
    """Each case's traces, ingested and analysed: case -> its folder (traces/, store/, an/)."""
    root = tmp_path_factory.mktemp("seed")
    data = root / "data"
    data.mkdir()
    for i in range(128):  # 256 float32 a sample: the model's input
        (data / f"s{i:04d}.bin").write_bytes(bytes(range(256)) * 4)
    out = {}
    for case in CASES:
        d = root / case
        _under_dftracer(case, data, d / "traces")
        _iosweep("ingest", d / "traces", "-o", d / "store")
        _iosweep("analyze", d / "store", "-o", d / "an")
        out[case] = d
    return out


def _summary(d: Path) -> dict:
    return json.loads((d / "an" / "summary.json").read_text())


def test_a_job_slow_in_getitem_is_input_bound_by_preprocessing(seed_runs):
    p = _summary(seed_runs["input"])["pipeline"]
    assert p["available"] and p["timing"]["source"] == "events"
    assert p["verdict"]["kind"] == "input-bound-preprocessing"
    assert abs(p["totals"]["au"] - INPUT_AU) < 0.02, p["totals"]["au"]
    # 2 epochs of 128 samples in batches of 8, each step timed by its own loop.iter event
    assert p["timing"]["batches"] == 32
    assert "IO/loop.iter" in p["timing"]["method"]


def test_a_job_with_a_long_forward_is_compute_bound(seed_runs):
    p = _summary(seed_runs["compute"])["pipeline"]
    assert p["verdict"]["kind"] == "compute-bound"
    assert p["totals"]["au"] > 0.9, p["totals"]["au"]


def test_getitem_in_loader_workers_belongs_to_its_rank(seed_runs):
    events = pd.read_parquet(seed_runs["workers"] / "store" / "app_events.parquet")
    meta = json.loads((seed_runs["workers"] / "store" / "run.json").read_text())
    workers = {p["pid"] for p in meta["processes"] if p["role"] == "worker"}
    items = events[events["name"].astype(str).str.endswith("__getitem__")]
    assert len(items) == 256 and set(items["pid"]) <= workers  # read in the workers only
    assert set(items["rank"]) == {0}
    assert _summary(seed_runs["workers"])["pipeline"]["available"]


def _dfanalyzer(traces: Path, out: Path) -> dict:
    """dftracer-analyzer's layers for ``traces``, its compute and data-loader layers set to the
    seed's annotations (its DLIO preset names DLIO's)."""
    exe = REPO / ".venv-dfa" / "bin" / "dfanalyzer"
    if not exe.is_file():
        unavailable(f"no dftracer-analyzer at {exe} (tools/setup.sh makes .venv-dfa)")
    args = [str(exe), "analyzer=dftracer", "analyzer/preset=dlio", f"trace_path={traces}",
            "view_types=[proc_name]", "output=json", "cluster.n_workers=1",
            "analyzer.preset.layer_defs.compute='cat.str.contains(\"comput\")'",
            "analyzer.preset.layer_defs.data_loader='cat == \"io\"'", f"hydra.run.dir={out}",
            # Dask's workers as threads of this one process, its scratch in ``out``: a worker
            # process once hung a CI run for 900 s, and left alive it would load the rest.
            "cluster.processes=false", f"cluster.local_directory={out / 'dask'}"]  # fmt: skip
    env = {**os.environ, "USER": os.environ.get("USER") or "root"}  # its config reads $USER
    try:
        p = run_in_group(args, 300, env=env)  # 20-35 s on 2 busy cores
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"dfanalyzer ran past 300 s (30 s is usual); its output:\n{e.stderr[-3000:]}")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads((out / "dfanalyzer_output.json").read_text())
    return doc["views"]["proc_name"]["summary"]["layers"]


@pytest.mark.parametrize("case", ["input", "workers"])
def test_the_unoverlapped_figures_are_dftracer_analyzers(seed_runs, case, tmp_path):
    """dftracer-analyzer's summary of a process view: per layer, the largest process's sum of
    durations (``time_s``) and that sum less the process's compute sum (``u_time_s``).
    iosweep's table has both per process; its own figures are exact unions."""
    layers = _dfanalyzer(seed_runs[case] / "traces", tmp_path / "dfa")
    table = pd.read_parquet(seed_runs[case] / "an" / "unoverlapped.parquet")
    pairs = {("compute", "time_s"): "compute_busy", ("data_loader", "time_s"): "app_io_busy",
             ("data_loader", "u_time_s"): "u_app_io_dfa", ("posix", "time_s"): "posix_io_busy",
             ("posix", "u_time_s"): "u_posix_io_dfa"}  # fmt: skip
    for (layer, col), ours in pairs.items():
        assert layers[layer][col] == pytest.approx(table[ours].max(), abs=2e-6), (layer, col)
    u = _summary(seed_runs[case])["pipeline"]["unoverlapped"]["totals"]
    if case == "input":
        # one process, no nested I/O events: category IO holds loop.iter (the wait) and
        # loop.yield (the loop's body, the forward inside it), so exactly as by the sums, the
        # unoverlapped application I/O is all of it less the compute
        assert u["unoverlapped_app_io_time"] == pytest.approx(u["app_io_time"] - u["compute_time"])
        assert u["u_app_io_dfa"] == pytest.approx(u["unoverlapped_app_io_time"])
    else:
        # the workers' reads run while the main process computes: exactly, part of them is
        # hidden; per process (no compute in a worker) dftracer-analyzer counts all of it
        assert u["unoverlapped_posix_io_time"] < u["u_posix_io_dfa"]


def test_a_trace_without_annotations_says_what_would_give_a_verdict(tmp_path):
    from iosweep.run.tracers import find_dftracer_lib

    found = find_dftracer_lib()
    if found is None:
        unavailable("the dftracer package (its LD_PRELOAD library) is not installed")
    data, traces = tmp_path / "data", tmp_path / "traces"
    data.mkdir()
    traces.mkdir()
    script = "import sys\nfor i in range(50):\n    open(f'{sys.argv[1]}/f{i}', 'wb').write(b'x' * 4096)\n"
    env = {**os.environ, "LD_PRELOAD": found[0], "DFTRACER_ENABLE": "1",
           "DFTRACER_INIT": "PRELOAD", "DFTRACER_DATA_DIR": str(data),
           "DFTRACER_LOG_FILE": str(traces / "trace")}  # fmt: skip
    subprocess.run([sys.executable, "-c", script, str(data)], env=env, check=True, cwd=traces)
    _iosweep("ingest", traces, "-o", tmp_path / "store")
    said = _iosweep("analyze", tmp_path / "store", "-o", tmp_path / "an").stdout
    assert "whether it waited for its data: not known" in said
    for hint in ('dft_fn("IO").iter(loader)', '@dft_fn("computation").log', "through iosweep"):
        assert hint in said, said
    p = json.loads((tmp_path / "an" / "summary.json").read_text())["pipeline"]
    assert not p["available"] and p["reason"].startswith("the logs record no compute phases")
    _iosweep("report", tmp_path / "an", "-o", tmp_path / "report.html")
    text = "\n".join(html_lines((tmp_path / "report.html").read_text()))
    assert 'dft_fn("IO").iter(loader)' in text, text


# --- DLIO --------------------------------------------------------------------------------------
DLIO_ARGS = ["workload=default", "++workload.workflow.evaluation=False",
             "++workload.dataset.format=jpeg", "++workload.dataset.num_files_train=256",
             "++workload.dataset.num_subfolders_train=0", "++workload.dataset.record_length=4096",
             "++workload.train.epochs=2", "++workload.train.computation_time=0.1",
             "++workload.reader.batch_size=8", "++workload.reader.read_threads=0"]  # fmt: skip


def _dlio(out: Path, data: Path, *extra: str, metadata: bool = True) -> None:
    exe = REPO / ".venv-dlio" / "bin" / "dlio_benchmark"
    if not exe.is_file():
        unavailable(f"no DLIO at {exe} (tools/setup.sh --with-tensorflow makes .venv-dlio)")
    if not shutil.which("mpirun"):
        unavailable("no mpirun")
    cmd = ["mpirun", "-np", "2", "--allow-run-as-root", "--oversubscribe", str(exe), *DLIO_ARGS,
           f"++workload.dataset.data_folder={data}", f"hydra.run.dir={out}", *extra]  # fmt: skip
    env = {**os.environ, "DFTRACER_ENABLE": "1", "DFTRACER_INC_METADATA": str(int(metadata))}
    p = run_in_group(cmd, 900, env=env, cwd=out.parent)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


@pytest.fixture(scope="module")
def dlio_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dlio")
    _dlio(root / "generate", root / "data", "++workload.workflow.generate_data=True",
          "++workload.workflow.train=False")  # fmt: skip
    _dlio(root / "out", root / "data", "++workload.workflow.generate_data=False")
    # as DLIO's users often run it: DFTracer on, its metadata (files, sizes) off
    _dlio(root / "bare", root / "data", "++workload.workflow.generate_data=False", metadata=False)
    for run in ("out", "bare"):
        _iosweep("ingest", root / run, "-o", root / run / "store")
        _iosweep("analyze", root / run / "store", "-o", root / run / "an")
    _iosweep("report", root / "out" / "an", "-o", root / "report.html")
    return root


def test_every_read_of_a_dlio_run_is_ingested(dlio_run):
    seg = pd.read_parquet(dlio_run / "out" / "store" / "segments.parquet")
    for rank in (0, 1):
        lines = (dlio_run / "out" / f"trace-{rank}-of-2.pfw").read_text().splitlines()
        reads = sum(1 for line in lines if re.search(r'"name":"read","cat":"POSIX"', line))
        assert reads and ((seg["rank"] == rank) & (seg["op"] == "read")).sum() == reads
    assert seg["path"].astype(str).str.contains("/data/train/").all()


def test_a_dlio_run_gets_a_verdict_and_dlio_s_own_au_beside_it(dlio_run):
    p = json.loads((dlio_run / "out" / "an" / "summary.json").read_text())["pipeline"]
    assert p["available"] and p["verdict"]["kind"] != "startup"
    summary = json.loads((dlio_run / "out" / "summary.json").read_text())
    theirs = summary["metric"]["train_au_mean_percentage"] / 100
    assert p["dlio"]["au_mean"] == pytest.approx(theirs)
    assert abs(p["totals"]["au"] - theirs) < 0.02, (p["totals"]["au"], theirs)
    # 2 ranks x 2 epochs x 256 / 2 / 8 steps
    assert (
        p["timing"]["batches"] == 64
        and "ai_framework/TorchFramework.compute" in p["timing"]["loop"]
    )
    text = "\n".join(html_lines((dlio_run / "report.html").read_text()))
    assert f"DLIO's own AU {theirs:.1%}" in text


def test_a_dlio_run_traced_without_metadata_says_so_and_still_gets_its_verdict(dlio_run):
    sm = json.loads((dlio_run / "bare" / "an" / "summary.json").read_text())
    calls = sum(len(re.findall(r'"name":"read","cat":"POSIX"', (dlio_run / "bare" / f).read_text()))
                for f in ("trace-0-of-2.pfw", "trace-1-of-2.pfw"))  # fmt: skip
    (found,) = [i for i in sm["insights"] if i["id"] == "io_without_metadata"]
    assert found["severity"] == "high" and f"recorded {calls} read/write calls" in found["message"]
    assert "DFTRACER_INC_METADATA=1" in found["recommendation"]
    assert not any(i["id"] == "no_io_recorded" for i in sm["insights"])  # it was recorded
    assert sm["pipeline"]["available"] and sm["pipeline"]["dlio"]["au_mean"] is not None
