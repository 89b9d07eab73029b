"""Damaged, impossible and hostile inputs, end to end (issue 50): each of the cases below is
ingested and analysed as a user would (``ingest_jobs``, ``analyze_run``, the report) and
ends in a named issue or a clear refusal naming the file: no traceback, and no impossible
figure in summary.json (a negative count, bytes or time; a share above 1; a run of years).

The inputs: a real log of Darshan's own release tests (shared/data, cut and bit-flipped), logs
written with libdarshan-util's writer holding the impossible values stated, and a real
DFTracer trace (shared/data) with its lines edited."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import shared_fixture

from iosweep.analysis import AnalysisSettings, analyze_run
from iosweep.trace.darshan.libutil import SEGMENT_DTYPE
from iosweep.trace.darshan.write import CounterRecord, DxtFile, write_darshan_log
from iosweep.trace.ingest import ingest_jobs

MiB = 1 << 20
T0 = 1_700_000_000.0
RELEASE = "darshan-logs/release_logs"
REAL_LOG = "mpi-io-test-x86_64-3.4.7.darshan"
TF_TRACE = "horovod-tf2-mnist/dftracer-np1"

# keys whose values can never be negative, and keys that are shares of a whole
NON_NEGATIVE = {"bytes_read", "bytes_written", "reads", "writes", "opens", "run_time",
                "io_time_max", "io_time_mean", "files", "ranks", "segments",
                "counter_records", "duration_s"}  # fmt: skip
SHARES = {"io_share_max", "meta_time_share", "small_read_share", "small_write_share",
          "random_share", "contiguous_share", "small_share", "stdio_share"}  # fmt: skip
YEAR_S = 366 * 86400.0


def impossible_figures(node: Any, where: str = "") -> list[str]:
    """Where ``node`` (a summary.json) states a figure that cannot be: a negative count,
    byte total or time, a share outside [0, 1], a run of more than a year, a NaN."""
    out: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            at = f"{where}.{k}"
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                negative = k in NON_NEGATIVE and v < 0
                no_share = k in SHARES and not 0 <= v <= 1
                if math.isnan(v) or negative or no_share or (k == "run_time" and v > YEAR_S):
                    out.append(f"{at} = {v}")
            else:
                out += impossible_figures(v, at)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += impossible_figures(v, f"{where}[{i}]")
    return out


def test_the_figure_check_finds_what_it_is_for():
    # (the check itself: a net that catches nothing proves nothing)
    bad = {"headline": {"io_share_max": 49.5, "bytes_read": -1, "run_time": 1.8e12},
           "x": [{"meta_time_share": float("nan")}]}  # fmt: skip
    assert len(impossible_figures(bad)) == 4
    assert impossible_figures({"headline": {"io_share_max": 0.5, "bytes_read": 10}}) == []


# --- the cases: each writes its inputs into a folder -----------------------------------------
def _segments(n: int = 10) -> np.ndarray:
    seg = np.zeros(n, SEGMENT_DTYPE)
    seg["offset"], seg["length"] = np.arange(n) * MiB, MiB
    seg["start"] = 1.0 + np.arange(n) * 0.01
    seg["end"] = seg["start"] + 0.005
    return seg


def _log(d: Path, records=(), files=None, name="job.darshan", **kw) -> None:
    d.mkdir(parents=True, exist_ok=True)
    times = {"start": T0, "end": T0 + 100, "jobid": 7, "nprocs": 1, **kw}
    write_darshan_log(d / name, files if files is not None else [DxtFile("/d/a", _segments())],
                      exe="./app", records=list(records), **times)  # fmt: skip


def _posix(counters=None, fcounters=None, rank=0, path="/d/a") -> CounterRecord:
    base = {"POSIX_OPENS": 1, "POSIX_READS": 10, "POSIX_BYTES_READ": 10 * MiB,
            "POSIX_MAX_BYTE_READ": 10 * MiB - 1}  # fmt: skip
    return CounterRecord("POSIX", path, {**base, **(counters or {})},
                         {"POSIX_F_READ_TIME": 2.0, **(fcounters or {})}, rank)  # fmt: skip


def _real(d: Path, edit: Callable[[bytes], bytes], name: str = REAL_LOG) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(edit((shared_fixture(RELEASE) / REAL_LOG).read_bytes()))


def _flip(at: float) -> Callable[[bytes], bytes]:
    def edit(b: bytes) -> bytes:
        i = int(len(b) * at)
        return b[:i] + bytes([b[i] ^ 0xFF]) + b[i + 1 :]

    return edit


def _trace(d: Path, edit: Callable[[list[str]], list[str]]) -> None:
    src = next((shared_fixture(TF_TRACE) / "logs").glob("*.pfw.gz"))
    lines = gzip.decompress(src.read_bytes()).decode().splitlines()
    d.mkdir(parents=True, exist_ok=True)
    (d / src.name).write_bytes(gzip.compress(("\n".join(edit(lines)) + "\n").encode()))


def _reads(lines: list[str]) -> list[int]:
    return [i for i, ln in enumerate(lines) if '"name":"read"' in ln and '"cat":"POSIX"' in ln]


def _set(field: str, f: Callable[[Any], Any], which: slice = slice(0, 1)):
    def edit(lines: list[str]) -> list[str]:
        for i in _reads(lines)[which]:
            o = json.loads(lines[i])
            o[field] = f(o[field])
            lines[i] = json.dumps(o)
        return lines

    return edit


def _repeat(n: int):
    def edit(lines: list[str]) -> list[str]:
        i = _reads(lines)[3]
        return lines[: i + 1] + [lines[i]] * n + lines[i + 1 :]

    return edit


def _two_logs_apart(d: Path) -> None:
    _log(d, name="a_id101.darshan", jobid=101)
    _log(d, name="b_id202.darshan", jobid=202, start=T0 + 131, end=T0 + 231)


def _same_log_twice(d: Path) -> None:
    _real(d, lambda b: b)
    shutil.copy(d / REAL_LOG, d / "copy-of-it.darshan")


def _two_mpi_jobs(d: Path) -> None:
    _log(d, [_posix(rank=r, path=f"/d/{r}") for r in range(2)], files=[], name="j1.darshan",
         jobid=11, nprocs=2)  # fmt: skip
    _log(d, [_posix(rank=r, path=f"/e/{r}") for r in range(2)], files=[], name="j2.darshan",
         jobid=12, nprocs=2, start=T0 + 500, end=T0 + 600)  # fmt: skip


CASES: dict[str, Callable[[Path], None]] = {
    # real log, damaged
    "cut at 10%": lambda d: _real(d, lambda b: b[: len(b) // 10]),
    "cut at half": lambda d: _real(d, lambda b: b[: len(b) // 2]),
    "cut at 90%": lambda d: _real(d, lambda b: b[: len(b) * 9 // 10]),
    "cut to its header": lambda d: _real(d, lambda b: b[:64]),
    "flip in the header": lambda d: _real(d, _flip(0.01)),
    "flip a third in": lambda d: _real(d, _flip(0.33)),
    "flip in the middle": lambda d: _real(d, _flip(0.5)),
    "flip near the end": lambda d: _real(d, _flip(0.97)),
    "zero bytes": lambda d: _real(d, lambda b: b""),
    "random bytes": lambda d: _real(d, lambda b: np.random.default_rng(5).bytes(len(b))),
    "wrong version string": lambda d: _real(d, lambda b: b"darshan-log-v9.99" + b[17:]),
    "a text file named .darshan": lambda d: _real(d, lambda b: b"not a log\n" * 50),
    # impossible values, a log otherwise whole
    "negative reads": lambda d: _log(d, [_posix({"POSIX_READS": -7})], files=[]),
    "negative bytes read": lambda d: _log(d, [_posix({"POSIX_BYTES_READ": -(5 << 30)})], []),
    "negative bytes written": lambda d: _log(d, [_posix({"POSIX_BYTES_WRITTEN": -4096})], []),
    "negative opens": lambda d: _log(d, [_posix({"POSIX_OPENS": -2})], files=[]),
    "negative furthest byte": lambda d: _log(d, [_posix({"POSIX_MAX_BYTE_READ": -9})], []),
    "negative size bin": lambda d: _log(d, [_posix({"POSIX_SIZE_READ_0_100": -3})], []),
    "negative read time": lambda d: _log(d, [_posix(fcounters={"POSIX_F_READ_TIME": -30.0})], []),
    "NaN meta time": lambda d: _log(d, [_posix(fcounters={"POSIX_F_META_TIME": math.nan})], []),
    "infinite write time": lambda d: _log(
        d, [_posix(fcounters={"POSIX_F_WRITE_TIME": math.inf})], []
    ),
    "negative open time": lambda d: _log(
        d, [_posix(fcounters={"POSIX_F_OPEN_START_TIMESTAMP": -5.0})], []
    ),
    "one of two ranks negative": lambda d: _log(
        d, [_posix({"POSIX_BYTES_READ": -1024}), _posix(rank=1, path="/d/b")], [], nprocs=2
    ),
    "read time 50x the run": lambda d: _log(
        d, [_posix(fcounters={"POSIX_F_READ_TIME": 5000.0})], []
    ),
    "ends before it starts": lambda d: _log(d, start=T0 + 100, end=T0),
    "a run of 1,000 years": lambda d: _log(d, end=T0 + 1000 * YEAR_S),
    "epoch seconds in ms": lambda d: _log(d, start=T0 / 1000, end=T0 * 1000),
    "a clock never set": lambda d: _log(d, start=3600.0, end=3700.0),
    # duplicates and mixed jobs
    "the same log twice": _same_log_twice,
    "two MPI jobs in one folder": _two_mpi_jobs,
    "two local runs 31 s apart": _two_logs_apart,
    # hostile and non-UTF-8 names
    "a name with HTML": lambda d: _log(d, files=[DxtFile("/d/<script>x</script>", _segments())]),
    "a name with a newline": lambda d: _log(d, files=[DxtFile("/d/a\nb", _segments())]),
    "a log name with spaces and quotes": lambda d: _log(d, name="my 'job' \"1\".darshan"),
    "a log name not UTF-8": lambda d: _log(d, name="job-\udcff.darshan"),
    # DFTracer: a real trace, edited
    "DFTracer: negative durations": lambda d: _trace(
        d, _set("dur", lambda v: -v - 10, slice(0, 3))
    ),
    "DFTracer: one event 20,000 times": lambda d: _trace(d, _repeat(20_000)),
    "DFTracer: a ts in ns": lambda d: _trace(d, _set("ts", lambda v: v * 1000)),
    "DFTracer: cut mid-line": lambda d: _trace(d, lambda ls: [*ls[:-1], ls[-1][:20]]),
    "DFTracer: garbage lines": lambda d: _trace(d, lambda ls: ls[:50] + ["{nope"] * 5 + ls[50:]),
    "DFTracer: no end event": lambda d: _trace(d, lambda ls: [x for x in ls if '"end"' not in x]),
}


# hostile but whole: read as any log (checked for figures, and for not breaking anything)
WHOLE = {"a name with HTML", "a name with a newline", "a log name with spaces and quotes",
         "a log name not UTF-8"}  # fmt: skip


# possible (threads at once sum their calls' times past the run), so not damage: the rule
# that would state a share of the run says why it cannot
CHECKED = {"read time 50x the run": "io_bound"}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[list[dict], list[dict]]]:
    """Per case: (the issues of every store, the summaries), all cases built once; the
    analyses' folders are ``<root>/out*``."""
    root = tmp_path_factory.mktemp("damaged")
    out: dict[str, tuple[list[dict], list[dict]]] = {}
    for i, (name, build) in enumerate(CASES.items()):
        d = root / f"in{i}"
        build(d)
        stores = ingest_jobs([d], root / f"store{i}")
        summaries = [
            analyze_run(s, root / f"out{i}-{k}", AnalysisSettings())
            for k, (s, _) in enumerate(stores)
        ]
        out[name] = ([vars(x) for _, m in stores for x in m.issues], summaries)
    out[ROOT] = ([], [{"root": str(root)}])
    return out


