"""Benchmark: analysing a whole ImageNet training run's trace, 10 M to 100 M segments.

For each size, a synthetic ImageNet-shaped run (``iosweep.testing.imagenet_trace``: 1.28 M
JPEG files, 32 ranks x 8 loader workers, each file read once per epoch by one rank, 4 reads a
file; the epochs scaled to the size) is streamed to disk as a trace store; then
``iosweep analyze`` runs on it in a fresh interpreter. Printed per size: the store's bytes on
disk per segment, the analysis's wall time, its peak RSS (``VmHWM``) and both per segment,
beside the need ``iosweep.analysis.budget`` counts from the store before it starts. A size
over the budget (``--memory-gb``, default: the machine's) is refused by the analysis, and the
table says so with the need it named. With ``--some-ranks 0-1 --some-ranks 0-7`` the largest
size is also analysed a few ranks at a time (``iosweep analyze --ranks``), a row per set of
ranks: their segments, need, time and peak. With ``--in-parts`` every size is analysed in parts
of whole ranks that fit the budget (``iosweep analyze --in-parts``), put together into the
whole run's analysis: the budget then bounds the peak, whatever the size; ``--jobs N`` parts at
a time (iosweep's default: one a CPU), each in its own process, the peak then the most the
process tree held at once (sampled every 50 ms) or the largest part's own, whichever is more.

The store is written directly, unless ``--ingest``: then the run is written as the workflow's
run directory of real-format Darshan logs (``write_imagenet_logs``: a log per loader worker and
epoch), ``iosweep ingest`` makes the store (timed, with its peak RSS) and the analysis runs on
that store.

Usage: python benchmarks/bench_segments_scale.py [--sizes 10,30,100] [--files 1281000]
           [--ranks 32] [--workers 8] [--memory-gb G] [--in-parts [--jobs N]] [--some-ranks 0-1]...
           [--ingest] [--keep DIR]
(sizes in millions of segments; with --keep, stores already there are reused)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from iosweep.analysis import budget, subset
from iosweep.testing.imagenet_trace import epochs_for, write_imagenet_logs, write_imagenet_store
from iosweep.trace.store import RUN_JSON, open_store

GIB = 1 << 30
# Runs the iosweep command; at exit prints its wall time and VmHWM (its own peak: a child's
# ru_maxrss would carry the parent's over fork + exec).
CHILD = """
import atexit, json, sys, time
t = time.perf_counter()
def done():
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
    print("MEASURED " + json.dumps({"wall_s": time.perf_counter() - t, "peak": hwm * 1024}),
          file=sys.stderr)
