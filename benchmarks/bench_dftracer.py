"""Benchmark: DFTracer traces of millions of events, iosweep beside dftracer-analyzer.

1. Generates (in a temporary directory; nothing large is committed) the traces of a
   data-parallel ImageNet-style job in DFTracer 2.2.0's own format, made from the real
   traces of ``../shared/data/imagenet-style-resnet50-h100/dftracer8``: each rank is that
   run's main process (its ``preload`` trace), each loader worker one of its 8 forked
   workers (``fork`` traces, replayed ``--reps`` times one after the other), with new pids
   (workers name their rank as ``ppid``), every file renamed so that every file is distinct
   (its ``FH`` name and hash), ids and timestamps shifted; ``ranks/rank-R.json`` as the
   workflow writes them. Every line keeps the fixture's form (see
   ``tests/test_dftracer_log.py``, which checks that a generated trace and its template
   read the same).
2. Times ``iosweep ingest`` + ``iosweep analyze`` and, when its command is found
   (``--dfanalyzer``, default ``dfanalyzer`` on PATH), ``dfanalyzer`` with one Dask worker,
   twice: the first run builds its index, the second reuses it. Each in a fresh process
   tree; wall time and the peak of the tree's summed RSS (sampled every 0.1 s: Dask and
   iosweep's readers run in child processes).
3. Checks that both count the same POSIX events and bytes, and prints events/s.
4. Times ``iosweep ingest --workers 1`` against its floor, measured as bench_ingest.py
   measures the Darshan path's: (a) every trace read and gunzipped, nothing parsed; (b) the
   store's tables written again with the same compression and row groups; and (a') the text
   also parsed into the columns ingest reads by pyarrow's JSON reader (ingest's own schema):
   for a text format, bytes "turned into the same columns" (the issue's floor) is a parse.
5. Times reading alone, one process each, every trace in turn: iosweep's reader (gunzip and
   pyarrow's bulk JSON parse) and, in dftracer-analyzer's environment, dftracer-utils'
   ``TraceReader`` (simdjson) into Arrow; each says how many lines it made rows of.

dftracer-analyzer wants its own environment (it pins dask and pandas)::

    python3 -m venv /tmp/dfa && /tmp/dfa/bin/pip install dftracer-analyzer==0.0.9 dftracer-utils==0.0.12

Usage: python benchmarks/bench_dftracer.py [--events 1e6 1e7] [--ranks 8] [--workers 8]
           [--dfanalyzer /tmp/dfa/bin/dfanalyzer] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("IOSWEEP_SHARED") or REPO.parent / "shared")
FIXTURE = SHARED / "data" / "imagenet-style-resnet50-h100" / "dftracer8"
HOST = "benchnode"

_FH = re.compile(r'^(.*"name":")([^"]*)(","value":")([0-9a-f]{16})(".*)$')
_EVENT = re.compile(r'^\{"id":(\d+),(.*"ts":)(\d+)(.*)$')
_FHASH = re.compile(r'^(.*"fhash":")([0-9a-f]{16})(".*)$')
_PPID = re.compile(r'"ppid":\d+')


@dataclass
class Template:
    """One real trace, cut into the pieces that change from copy to copy."""

    pid: int
    head: list[str]  # HH, thread_name, CM, start: once per trace
    body: list[tuple]  # ("fh", a, name, b, hash, c) | ("ev", id, a, ts, b, hash, c)
    tail: list[str]  # the "end" record
    span_us: int  # from the first to the last event, for replays one after the other
    events: int  # POSIX and STDIO events in the body


def _pid_of(path: Path) -> int:
    with gzip.open(path, "rt") as f:
        return int(json.loads(f.readline())["pid"])


def read_template(path: Path) -> Template:
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    pid = _pid_of(path)
    head, body, tail, ts = [], [], [], []
    for line in lines:
        if '"name":"end","cat":"dftracer"' in line:
            tail.append(line)
        elif not body and (
            ('"ph":4' in line and '"name":"FH"' not in line) or '"name":"start"' in line
        ):
            head.append(line)
        elif (m := _FH.match(line)) and '"name":"FH"' in line:
            body.append(("fh", *m.groups()))
        elif m := _EVENT.match(line):
            ts.append(int(m.group(3)))
            rest = _FHASH.match(m.group(4))
            parts = rest.groups() if rest else (m.group(4), "", "")
            body.append(("ev", int(m.group(1)), m.group(2), int(m.group(3)), *parts))
        else:
            body.append(("raw", line))
    events = sum(
        1 for b in body if b[0] == "ev" and ('"cat":"POSIX"' in b[2] or '"cat":"STDIO"' in b[2])
    )
    span = (max(ts) - min(ts) + 1000) if ts else 0
    return Template(pid, head, body, tail, span, events)


def _repid(text: str, old: int, new: int, ppid: int | None) -> str:
    text = text.replace(f'"pid":{old},"tid":{old}', f'"pid":{new},"tid":{new}')
    text = text.replace(
        f'"name":"{old}","value":"thread_name"', f'"name":"{new}","value":"thread_name"'
    )
    text = text.replace('"name":"vm"', f'"name":"{HOST}"')
    return _PPID.sub(f'"ppid":{ppid}', text) if ppid is not None else text


def write_trace(job: tuple) -> int:
    """One generated trace (a pool task): ``reps`` replays of ``template`` as process ``pid``."""
    t, out, pid, ppid, reps, tag = job
    n_body = len(t.body)
    hashes: dict[str, int] = {}
    lines: list[str] = []
    for rep in range(reps):
        shift, id0 = rep * t.span_us, rep * n_body
        base = (tag * 4096 + rep) << 24
        for b in t.body:
            if b[0] == "fh":
                _, a, name, mid, h, c = b
                new = base + hashes.setdefault(h, len(hashes))
                name = name.replace("/tmp/data/", f"/tmp/data/g{tag}-{rep}/", 1)
                lines.append(f"{a}{name}{mid}{new:016x}{c}")
            elif b[0] == "ev":
                _, i, a, ts, pre, h, c = b
                h = f"{base + hashes.setdefault(h, len(hashes)):016x}" if h else ""
                lines.append(f'{{"id":{i + id0},{a}{ts + shift}{pre}{h}{c}')
            else:
                lines.append(b[1])
    # the header names the host, the thread and the parent; every other line only the pid
    body = "\n".join([*lines, *t.tail]) + "\n"
    body = body.replace(f'"pid":{t.pid},"tid":{t.pid}', f'"pid":{pid},"tid":{pid}')
    with gzip.open(out, "wt", compresslevel=1) as f:
        f.writelines(_repid(h, t.pid, pid, ppid) + "\n" for h in t.head)
        f.write(body)
    return t.events * reps


def generate(out: Path, events: float, ranks: int, workers: int, processes: int = 2) -> dict:
    """The traces of ``ranks`` ranks x ``workers`` loader workers, about ``events`` events."""
    traces = sorted((FIXTURE / "traces").glob("*.pfw.gz"))
    main = read_template(next(p for p in traces if "preload" in p.name))
    forks = [read_template(p) for p in traces if "fork" in p.name]
    per_worker = sum(f.events for f in forks) / len(forks)
    reps = max(1, round((events - ranks * main.events) / (ranks * workers * per_worker)))
    jobs = []
    d = out / "traces"  # one folder: dfanalyzer reads the traces directly in trace_path
    d.mkdir(parents=True)
    for r in range(ranks):
        rank_pid = 100_000 + r * 1000
        jobs.append((main, d / f"trace-{r:08x}00000000-preload.pfw.gz", rank_pid, None, 1, r * 64))
        for w in range(workers):
            t = forks[w % len(forks)]
            f = d / f"trace-{r:08x}{w + 1:08x}-fork.pfw.gz"
            jobs.append((t, f, rank_pid + 1 + w, rank_pid, reps, r * 64 + 1 + w))
        (out / "ranks").mkdir(exist_ok=True)
        info = {"rank": r, "local_rank": r, "size": ranks, "pid": rank_pid, "host": HOST}
        (out / "ranks" / f"rank-{r}.json").write_text(json.dumps(info))
    with Pool(processes) as pool:
        n = sum(pool.map(write_trace, jobs))
    size = sum(p.stat().st_size for p in (out / "traces").rglob("*.pfw.gz"))
    return {"events": n, "traces": len(jobs), "reps": reps, "gz_bytes": size}


# ---------------------------------------------------------------------------------------
# measuring a process tree
# ---------------------------------------------------------------------------------------


def _tree_rss(root: int) -> int:
    """Summed RSS (bytes) of ``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for st in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = st.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(st.parent.name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


def measure(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> dict:
    # the output goes to a file: a pipe read only at the end stalls a talkative child (seen:
    # dftracer-utils logging one line per trace filled it and the child waited for ever)
    with tempfile.TemporaryFile("w+") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.1)
        wall = time.perf_counter() - t0
        log.seek(0)
        out = log.read()
    return {"wall_s": wall, "peak": peak, "rc": proc.returncode, "out": out}


# ---------------------------------------------------------------------------------------
# the tools
# ---------------------------------------------------------------------------------------


def run_iosweep(work: Path) -> dict:
    bin_dir = Path(sys.executable).parent
    ing = measure([str(bin_dir / "iosweep"), "ingest", str(work), "-o", str(work / "store")])
    ana = measure([str(bin_dir / "iosweep"), "analyze", str(work / "store"), "-o", str(work / "analysis")])  # fmt: skip
    if ing["rc"] or ana["rc"]:
        raise SystemExit(f"iosweep failed:\n{ing['out'][-2000:]}\n{ana['out'][-2000:]}")
    sm = json.loads((work / "analysis" / "summary.json").read_text())
    h = sm["headline"]
    # a second look at the same, unchanged traces: the store is reused, the analysis redone
    again = measure([str(bin_dir / "iosweep"), "ingest", str(work), "-o", str(work / "store")])
    ana2 = measure([str(bin_dir / "iosweep"), "analyze", str(work / "store"), "-o", str(work / "analysis")])  # fmt: skip
    return {
        "ingest": ing,
        "analyze": ana,
        "rerun": {
            "wall_s": again["wall_s"] + ana2["wall_s"],
            "peak": max(again["peak"], ana2["peak"]),
        },
        "bytes": int(h["bytes_read"] or 0) + int(h["bytes_written"] or 0),
        "events": _store_events(work / "store"),
    }


def _store_events(store: Path) -> int:
    """POSIX and STDIO events in the store: data operations are segments, the others
    (open, lseek, close, ...) app events of those categories."""
    seg = pq.read_table(store / "segments.parquet", columns=["module"])
    app = pq.read_table(store / "app_events.parquet", columns=["cat"])
    io = pc.is_in(app["cat"].cast("string"), value_set=pa.array(["POSIX", "STDIO"]))
    return seg.num_rows + int(pc.sum(io).as_py() or 0)


def _dfa_value(out: str, metric: str) -> float | None:
    m = re.search(rf"{re.escape(metric)}\s*│[^│]*│\s*([\d,.]+)", out)
    return float(m.group(1).replace(",", "")) if m else None


def run_dfanalyzer(exe: str, work: Path) -> dict:
    env = {**os.environ, "USER": os.environ.get("USER", "bench")}
    cmd = [exe, "analyzer=dftracer", "analyzer/preset=posix",
           f"trace_path={work / 'traces'}", "cluster.n_workers=1"]  # fmt: skip
    runs = [measure(cmd, env, cwd=work) for _ in range(2)]
    for r in runs:
        if r["rc"]:
            raise SystemExit(f"dfanalyzer failed:\n{r['out'][-3000:]}")
        r["count"] = _dfa_value(r["out"], "POSIX - All Count")
        r["mb"] = _dfa_value(r["out"], "POSIX - All Size")
        r["files"] = _dfa_value(r["out"], "Total Files")
    return {"first": runs[0], "reused": runs[1]}


# Reading alone, one process each, every generated trace in turn: iosweep's gunzip + bulk
# JSON parse into its normalised Arrow table, and dftracer-utils' TraceReader (simdjson) into
# Arrow record batches with the args flattened. Each prints the rows (event lines) it made.
_IOSWEEP_READ = """
import glob, sys
from pathlib import Path
from iosweep.trace.dftracer.decode import gunzip, parse_lines, split_lines
rows = bad = 0
for f in sorted(glob.glob(sys.argv[1] + "/*.pfw.gz")):
    text, problem, _ = gunzip(Path(f).read_bytes())
    lines, cut = split_lines(text)
    table, wrong = parse_lines(lines)
    rows += table.num_rows
    bad += len(wrong) + (problem is not None) + (cut is not None)
print("rows", rows, "damaged", bad)
"""
_DFU_READ = """
import glob, sys
import pyarrow as pa
from dftracer.utils.trace_reader import TraceReader
rows = 0
for f in sorted(glob.glob(sys.argv[1] + "/*.pfw.gz")):
    for batch in TraceReader(f).iter_arrow(batch_size=65536, flatten_objects=True):
        rows += pa.record_batch(batch).num_rows
print("rows", rows)
"""

# dftracer-utils >= 0.0.13 (the one DFTracer 2.2.0 installs, in iosweep's environment) has no
# TraceReader; its query engine reads a trace with ``source(...).collect()``.
_DUQL_READ = """
import glob, sys
from dftracer.utils.duql import source
rows = 0
for f in sorted(glob.glob(sys.argv[1] + "/*.pfw.gz")):
    rows += source(f).collect().to_arrow().num_rows
print("rows", rows)
"""


# the floor, as bench_ingest.py measures it for Darshan logs: (a) every trace read and
# gunzipped (every member), nothing parsed; (b) the store's tables written again
_GUNZIP = """
import glob, sys, zlib
total = 0
for f in sorted(glob.glob(sys.argv[1] + "/*.pfw.gz")):
    rest = open(f, "rb").read()
    while rest:  # one gzip member after another
        d = zlib.decompressobj(wbits=31)
        total += len(d.decompress(rest))
        rest = d.unused_data
print("INFLATED", total)
"""


# (a'): (a), and the text parsed into the columns ingest reads, by pyarrow's JSON reader with
# ingest's own schema and threads: the floor (bytes "turned into the same columns")
# for a text format. The fastest parse of those tried, on 4 of these traces (719 k events),
# the same fields: polars' read_ndjson (schema given) took 1.12x its time on one thread and
# 1.15x on two; msgspec (typed structs, then the columns) 1.7x on one.
_PARSE = """
import glob, sys, zlib
import pyarrow as pa, pyarrow.json as pj
from iosweep.trace.dftracer.decode import explicit_schema
schema, rows = explicit_schema(pa.int64()), 0
for f in sorted(glob.glob(sys.argv[1] + "/*.pfw.gz")):
    rest, text = open(f, "rb").read(), []
    while rest:
        d = zlib.decompressobj(wbits=31)
        text.append(d.decompress(rest))
        rest = d.unused_data
    rows += pj.read_json(
        pa.BufferReader(b"".join(text)),
        read_options=pj.ReadOptions(block_size=1 << 23),
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    ).num_rows
print("rows", rows)
"""


def run_floor(work: Path) -> dict:
    """``iosweep ingest --workers 1`` and the floor it is held to (see _GUNZIP)."""
    from bench_ingest import REWRITE

    bin_dir = Path(sys.executable).parent
    store = work / "store-w1"
    one = measure([str(bin_dir / "iosweep"), "ingest", str(work), "-o", str(store), "--workers", "1", "--force"])  # fmt: skip
    gunzip = measure([sys.executable, "-c", _GUNZIP, str(work / "traces")])
    parse = measure([sys.executable, "-c", _PARSE, str(work / "traces")])
    again = work / "rewrite"
    shutil.rmtree(again, ignore_errors=True)
    again.mkdir()
    rewrite = measure([sys.executable, "-c", REWRITE, str(store), str(again)])
    shutil.rmtree(again, ignore_errors=True)
    for name, m in (("ingest --workers 1", one), ("gunzip", gunzip), ("parse", parse), ("rewrite", rewrite)):  # fmt: skip
        if m["rc"]:
            raise SystemExit(f"{name} failed:\n{m['out'][-2000:]}")
    # the rewrite's own time: its reading the store first is no part of the floor
    found = re.search(r"^MEASURED (\{.*\})", rewrite["out"], re.M)
    rewrite["wall_s"] = json.loads(found.group(1))["wall_s"] if found else rewrite["wall_s"]
    floor = {"wall_s": gunzip["wall_s"] + rewrite["wall_s"], "peak": 0}
    parsed = {"wall_s": parse["wall_s"] + rewrite["wall_s"], "peak": 0}
    return {
        "one": one,
        "gunzip": gunzip,
        "parse": parse,
        "rewrite": rewrite,
        "floor": floor,
        "parsed": parsed,
    }


def _has_duql() -> bool:
    try:
        import dftracer.utils.duql  # noqa: F401
    except ImportError:
        return False
    return True


def run_readers(work: Path, dfa_exe: str | None) -> dict:
    """Time the readers over the same traces (see _IOSWEEP_READ)."""
    traces = str(work / "traces")
    out = {"iosweep": measure([sys.executable, "-c", _IOSWEEP_READ, traces])}
    dfa_python = Path(dfa_exe).with_name("python") if dfa_exe else None
    if dfa_python is not None and dfa_python.exists():
        out["dftracer-utils TraceReader (dfanalyzer's env)"] = measure(
            [str(dfa_python), "-c", _DFU_READ, traces]
        )
    if _has_duql():
        out["dftracer-utils duql (iosweep's env)"] = measure(
            [sys.executable, "-c", _DUQL_READ, traces]
        )
        # duql leaves its index beside the traces; dftracer-utils 0.0.12 (dfanalyzer's) then
        # reads every trace as empty, without a word (seen: 0 rows). The next runs need none.
        shutil.rmtree(work / "traces" / ".dftindex", ignore_errors=True)
    for name, m in out.items():
        if m["rc"]:
            raise SystemExit(f"{name} reader failed:\n{m['out'][-2000:]}")
        found = re.search(r"^rows (\d+)", m["out"], re.M)
        m["rows"] = int(found.group(1)) if found else None
    return out


def _row(name: str, m: dict, events: int) -> str:
    rate = events / m["wall_s"] if m["wall_s"] else 0
    return f"| {name} | {m['wall_s']:.1f} s | {rate / 1e3:,.0f} k events/s | {m['peak'] / 2**30:.2f} GiB |"


def bench(n: float, args, root: Path) -> dict:
    """One size: the table; returns iosweep's figures for the scaling line."""
    work = root / f"events-{int(n)}"
    t = time.perf_counter()
    made = generate(work, n, args.ranks, args.workers)
    print(f"\n## {made['events']:,} POSIX/STDIO events in {made['traces']} traces "
          f"({made['gz_bytes'] / 1e6:.0f} MB gzipped), generated in {time.perf_counter() - t:.0f} s")  # fmt: skip
    ev = made["events"]
    ours = run_iosweep(work)
    both = {
        "ingest+analyze": {
            "wall_s": ours["ingest"]["wall_s"] + ours["analyze"]["wall_s"],
            "peak": max(ours["ingest"]["peak"], ours["analyze"]["peak"]),
        }
    }
    print("| tool | wall | rate | peak memory (process tree) |\n|---|---:|---:|---:|")
    print(_row("iosweep ingest", ours["ingest"], ev))
    print(_row("iosweep analyze", ours["analyze"], ev))
    print(_row("iosweep ingest + analyze", both["ingest+analyze"], ev))
    print(_row("iosweep again, logs unchanged (store reused) + analyze", ours["rerun"], ev))
    fl = run_floor(work)
    print(_row("iosweep ingest --workers 1", fl["one"], ev))
    print(_row("floor (a): read + gunzip every trace", fl["gunzip"], ev))
    print(_row("floor (b): write the store's tables again", fl["rewrite"], ev))
    print(_row("floor (a + b)", fl["floor"], ev))
    print(_row("floor (a'): (a) and parsed into ingest's columns by pyarrow.json", fl["parse"], ev))
    print(_row("floor (a' + b)", fl["parsed"], ev))
    print(f"ingest (1 worker) / floor: {fl['one']['wall_s'] / fl['floor']['wall_s']:.2f}; "
          f"ingest (default workers) / floor: {ours['ingest']['wall_s'] / fl['floor']['wall_s']:.2f}; "
          f"ingest (1 worker) / floor with the parse: {fl['one']['wall_s'] / fl['parsed']['wall_s']:.2f}")  # fmt: skip
    scale = {"events": ev, "ingest": ours["ingest"]["wall_s"], "analyze": ours["analyze"]["wall_s"]}
    exe = args.dfanalyzer or shutil.which("dfanalyzer")
    have_dfa = bool(exe and Path(exe).exists())
    for name, m in run_readers(work, exe if have_dfa else None).items():
        print(_row(f"reading only, one process: {name} (rate in lines)", m, m["rows"] or 0))
    if not have_dfa:
        print("dftracer-analyzer: not installed (see this script's docstring)")
        return scale
    assert exe is not None
    dfa = run_dfanalyzer(exe, work)
    print(_row("dftracer-analyzer, first run (builds its index)", dfa["first"], ev))
    print(_row("dftracer-analyzer, index reused", dfa["reused"], ev))
    ia = both["ingest+analyze"]["wall_s"]
    print(f"ratios: dftracer-analyzer / iosweep wall: first {dfa['first']['wall_s'] / ia:.2f}x, "
          f"reused / iosweep again {dfa['reused']['wall_s'] / ours['rerun']['wall_s']:.2f}x; peak memory: "
          f"first {dfa['first']['peak'] / max(both['ingest+analyze']['peak'], 1):.2f}x, "
          f"reused {dfa['reused']['peak'] / max(both['ingest+analyze']['peak'], 1):.2f}x")  # fmt: skip
    print(f"check: iosweep {ours['bytes'] / 2**20:,.3f} MiB moved; dftracer-analyzer "
          f"{dfa['first']['mb']} / {dfa['reused']['mb']} MB (its MB are MiB); "
          f"POSIX/STDIO events: iosweep {ours['events']:,}, dftracer-analyzer "
          f"{dfa['first']['count']:,.0f} / {dfa['reused']['count']:,.0f}; "
          f"files {dfa['first']['files']:,.0f} / {dfa['reused']['files']:,.0f}")  # fmt: skip
    return scale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=float, nargs="+", default=[1e6, 1e7])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--dfanalyzer", help="the dfanalyzer command (default: on PATH)")
    p.add_argument("--keep", type=Path, help="keep the generated traces here")
    args = p.parse_args(argv)
    if not FIXTURE.is_dir():
        raise SystemExit(f"the template traces are missing: {FIXTURE}")
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-dftracer-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        sizes = [bench(n, args, root) for n in args.events]
        for a, b in itertools.pairwise(sizes):
            print(f"\nscaling: events x{b['events'] / a['events']:.1f}, iosweep ingest "
                  f"x{b['ingest'] / a['ingest']:.1f}, analyze x{b['analyze'] / a['analyze']:.1f}")  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
