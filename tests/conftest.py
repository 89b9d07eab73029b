"""Shared pytest fixtures. Keep this small: fixtures used by one test file live in that file."""

from __future__ import annotations

import html.parser
import os
from pathlib import Path
from typing import NoReturn

import pytest


def environment_is_ours() -> bool:
    """True under CI (``CI=true``) and in ``make test`` (``IOSWEEP_STRICT=1``): the machine was
    set up by tools/setup.sh, so a missing fixture, package or stack is a broken setup."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("IOSWEEP_STRICT") == "1"


def unavailable(reason: str) -> NoReturn:
    """Skip for ``reason`` where the environment is not ours; fail with it where it is, so that
    a broken setup never turns into a green run of skipped tests."""
    if environment_is_ours():
        pytest.fail(f"{reason} [a failure, not a skip: CI=true or IOSWEEP_STRICT=1]", pytrace=False)
    pytest.skip(reason)


def shared_dir() -> Path:
    """The project's ../shared folder (override with IOSWEEP_SHARED)."""
    return Path(os.environ.get("IOSWEEP_SHARED") or Path(__file__).resolve().parents[2] / "shared")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``shared/data``: the real trace fixtures (see :func:`unavailable` when absent)."""
    data = shared_dir() / "data"
    if not data.is_dir():
        unavailable(
            f"shared fixtures not found at {data} (set IOSWEEP_SHARED to the shared/ folder)"
        )
    return data


def shared_fixture(rel: str) -> Path:
    """One fixture folder or file under ``shared/data``, named in the failure when it is missing."""
    path = shared_dir() / "data" / rel
    if not path.exists():
        unavailable(f"shared fixture {rel} not found at {path}")
    return path


#: Every fixture folder of shared/data the tests read (../shared/README.md says what each is).
FIXTURES = (
    *(
        f"darshan-logs/{d}"
        for d in (
            "dlio_logs",
            "empty_log",
            "mpi_io_test_with_dxt",
            "nonmpi_dxt_anonymized",
            "partial_data_dxt",
            "partial_data_stdio",
            "release_logs",
            "stdio_no_posix",
        )
    ),
    *(
        f"horovod-pytorch-mnist/{d}"
        for d in ("darshan-2nodes-np4", "darshan-live-np2", "darshan-np1", "darshan-np2")
    ),
    *(f"horovod-pytorch-mnist/{t}-np{n}" for t in ("darshan", "dftracer") for n in (4, 1, 2)),
    *(f"horovod-tf2-mnist/{t}-np{n}" for t in ("darshan", "dftracer") for n in (1, 2, 4)),
    *(
        f"imagenet-style-resnet50-h100/{d}"
        for d in (
            "darshan16",
            "darshan2",
            "darshan8",
            "darshan8shm",
            "dftracer8",
            "none16",
            "none8",
            "none8shm",
        )
    ),
)


def pydarshan_records(log: Path, module: str = "POSIX") -> dict:
    """PyDarshan's reading of one module of a Darshan log: ``{"counters": DataFrame,
    "fcounters": DataFrame}`` (the expected values of the tests that compare with it)."""
    import darshan

    rep = darshan.DarshanReport(str(log), read_all=False)
    rep.mod_read_all_records(module)
    return rep.records[module].to_df()


REPO = Path(__file__).resolve().parents[1]


def snakemake(*args, cwd=REPO, check=True, timeout=1800):
    """The workflow's Snakemake on this repository; an AssertionError with its output tails
    when ``check`` and it fails."""
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "snakemake"
    cmd = [str(exe), "--snakefile", str(REPO / "Snakefile"), "--directory", str(REPO), *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )
    return proc


def missing_fixtures() -> list[str]:
    data = shared_dir() / "data"
    return [f for f in dict.fromkeys(FIXTURES) if not (data / f).is_dir()]


def pytest_sessionstart(session) -> None:
    """Where the environment is ours, a missing fixture stops the run at once with the list,
    before minutes of other tests (each fixture test would also fail, naming its own)."""
    if environment_is_ours() and (missing := missing_fixtures()):
        pytest.exit(
            f"{len(missing)} shared fixtures missing under {shared_dir() / 'data'} "
            f"(set IOSWEEP_SHARED to the shared/ folder): {', '.join(missing)} "
            "[a failure, not a skip: CI=true or IOSWEEP_STRICT=1]",
            returncode=1,
        )


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("style", "script")

    def handle_endtag(self, tag):
        self._skip -= tag in ("style", "script")

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.lines.append(" ".join(data.split()))


def html_lines(page: str) -> list[str]:
    """The text a reader sees in an HTML page (not its styles or scripts), one line per
    text node, whitespace collapsed."""
    text = _Text()
    text.feed(page)
    return text.lines