atexit.register(done)
from iosweep.cli import main
sys.argv = ["iosweep", *sys.argv[1:]]
sys.exit(main())
"""


def measured(argv: list[str]) -> dict:
    """The command's wall time, exit code, last ``iosweep analyze:`` line and peak memory:
    its own VmHWM, or with parts analysed in processes of their own (``--in-parts --jobs``)
    the most its process tree held at once, sampled every 50 ms (``peak``; ``peak_parts``:
    the largest part's own VmHWM)."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, *argv], stderr=subprocess.PIPE, text=True)
    tree = [0]
    sampler = threading.Thread(target=_sample_tree, args=(p, tree), daemon=True)
    sampler.start()
    _, err = p.communicate()
    sampler.join()
    lines = err.strip().splitlines()
    out = json.loads(next(x for x in reversed(lines) if x.startswith("MEASURED "))[9:])
    out["rc"] = p.returncode
    said = [x for x in lines if x.startswith("iosweep analyze:")]
    out["said"] = said[-1] if said else ""
    parts = [float(m.group(1)) * GIB for x in lines if (m := PART_PEAK.search(x))]
    out["parts_at_once"] = next((int(m.group(1)) for x in lines if (m := AT_ONCE.match(x))), 1)
    out["put_together_s"] = next(
        (float(m.group(1)) for x in lines if (m := TOGETHER.match(x))), None
    )
    if out["parts_at_once"] > 1:
        out |= {"peak_own": out["peak"], "peak_tree": tree[0], "peak_parts": max(parts)}
        out["peak"] = max(out["peak"], tree[0], max(parts))
    return out


PART_PEAK = re.compile(r"^part \d+/\d+: .* peak ([\d.]+) GiB")
AT_ONCE = re.compile(r"^parts: \d+, (\d+) at a time")
TOGETHER = re.compile(r"^put together from \d+ parts in ([\d.]+) s")


def _sample_tree(p: subprocess.Popen, peak: list[int]) -> None:
    """``peak[0]``: the most resident memory ``p`` and its descendants held at once, sampled."""
    while p.poll() is None:
        peak[0] = max(peak[0], sum(_rss(pid) for pid in _tree(p.pid)))
        time.sleep(0.05)


def _tree(root: int) -> list[int]:
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    pids, frontier = [root], [root]
    while frontier:
        frontier = [c for c, pp in parent.items() if pp in frontier]
        pids += frontier
    return pids


def _rss(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next(
        (int(x.split()[1]) * 1024 for x in status.splitlines() if x.startswith("VmRSS:")), 0
    )


def store_of(
    base: Path, millions: float, a: argparse.Namespace, reuse: bool = False
) -> tuple[Path, dict]:
    """The store of that size, written now or found from an earlier --keep (directly, or
    ingested from Darshan logs with --ingest; an ingested store is reused only if ``reuse``),
    and how it was made."""
    epochs = epochs_for(int(millions * 1e6), a.files)
    name = f"imagenet-{a.files}f-{a.ranks}r-{a.workers}w-{epochs}e"
    if not a.ingest:
        store = base / name
        if (store / RUN_JSON).exists():
            return store, {"written_s": None}
        t = time.perf_counter()
        write_imagenet_store(store, a.files, a.ranks, a.workers, epochs)
        return store, {"written_s": time.perf_counter() - t}
    logs, store = base / f"logs-{name}", base / f"ingested-{name}"
    made: dict[str, float | None] = {"written_s": None}
    if reuse and (store / RUN_JSON).exists():
        return store, made
    if not (logs / "manifest.json").exists():  # written last
        t = time.perf_counter()
        write_imagenet_logs(logs, a.files, a.ranks, a.workers, epochs)
        made["written_s"] = time.perf_counter() - t
    shutil.rmtree(store, ignore_errors=True)
    ingest = measured(["ingest", str(logs), "-o", str(store)])
    if ingest["rc"]:
        raise SystemExit(f"ingest of {logs} failed (exit {ingest['rc']})")
    made.update(ingest_s=ingest["wall_s"], ingest_peak=ingest["peak"])
    made["logs_bytes"] = sum(f.stat().st_size for f in logs.rglob("*.darshan"))
    return store, made


def one(base: Path, millions: float, a: argparse.Namespace, ranks: str | None = None) -> dict:
    """The analysis of the store of that size (only ``ranks`` of it, if given), measured."""
    store, made = store_of(base, millions, a, reuse=ranks is not None)
    chosen = subset.select(open_store(store), subset.parse_ranks(ranks)) if ranks else None
    need = budget.need_of(store, chosen)
    disk = sum(f.stat().st_size for f in store.glob("*.parquet"))
    out = base / "analysis" / store.name
    shutil.rmtree(out, ignore_errors=True)
    argv = ["analyze", str(store), "-o", str(out)] + (["--ranks", ranks] if ranks else [])
    if a.memory_gb:
        argv += ["--memory-gb", str(a.memory_gb)]
    if a.in_parts and not ranks:
        argv += ["--in-parts"] + (["--jobs", str(a.jobs)] if a.jobs else [])
    res = measured(argv)
    return {
        "ranks": ranks,
        "ingested": a.ingest,
        "segments": need.segments,
        "counter_records": need.counter_records,
        **made,
        "store_bytes": disk,
        "need_gib": need.gib,
        "budget_gib": budget.budget_bytes(a.memory_gb) / GIB,
        **res,
    }


def line(r: dict) -> str:
    n = r["segments"]
    of = f", ranks {r['ranks']}" if r["ranks"] else ""
    per = "" if r["ranks"] else f"{r['store_bytes'] / n:5.1f}"  # the store is the whole run's
    head = (
        f"| {n / 1e6:6.1f} M{of} | {r['counter_records'] / 1e6:5.1f} M | {r['store_bytes'] / 2**20:7.0f} MiB "
        f"| {per} |"
    )
    if "ingest_s" in r:
        head += (
            f" {r['logs_bytes'] / n:5.1f} | {r['ingest_s']:7.1f} s | {r['ingest_peak'] / GIB:5.2f} GiB "
            f"| {r['ingest_peak'] / n:5.0f} B |"
        )
    elif r["ingested"]:  # some ranks of a store ingested for the row above
        head += " | | | |"
    head += f" {r['need_gib']:5.1f} GiB |"
    if r["rc"]:
        why = "over the budget" if "need about" in r["said"] else r["said"][-120:]
        return f"{head} refused in {r['wall_s']:.1f} s ({why}: {r['budget_gib']:.1f} GiB) | {r['peak'] / GIB:5.2f} GiB | | |"
    return (
        f"{head} {r['wall_s']:7.1f} s | {r['peak'] / GIB:5.2f} GiB | {r['peak'] / n:5.0f} B "
        f"| {r['wall_s'] / n * 1e6:5.2f} µs |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,30,100", help="millions of segments, comma-separated")
    ap.add_argument("--files", type=int, default=1_281_000)
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--memory-gb", type=float, help="the analysis's budget (default: its own)")
    ap.add_argument(
        "--some-ranks",
        action="append",
        default=[],
        help="also analyse the largest size's ranks RANKS alone (as --ranks; repeatable)",
    )
    ap.add_argument(
        "--ingest", action="store_true", help="write Darshan logs and time ingest (see above)"
    )
    ap.add_argument(
        "--in-parts", action="store_true", help="analyse each size in parts (iosweep analyze)"
    )
    ap.add_argument(
        "--jobs", type=int, help="with --in-parts: parts at a time (default: iosweep's, a CPU each)"
    )
    ap.add_argument("--keep", type=Path, help="work here (and reuse stores found here)")
    a = ap.parse_args()
    sizes = [float(x) for x in a.sizes.split(",")]
    runs = [(m, None) for m in sizes]
    runs += [(max(sizes), r) for r in a.some_ranks]
    ingest = (
        " B/segment of logs | ingest | ingest peak RSS | ingest peak/segment |" if a.ingest else ""
    )
    cols = 9 + 4 * a.ingest
    print(
        "| segments | counter records | store | B/segment on disk |" + ingest + " need counted "
        "| analyse | peak RSS | peak/segment | time/segment |\n|" + "---:|" * cols,
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="iosweep-scale-") as tmp:
        base = a.keep or Path(tmp)
        for millions, ranks in runs:
            r = one(base, millions, a, ranks)
            print(line(r), flush=True)
            print(json.dumps(r), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
