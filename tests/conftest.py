"""Shared pytest fixtures. Keep this small: fixtures used by one test file live in that file."""

from __future__ import annotations

import html.parser
import json
import os
import signal
import subprocess
import time
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
    "traces-from-elsewhere/dftracer-stormer-polaris",
    "traces-from-elsewhere/dftracer-dlio-unet3d-v100-hdf5",
    "traces-from-elsewhere/dlio-output-unet3d-docker-2rank",
    "traces-from-elsewhere/kineto-resnet50-cifar10-v100",
)


def pydarshan_records(log: Path, module: str = "POSIX") -> dict:
    """PyDarshan's reading of one module of a Darshan log: ``{"counters": DataFrame,
    "fcounters": DataFrame}`` (the expected values of the tests that compare with it)."""
    import darshan

    rep = darshan.DarshanReport(str(log), read_all=False)
    rep.mod_read_all_records(module)
    return rep.records[module].to_df()


REPO = Path(__file__).resolve().parents[1]


def run_in_group(cmd: list, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)`` in a process group of its own,
    killed whole when the timeout passes or the test is stopped: a hung child (a Dask worker,
    a rank) left alive would hold a core through the tests after it."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, **kwargs) as proc:  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException as e:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            if isinstance(e, subprocess.TimeoutExpired):
                raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def snakemake(*args, cwd=REPO, check=True, timeout=1800):
    """The workflow's Snakemake on this repository; an AssertionError with its output tails
    when ``check`` and it fails."""
    import sys

    exe = Path(sys.executable).parent / "snakemake"
    cmd = [str(exe), "--snakefile", str(REPO / "Snakefile"), "--directory", str(REPO), *args]
    proc = run_in_group(cmd, timeout, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )
    return proc


def missing_fixtures() -> list[str]:
    data = shared_dir() / "data"
    return [f for f in dict.fromkeys(FIXTURES) if not (data / f).is_dir()]


#: Open MPI's ranks poll for messages without yielding unless it sees a node oversubscribed, and
#: it counts only its own ranks: with the other test worker on the second core, a rank waiting
#: in Horovod's allreduce spun on the core its peer needed, and a 2-rank TensorFlow run took 130 s
#: instead of 68 s, compute-bound jobs came out host-CPU-bound (docs/testing.md). The tests share
#: this machine by design, so their MPI jobs yield, as Open MPI's own jobs do when oversubscribed.
MPI_YIELD = {"OMPI_MCA_mpi_yield_when_idle": "1"}


def pytest_configure(config) -> None:
    for key, value in MPI_YIELD.items():
        os.environ.setdefault(key, value)


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


def assert_verdict_or_host_held(pipeline: dict, kind: str) -> None:
    """The verdict ``kind``; or, for a job that is not compute-bound, "Held back by the host's
    CPU" where the host's cores were all busy (the job's own ranks and threads, or the other
    tests beside it): then the kernel's figures must say so and the trace alone read ``kind``."""
    v, host = pipeline["verdict"], pipeline["host"]
    if kind != "compute-bound" and v["kind"] == "host-cpu-bound":
        assert v["trace_kind"] == kind, (v, pipeline["totals"])
        assert host["busy_share"] >= 0.9 and host["core_wait_share"] >= 0.25, host
    else:
        assert v["kind"] == kind, (v, pipeline["totals"])


def html_lines(page: str) -> list[str]:
    """The text a reader sees in an HTML page (not its styles or scripts), one line per
    text node, whitespace collapsed."""
    text = _Text()
    text.feed(page)
    return text.lines


# --- Scheduling under pytest-xdist (make test: -n 2 --dist loadfile) ---
# xdist's own groups (--dist loadgroup) are lost under pytest 9.2, which no longer reads the test
# id xdist rewrites; so the unit of work is the scheduler's scope below, from the test id alone.

