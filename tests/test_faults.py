"""Faults caused for real, and what is left afterwards (docs/faults.md): a rank killed by
SIGKILL mid-training, as the out-of-memory killer does; a file system that fills up while
the trace store and the analysis are written; a DFTracer trace cut mid-line; the workflow
interrupted by Ctrl-C mid-sweep and started again."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import unavailable
from interrupt import interrupt_and_restart

from iosweep.config import expand_sweep, validate_config
from iosweep.run.collect import signaled_ranks
from iosweep.run.dataset import prepare_dataset
from iosweep.run.program import resolve_python
from iosweep.run.runner import run_point

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 300  # training.timeout: the run must end long before it


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _kill_rank_once_training(run_dir: Path, rank: int, done: dict) -> None:
    """SIGKILL ``rank`` once rank 0 has finished its first epoch (it prints 'epoch 0:')."""
    log = run_dir / "launcher.log"
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if log.exists() and "epoch 0:" in log.read_text(errors="replace"):
            pid = json.loads((run_dir / "ranks" / f"rank-{rank}.json").read_text())["pid"]
            os.kill(pid, signal.SIGKILL)
            done.update(pid=pid, at=time.time())
            return


def test_a_rank_killed_by_sigkill_ends_the_run_at_once_and_is_named(tmp_path):
    if resolve_python("pytorch", None)[0] is None:
        unavailable("no Horovod PyTorch stack (run tools/setup.sh)")
    data = tmp_path / "mnist"
    prepare_dataset(data, train_size=4096, test_size=256, npz_copies=2, log=lambda m: None)
    config = validate_config(
        {
            "sweep": {
                "procs_per_node": [2],
                "epochs": [4],
                "steps_per_epoch": [200],
                "tracers": ["dftracer"],
                "include": [],
            },
            "dataset": {"train_size": 4096, "test_size": 256},
            "training": {"collect_wait": 20, "timeout": TIMEOUT},
        }
    )
    point = expand_sweep(config)[0]
    run_dir = tmp_path / "run"
    killed: dict = {}
    killer = threading.Thread(target=_kill_rank_once_training, args=(run_dir, 1, killed))
    killer.start()
    manifest = run_point(config, point, run_dir, data, log=lambda m: None)
    killer.join()
    assert killed, "rank 0 never finished its first epoch"
    # the other rank, blocked in an allreduce, did not keep the job alive until the timeout
    print(
        f"SIGKILL to rank 1: the launcher ended {manifest['end_time'] - killed['at']:.1f} s later"
    )
    assert manifest["end_time"] - killed["at"] < 30
    assert manifest["status"] == "failed"
    assert manifest["reason"].startswith("rank 1 was killed by SIGKILL (signal 9")
    first = manifest["signaled_ranks"][0]
    assert (first["rank"], first["signal"], first["name"]) == (1, 9, "SIGKILL")
    assert manifest["trace_problems"]["1"].startswith("killed by SIGKILL")
    # every process of the job is gone within seconds (mpirun may exit before its last rank)
    pids = [json.loads(p.read_text())["pid"] for p in (run_dir / "ranks").glob("rank-*.json")]
    deadline = time.monotonic() + 10
    while [p for p in pids if _alive(p)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(pids) == 2 and not [p for p in pids if _alive(p)]


def test_launchers_reports_of_signaled_ranks():
    # Open MPI 4's and SLURM srun's own wording
    mpirun = (
        "mpirun noticed that process rank 3 with PID 0 on node node7 exited on signal 9 (Killed)."
    )
    assert signaled_ranks(mpirun) == [{"rank": 3, "host": "node7", "signal": 9, "name": "SIGKILL"}]
    srun = (
        "srun: error: simnode2: task 1: Killed\n"
        "srun: error: simnode1: tasks 0,2-3: Terminated\n"
        "srun: error: simnode1: task 4: Exited with exit code 1\n"
    )
    assert [(s["rank"], s["host"], s["name"]) for s in signaled_ranks(srun)] == [
        (1, "simnode2", "SIGKILL"),
        (0, "simnode1", "SIGTERM"),
        (2, "simnode1", "SIGTERM"),
        (3, "simnode1", "SIGTERM"),
    ]
    assert signaled_ranks("epoch 0: loss 2.2\n") == []


# --- a full disk ---------------------------------------------------------------------------------
@contextlib.contextmanager
def _small_fs(where: Path, size: str):
    """A tmpfs of ``size`` mounted at ``where`` (a real file system that fills up)."""
    if os.geteuid() != 0:
        unavailable("mounting a small tmpfs needs root")
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "iosweep"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_full_disk_names_the_file_leaves_nothing_half_written_and_a_rerun_completes(
    tmp_path, shared_data
):
    logs = shared_data / "darshan-logs" / "mpi_io_test_with_dxt"
    with _small_fs(tmp_path / "small", "16k") as fs:
        proc = _cli("ingest", str(logs), "-o", str(fs / "store"))
        assert proc.returncode == 1
        err = proc.stderr.strip().splitlines()[-1]
        assert err.startswith(f"iosweep ingest: {fs / 'store'}/") and "no space left" in err
        assert "it needs up to" in err and "free" in err and "Traceback" not in proc.stderr
        # no store that looks complete, no temporary file left behind
        assert not (fs / "store" / "run.json").exists()
        assert not list((fs / "store").glob("*.tmp"))
        # space freed: the same command completes, and the store opens
        subprocess.run(["mount", "-o", "remount,size=4m", str(fs)], check=True)
        assert _cli("ingest", str(logs), "-o", str(fs / "store")).returncode == 0
        subprocess.run(["mount", "-o", "remount,size=200k", str(fs)], check=True)
        proc = _cli("analyze", str(fs / "store"), "-o", str(fs / "analysis"))
        assert proc.returncode == 1 and "no space left on device" in proc.stderr
        assert "Traceback" not in proc.stderr and not (fs / "analysis" / "summary.json").exists()
        assert not list((fs / "analysis").glob("*.tmp"))
        subprocess.run(["mount", "-o", "remount,size=4m", str(fs)], check=True)
        assert _cli("analyze", str(fs / "store"), "-o", str(fs / "analysis")).returncode == 0
        assert json.loads((fs / "analysis" / "summary.json").read_text())["run_id"]


# --- a tracer cut off while writing ------------------------------------------------------------
def test_a_dftracer_trace_cut_mid_line_marks_the_run_partial_with_its_rank(tmp_path, shared_data):
    run = tmp_path / "run"
    shutil.copytree(shared_data / "horovod-pytorch-mnist" / "dftracer-np2", run)
    cut = sorted((run / "logs").glob("*.pfw.gz"))[0]
    text = gzip.decompress(cut.read_bytes())
    cut.write_bytes(gzip.compress(text[: len(text) // 2]))  # as a rank killed mid-write leaves it
    assert "cut while written" in _ingest_as_cut(run, tmp_path / "store", cut.name)


def _ingest_as_cut(traces: Path, store: Path, log_name: str) -> str:
    """Ingest ``traces``: the store is partial with one error naming ``log_name`` as cut;
    that error's message."""
    proc = _cli("ingest", str(traces), "-o", str(store))
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((store / "run.json").read_text())
    assert meta["status"] == "partial"
    (issue,) = [i for i in meta["issues"] if i["kind"] == "truncated"]
    assert issue["severity"] == "error" and log_name in issue["source"]
    return issue["message"]


