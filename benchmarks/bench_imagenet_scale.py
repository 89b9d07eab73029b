"""Benchmark: the analysis and the report of an ImageNet-shaped run, at ImageNet's size.

1. Synthesises (seeded) the trace store of a data-parallel ResNet/ImageNet job as Darshan
   records it: 1,281,000 JPEG files in 1000 class folders, 32 ranks with 8 loader workers
   each (a new set of worker processes every epoch), 2 epochs; every epoch the sampler gives
   each rank another part of the files; each file is opened once per epoch by one worker and
   read as PIL reads a JPEG: 4 KiB at 0, 60 KiB, the rest, then 0 B at end of file (4 reads:
   10.25 M segments); Darshan's counters per (process, file); the manifest's steps (batch
   256, compute and wait timed apart); rank 0 saves a 100 MB checkpoint after each epoch.
2. Runs ``analyze_run`` and then ``render_report`` on it, each in a fresh subprocess, and
   prints their wall time, peak RSS, and the sizes of what they wrote (summary.json, every
   table, the report): the contract is under 60 s and 4 GiB for analyze + report on a 2-core
   machine, a report under 20 MB, and outputs bounded whatever the number of files.
3. With ``--baseline REV`` runs the same on the code of another revision (a git worktree),
   side by side, on the same store.

Usage: python benchmarks/bench_imagenet_scale.py [--files 1281000] [--ranks 32] [--workers 8]
           [--epochs 2] [--baseline REV] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from iosweep.testing.imagenet_trace import write_imagenet_store

REPO = Path(__file__).resolve().parents[1]


def synthesize(out: Path, files: int, ranks: int, workers: int, epochs: int, seed: int = 7) -> dict:
    """The run's store (iosweep.testing.imagenet_trace, streamed to disk); its shape."""
    return asdict(write_imagenet_store(out, files, ranks, workers, epochs, seed))


CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
t = time.perf_counter()
if sys.argv[2] == "analyze":
    from iosweep.analysis import analyze_run
    analyze_run(sys.argv[3], sys.argv[4])
else:
    from iosweep.report import render_report
    render_report([Path(sys.argv[3])], None, Path(sys.argv[4]))
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork + exec, so a child of a parent
# holding the synthesised store would report the parent's size
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"wall_s": time.perf_counter() - t, "peak_rss": hwm * 1024}))
"""


def _child(src: Path, what: str, a: Path, b: Path) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), what, str(a), str(b)],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        return {
            "error": r.stderr.strip().splitlines()[-1]
            if r.stderr.strip()
            else f"exit {r.returncode}"
        }
    return json.loads(r.stdout.strip().splitlines()[-1])


def _sizes(analysis: Path, report: Path) -> dict:
    import pyarrow.parquet as pq

    out = {"summary.json": (analysis / "summary.json").stat().st_size}
    for f in sorted(analysis.glob("*.parquet")):
        out[f.name] = pq.ParquetFile(f).metadata.num_rows
    out["report.html"] = report.stat().st_size if report.exists() else None
    return out


def measure(src: Path, store: Path, work: Path) -> dict:
    analysis, report = work / "analysis", work / "report" / "report.html"
    a = _child(src, "analyze", store, analysis)
    r = _child(src, "report", analysis, report) if "error" not in a else {"error": "no analysis"}
    res = {"analyze": a, "report": r}
    if "error" not in r:
        res["sizes"] = _sizes(analysis, report)
    return res


def _line(name: str, res: dict) -> str:
    a, r = res["analyze"], res["report"]
    if "error" in a or "error" in r:
        return f"{name:>10}: failed: {a.get('error') or r.get('error')}"
    total = a["wall_s"] + r["wall_s"]
    peak = max(a["peak_rss"], r["peak_rss"]) / 2**30
    return (
        f"{name:>10}: analyze {a['wall_s']:6.1f} s, {a['peak_rss'] / 2**30:4.2f} GiB | report {r['wall_s']:5.1f} s, "
        f"{r['peak_rss'] / 2**30:4.2f} GiB | total {total:6.1f} s, peak {peak:4.2f} GiB | "
        f"report {res['sizes']['report.html'] / 1e6:.1f} MB, summary.json {res['sizes']['summary.json'] / 1e3:.0f} kB"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1_281_000)
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--baseline", metavar="REV", help="also run the code of this git revision")
    ap.add_argument("--keep", type=Path, help="work here instead of a temporary directory")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="iosweep-bench-") as tmp:
        base = a.keep or Path(tmp)
        t = time.perf_counter()
        info = synthesize(base / "store", a.files, a.ranks, a.workers, a.epochs)
        print(f"synthesised {info} in {time.perf_counter() - t:.1f} s", flush=True)
        results = {"this": measure(REPO / "src", base / "store", base / "this")}
        print(_line("this", results["this"]), flush=True)
        if a.baseline:
            wt = base / "baseline-src"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-f", str(wt), a.baseline],
                           check=True, capture_output=True)  # fmt: skip
            try:
                results["baseline"] = measure(wt / "src", base / "store", base / "baseline")
                print(_line(a.baseline[:10], results["baseline"]), flush=True)
            finally:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(wt)],
                    capture_output=True,
                )
        print(json.dumps(results["this"].get("sizes", {}), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