ROOT = "(where)"


def test_the_report_of_every_damaged_input_renders_without_an_impossible_word(outcomes):
    # one report over all the cases' analyses (the sweep's page): no traceback, and no figure
    # it prints from one of them is a negative time or a share above 100%
    from iosweep.report import render_report

    root = Path(outcomes[ROOT][1][0]["root"])
    dirs = sorted(root.glob("out*"))
    html = render_report(dirs, None, root / "report.html").read_text()
    assert len(dirs) >= len(CASES)
    assert "Traceback" not in html and "nan" not in html.split("<script")[0].lower().split()
    for bad in ("-0 s", "4950", "NaN%"):  # (the issues name the impossible values they saw)
        assert bad not in html, bad


def test_there_are_at_least_40_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", [c for c in CASES])
def test_each_damaged_input_ends_in_a_named_issue_and_no_impossible_figure(outcomes, case):
    issues, summaries = outcomes[case]
    assert summaries, case
    for sm in summaries:
        assert impossible_figures(sm) == [], case
        assert all(c["reason"] for c in sm["checks"])
    if case in WHOLE:
        return  # (hostile but whole: read as any log, checked for figures above)
    if case in CHECKED:  # no damage to name, but a rule that says what it cannot state
        cid = CHECKED[case]
        assert [c["outcome"] for c in summaries[0]["checks"] if c["id"] == cid] == ["not-checked"]
        return
    named = [i for sm in summaries for i in sm["issues"]] + issues
    kinds = {i["kind"] for i in named}
    assert kinds & {"corrupt", "implausible", "truncated", "unreadable", "mixed-jobs",
                    "duplicate-log", "missing-events", "empty"}, (case, kinds)  # fmt: skip