#: Test files by their measured share of the suite (docs/testing.md), longest first: xdist hands
#: a worker the next unit when it is almost done, so the long units start first and the short
#: ones fill the end (longest-processing-time-first). Files not named keep collection order.
LONG_FIRST: tuple[str, ...] = (  # 2026-12-02, make test on 2 workers (docs/testing.md)
    "slurm",
    "tests/test_advice_sweep.py",
    "tests/test_own_job.py",
    "tests/test_imagenet_integration.py",
    "tests/test_whole_job.py",
    "tests/test_replay.py",
    "tests/test_tune.py",
    "tests/test_faults.py",
    "tests/test_parts.py",
    "tests/test_report.py",
    "tests/test_own_traces.py",
    "tests/test_workflow.py",
    "tests/test_train_integration.py",
    "tests/test_analysis.py",
    "tests/test_merged_log.py",
    "tests/test_pipeline_fixtures.py",
    "tests/test_damaged_inputs.py",
    "tests/test_mpi.py",
    "tests/test_timeline.py",
    "tests/test_rules.py",
)

#: The files whose tests start a SLURM cluster (its ports, network namespaces and node names are
#: fixed): one unit between them, so never two clusters at once.
SLURM_FILES = ("tests/test_slurm_cluster.py", "tests/test_slurm_workflow.py")


def file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def scope_of(nodeid: str) -> str:
    """The unit xdist hands to one worker: a test file (its module fixtures, a training run
    each, are made once), or all of SLURM_FILES together."""
    path = file_of(nodeid)
    return "slurm" if path in SLURM_FILES else path


def pytest_itemcollected(item) -> None:
    """A SLURM test outside SLURM_FILES could start a cluster beside another: refused."""
    if item.get_closest_marker("slurm") and scope_of(item.nodeid) != "slurm":
        raise pytest.UsageError(f"{item.nodeid} is marked slurm but is not in conftest.SLURM_FILES")


def _rank(nodeid: str) -> int:
    scope = scope_of(nodeid)
    return LONG_FIRST.index(scope) if scope in LONG_FIRST else len(LONG_FIRST)


def pytest_collection_modifyitems(config, items) -> None:
    """The units ordered longest first (a stable sort: within a file the order is the file's).
    Without xdist only the order changes. `exclusive` is a whole file's mark: make test runs
    those files in a phase of their own, and a file split between the phases would make its
    module fixtures (its training runs) twice."""
    items.sort(key=lambda item: _rank(item.nodeid))
    marked: dict[str, set[bool]] = {}
    for item in items:
        marked.setdefault(file_of(item.nodeid), set()).add(
            item.get_closest_marker("exclusive") is not None
        )
    if split := sorted(p for p, m in marked.items() if len(m) > 1):
        raise pytest.UsageError(f"mark exclusive on the whole file (pytestmark): {split}")


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's: no error where it is not loaded
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with SLURM_FILES one unit and the units in collection order (the
    order above), not reordered by their number of tests."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    config.option.loadscopereorder = False
    return ByFile(config, log)


_SUITE_START = time.time()


def _training_runs(base: Path) -> tuple[int, float]:
    """Real training runs this session started (each writes a manifest.json with its start
    and end times) and their summed wall time; manifests copied from fixtures are older."""
    count, seconds = 0, 0.0
    for path in base.rglob("manifest.json"):
        try:
            m = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(m, dict) and (m.get("start_time") or 0) >= _SUITE_START and m.get("end_time"):
            count += 1
            seconds += m["end_time"] - m["start_time"]
    return count, seconds


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The suite's own wall time (and its training runs), against the budget of
    docs/testing.md, at the end of every run, so that a suite growing past it shows."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller reports
        return
    wall = time.time() - _SUITE_START
    runs, train = _training_runs(config._tmp_path_factory.getbasetemp())
    terminalreporter.write_line(
        f"iosweep suite: pytest wall time {wall:.0f} s ({wall / 60:.1f} min); "
        f"{runs} training runs, {train:.0f} s of training in all (summed over runs); "
        "budget for make test, setup included: 40 min on 2 cores (docs/testing.md)"
    )
