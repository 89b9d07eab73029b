"""No silent skips where the environment is ours: under CI=true a missing fixture is a failure
that names it (a run of pytest in a child process, with IOSWEEP_SHARED at an empty folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pytest(tmp_path: Path, ci: str, *tests: str) -> subprocess.CompletedProcess[str]:
    empty = tmp_path / "empty-shared"
    empty.mkdir(exist_ok=True)
    env = {**os.environ, "IOSWEEP_SHARED": str(empty), "CI": ci}
    env.pop("IOSWEEP_STRICT", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", *tests],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


TESTS = (
    "tests/test_darshan_log.py::test_release_logs_every_format_version",
    "tests/test_dftracer_log.py::test_times_are_epoch_seconds_and_tables_relative",
    "tests/test_analysis_fixtures.py",
)


def test_missing_fixtures_fail_under_ci_and_are_named(tmp_path):
    proc = _pytest(tmp_path, "true", *TESTS)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert " skipped" not in out.splitlines()[-1], out[-2000:]
    # stopped before any test, every missing fixture named at once (conftest.FIXTURES)
    assert f"shared fixtures missing under {tmp_path / 'empty-shared' / 'data'}" in out
    assert "horovod-pytorch-mnist/dftracer-np1" in out and "darshan-logs/release_logs" in out
    assert "a failure, not a skip" in out
    assert " passed" not in out


def test_missing_fixtures_skip_with_the_reason_elsewhere(tmp_path):
    proc = _pytest(tmp_path, "false", *TESTS)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert " skipped" in out.splitlines()[-1] and "failed" not in out.splitlines()[-1]
    assert "shared fixtures not found at" in out
