"""Benchmark: analysing a whole ImageNet training run's trace, 10 M to 100 M segments.

For each size, a synthetic ImageNet-shaped run (``iosweep.testing.imagenet_trace``: 1.28 M
JPEG files, 32 ranks x 8 loader workers, each file read once per epoch by one rank, 4 reads a
file; the epochs scaled to the size) is streamed to disk as a trace store; then
``iosweep analyze`` runs on it in a fresh interpreter. Printed per size: the store's bytes on
disk per segment, the analysis's wall time, its peak RSS (``VmHWM``) and both per segment,
beside the need ``iosweep.analysis.budget`` counts from the store before it starts. A size
over the budget (``--memory-gb``, default: the machine's) is refused by the analysis, and the
table says so with the need it named.

The store is written directly, not ingested from Darshan logs: ingest is not timed here.

Usage: python benchmarks/bench_segments_scale.py [--sizes 10,30,100] [--files 1281000]
           [--ranks 32] [--workers 8] [--memory-gb G] [--keep DIR]
(sizes in millions of segments; with --keep, stores already there are reused)
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from iosweep.analysis import budget
from iosweep.testing.imagenet_trace import epochs_for, write_imagenet_store
from iosweep.trace.store import RUN_JSON

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
    r = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    out = json.loads(next(x for x in reversed(lines) if x.startswith("MEASURED "))[9:])
    out["rc"] = r.returncode
    said = [x for x in lines if x.startswith("iosweep analyze:")]
    out["said"] = said[-1] if said else ""
    return out


def store_of(base: Path, millions: float, a: argparse.Namespace) -> tuple[Path, float | None]:
    """The store of that size (written now, or found from an earlier --keep), and the
    seconds it took to write (None when reused)."""
    epochs = epochs_for(int(millions * 1e6), a.files)
    store = base / f"imagenet-{a.files}f-{a.ranks}r-{a.workers}w-{epochs}e"
    if (store / RUN_JSON).exists():
        return store, None
    t = time.perf_counter()
    write_imagenet_store(store, a.files, a.ranks, a.workers, epochs)
    return store, time.perf_counter() - t


def one(base: Path, millions: float, a: argparse.Namespace) -> dict:
    store, wrote = store_of(base, millions, a)
    need = budget.need_of(store)
    disk = sum(f.stat().st_size for f in store.glob("*.parquet"))
    out = base / "analysis" / store.name
    shutil.rmtree(out, ignore_errors=True)
    argv = ["analyze", str(store), "-o", str(out)]
    if a.memory_gb:
        argv += ["--memory-gb", str(a.memory_gb)]
    res = measured(argv)
    return {
        "segments": need.segments,
        "counter_records": need.counter_records,
        "written_s": wrote,
        "store_bytes": disk,
        "need_gib": need.gib,
        "budget_gib": budget.budget_bytes(a.memory_gb) / GIB,
        **res,
    }


def line(r: dict) -> str:
    n = r["segments"]
    head = (
        f"| {n / 1e6:6.1f} M | {r['counter_records'] / 1e6:5.1f} M | {r['store_bytes'] / 2**20:7.0f} MiB "
        f"| {r['store_bytes'] / n:5.1f} | {r['need_gib']:5.1f} GiB |"
    )
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
    ap.add_argument("--keep", type=Path, help="work here (and reuse stores found here)")
    a = ap.parse_args()
    print(
        "| segments | counter records | store | B/segment on disk | need counted | analyse "
        "| peak RSS | peak/segment | time/segment |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="iosweep-scale-") as tmp:
        base = a.keep or Path(tmp)
        for millions in (float(x) for x in a.sizes.split(",")):
            r = one(base, millions, a)
            print(line(r), flush=True)
            print(json.dumps(r), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
