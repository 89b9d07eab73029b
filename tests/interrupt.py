"""A sweep interrupted as a user's is, then started again with `make run`: the finished point is
not rerun, the interrupted one is redone whole (tests/test_faults.py: Ctrl-C;
tests/test_interrupted_sweep.py: the login session ending)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _processes_of(run_dir: Path) -> list[str]:
    """Command lines of live processes that name ``run_dir`` (the point's launcher, ranks)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if str(run_dir) in text:
                found.append(text)
    return found


def _make_run(cfg: Path) -> list[str]:
    """`make run` on ``cfg``, as a user starts (and restarts) a sweep."""
    return ["make", "-C", str(REPO), "--no-print-directory", "run", "CORES=2",
            f"SNAKEMAKE_ARGS=--configfile {cfg}"]  # fmt: skip


def interrupt_and_restart(tmp_path: Path, sig: int) -> None:
    """`make run` on the tiny sweep, ``sig`` sent to its process group once one point has
    finished and the other trains, then `make run` again; asserts what is left and redone."""
    results = tmp_path / "results"
    cfg = tmp_path / "tiny.yaml"
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["sweep"]["steps_per_epoch"] = [400]  # long enough to outlive the interruption
    cfg.write_text(yaml.safe_dump({**config, "results": str(results)}))
    runs = results / "runs"
    first = subprocess.Popen(
        _make_run(cfg), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        # Ctrl-C (or the login session ending) once one point has finished and the other trains
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and first.poll() is None:
            done = list(runs.rglob("manifest.json"))
            training = [
                p for p in runs.rglob("launcher.log") if not (p.parent / "manifest.json").exists()
            ]
            if done and training:
                break
            time.sleep(0.2)
        assert first.poll() is None, "the sweep ended before it could be interrupted"
        signalled = time.monotonic()
        os.killpg(first.pid, sig)
        first.wait(timeout=120)
        print(f"{sig.name}: make run ended {time.monotonic() - signalled:.1f} s later")
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    (finished,) = done
    kept = finished.stat().st_mtime_ns
    interrupted = training[0].parent
    assert not (interrupted / "manifest.json").exists()
    # the point's job went with the sweep: no rank keeps writing into its directory
    deadline = time.monotonic() + 3
    while _processes_of(interrupted) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _processes_of(interrupted)
    # started again: the finished point is not rerun, the interrupted one is redone whole
    proc = subprocess.run(_make_run(cfg), capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert finished.stat().st_mtime_ns == kept
    manifest = json.loads((interrupted / "manifest.json").read_text())
    assert manifest["status"] == "ok", manifest["reason"]
    html = (results / "report" / "report.html").read_text()
    sweep = (results / "sweep" / "sweep.csv").read_text().splitlines()
    assert len(sweep) == 1 + 2  # header + each point once
    assert "ppn~1" in "".join(sweep) and "ppn~2" in "".join(sweep) and html