_BUSY_WRITER = """
import sys
for i in range(10**9):
    with open(f"{sys.argv[1]}/f{i % 64}.bin", "wb") as f:
        f.write(b"x" * 100)
"""


def test_a_dftracer_trace_of_a_rank_killed_while_it_writes_is_ingested_as_cut(tmp_path):
    """The real thing: a process under DFTracer's preload, killed by SIGKILL once DFTracer
    has begun writing its trace, leaves a gzip stream that ends inside a member."""
    from iosweep.run.tracers import rank_environment, resolve_tracer

    data, traces = tmp_path / "data", tmp_path / "traces"
    data.mkdir()
    traces.mkdir()
    spec = resolve_tracer("dftracer", tmp_path, data_dirs=[data])
    if spec.name != "dftracer":
        unavailable(f"no DFTracer preload library: {spec.warnings}")
    env = rank_environment(spec, traces, dict(os.environ))
    proc = subprocess.Popen([sys.executable, "-c", _BUSY_WRITER, str(data)], env=env)
    try:
        deadline = time.monotonic() + 120
        while not any(f.stat().st_size for f in traces.glob("*.pfw.gz")):
            assert proc.poll() is None and time.monotonic() < deadline, "no trace was written"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    (trace,) = traces.glob("*.pfw.gz")
    with pytest.raises(EOFError):  # what a reader of the whole file meets
        gzip.decompress(trace.read_bytes())
    message = _ingest_as_cut(traces, tmp_path / "store", trace.name)
    assert "events after the cut are lost" in message
    # what was written before the cut is kept: the writes of the data files
    import pandas as pd

    seg = pd.read_parquet(tmp_path / "store" / "segments.parquet")
    assert (seg["path"].astype(str).str.startswith(str(data)) & (seg["op"] == "write")).sum() > 1000


# --- the workflow interrupted --------------------------------------------------------------------
def test_an_interrupted_sweep_restarts_where_it_stopped(tmp_path):
    """Ctrl-C mid-sweep (SIGINT to make run's process group), then make run again. The login
    session ending is tests/test_interrupted_sweep.py's."""
    interrupt_and_restart(tmp_path, signal.SIGINT)


def test_a_point_that_gets_no_slurm_allocation_is_failed_with_salloc_s_words(tmp_path, monkeypatch):
    """salloc that cannot give the point its nodes (here: a cluster config it cannot use)
    leaves a failed manifest quoting salloc, not a point without one."""
    if shutil.which("salloc") is None and os.geteuid() == 0 and shutil.which("apt-get"):
        # as the SLURM tests do, whichever runs first on a fresh machine
        subprocess.run(["bash", str(REPO / "tools" / "slurm-cluster.sh"), "install"], check=True)
    if shutil.which("salloc") is None:
        unavailable("no salloc (tools/slurm-cluster.sh install installs slurm-wlm)")
    (tmp_path / "slurm.conf").write_text("")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    config = validate_config({"sweep": {"tracers": ["none"], "include": []}})
    point = expand_sweep(config)[0]
    rerun = "snakemake --forcerun x"
    manifest = run_point(config, point, tmp_path / "run", tmp_path, log=lambda m: None,
                         allocate=True, rerun=rerun)  # fmt: skip
    assert manifest["status"] == "failed" and manifest["rerun"] == rerun
    assert manifest["reason"] == (
        "salloc exited 1 before the point's runner wrote a manifest: "
        "salloc: fatal: Unable to process configuration file"
    )
    assert json.loads((tmp_path / "run" / "manifest.json").read_text()) == manifest
