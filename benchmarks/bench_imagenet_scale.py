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
from pathlib import Path

import numpy as np
import pyarrow as pa

from iosweep.testing.stores import build_store, dictionary, run_meta, table
from iosweep.trace.schema import SIZE_BINS, darshan_size_bin

REPO = Path(__file__).resolve().parents[1]
PER_CLASS = 1281
BATCH = 256
STEP_COMPUTE = 0.30  # seconds of compute per step (an accelerator fed in time)
CKPT = 100_000_000


def _file_sizes(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(70_000, 150_000, n)


def _reads_of(size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per file, the four reads PIL makes: (offsets, lengths) as (n, 4) arrays."""
    first = np.full(len(size), 4096)
    second = np.minimum(61_440, size - 4096)
    third = size - 4096 - second
    off = np.stack([np.zeros(len(size)), np.full(len(size), 4096), 4096 + second, size], 1)
    ln = np.stack([first, second, third, np.zeros(len(size))], 1)
    return off.astype(np.int64), ln.astype(np.int64)


def synthesize(out: Path, files: int, ranks: int, workers: int, epochs: int, seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    size = _file_sizes(files, rng)
    off4, len4 = _reads_of(size)
    paths = [
        f"/lustre/imagenet/train/n{c:08d}/n{c:08d}_{k}.JPEG"
        for c in range(files // PER_CLASS + 1)
        for k in range(PER_CLASS)
    ][:files]
    paths += [f"/lustre/run/checkpoints/checkpoint-{e}.pt" for e in range(epochs)]
    per_rank = files // ranks
    steps = -(-per_rank // BATCH)
    epoch_len = steps * STEP_COMPUTE * 1.15
    seg_parts, ctr_parts = [], []
    step_rows = {
        k: []
        for k in ("rank", "epoch", "step", "start", "end", "wait_start", "wait_end", "samples")
    }
    for e in range(epochs):
        perm = rng.permutation(files)[: per_rank * ranks].reshape(ranks, per_rank)
        t_epoch = 10.0 + e * (epoch_len + 5.0)
        for r in range(ranks):
            f = perm[r]
            w = np.arange(per_rank) % workers
            pid = 100_000 + (e * ranks + r) * (workers + 1) + 1 + w
            t = t_epoch + (np.arange(per_rank) / per_rank) * epoch_len + rng.random(per_rank) * 1e-3
            ts = t[:, None] + np.arange(4)[None, :] * 2e-4
            seg_parts.append(
                (
                    np.full(per_rank * 4, r),
                    pid.repeat(4),
                    f.repeat(4),
                    off4[f].ravel(),
                    len4[f].ravel(),
                    ts.ravel(),
                    (ts + 1e-4).ravel(),
                )
            )
            ctr_parts.append((np.full(per_rank, r), pid, f, t, t + 1e-3))
            st = t_epoch + 0.5 + np.arange(steps) * STEP_COMPUTE * 1.15
            for k, v in (("rank", r), ("epoch", e), ("samples", BATCH)):
                step_rows[k] += [v] * (steps + 1)
            step_rows["step"] += [-1, *range(steps)]
            step_rows["start"] += [t_epoch, *st.tolist()]
            step_rows["end"] += [t_epoch + epoch_len + 0.5, *(st + STEP_COMPUTE).tolist()]
            step_rows["wait_start"] += [None, *(st - 0.15 * STEP_COMPUTE).tolist()]
            step_rows["wait_end"] += [None, *st.tolist()]
    rank, pid, file, offset, length, start, end = (
        np.concatenate(c) for c in zip(*seg_parts, strict=True)
    )
    n_ck = CKPT // (1 << 20)
    for e in range(epochs):  # rank 0's checkpoint after every epoch, 1 MiB writes
        t0 = 10.0 + e * (epoch_len + 5.0) + epoch_len + 1.0
        ck = np.arange(n_ck)
        rank, pid, file = (
            np.r_[a, b]
            for a, b in (
                (rank, np.zeros(n_ck, int)),
                (pid, np.full(n_ck, 99_999)),
                (file, np.full(n_ck, files + e)),
            )
        )
        offset, length = np.r_[offset, ck << 20], np.r_[length, np.full(n_ck, 1 << 20)]
        start, end = np.r_[start, t0 + ck * 1e-3], np.r_[end, t0 + ck * 1e-3 + 8e-4]
    is_w = file >= files
    seg = table(
        "segments",
        {
            "rank": pa.array(rank, pa.int32()),
            "host": dictionary(
                (rank // 4).astype(np.int32), [f"node{h:03d}" for h in range(ranks // 4 + 1)]
            ),
            "pid": pa.array(pid, pa.int64()),
            "path": dictionary(file.astype(np.int32), paths),
            "module": dictionary(np.zeros(len(rank), np.int32), ["POSIX"]),
            "op": dictionary(is_w.astype(np.int32), ["read", "write"]),
            "offset": pa.array(offset),
            "length": pa.array(length),
            "start": pa.array(start),
            "end": pa.array(end),
        },
    )
    cr, cp, cf, co, cc = (np.concatenate(c) for c in zip(*ctr_parts, strict=True))
    bins = darshan_size_bin(len4[cf])
    ctr = {
        "rank": pa.array(cr, pa.int32()),
        "host": dictionary(
            (cr // 4).astype(np.int32), [f"node{h:03d}" for h in range(ranks // 4 + 1)]
        ),
        "pid": pa.array(cp, pa.int64()),
        "path": dictionary(cf.astype(np.int32), paths),
        "module": dictionary(np.zeros(len(cr), np.int32), ["POSIX"]),
        "opens": pa.array(np.ones(len(cr), np.int64)),
        "reads": pa.array(np.full(len(cr), 4, np.int64)),
        "bytes_read": pa.array(size[cf]),
        "max_byte_read": pa.array(size[cf] - 1),
        "read_time": pa.array(np.full(len(cr), 4e-4)),
        "meta_time": pa.array(np.full(len(cr), 5e-5)),
        "open_start": pa.array(co),
        "close_end": pa.array(cc),
    }
    for b, name in enumerate(SIZE_BINS):
        ctr[f"size_read_{name}"] = pa.array((bins == b).sum(axis=1).astype(np.int64))
    meta = run_meta(
        "bench-imagenet", ranks, {r: f"node{r // 4:03d}" for r in range(ranks)}, pid=100_000, traced=False,
        tracer="darshan", start=0.0, end=20.0 + epochs * (epoch_len + 5.0),
        params={"framework": "pytorch", "workload": "imagenet", "nodes": ranks // 4, "ppn": 4,
                "ranks": ranks, "loader_workers": workers, "batch_size": BATCH, "steps": 0, "rep": 0},
    )  # fmt: skip
    build_store(
        out, meta, segments=seg, counters=table("counters", ctr), steps=table("steps", step_rows)
    )
    return {
        "segments": seg.num_rows,
        "counter_records": len(cr),
        "files": files,
        "ranks": ranks,
        "epochs": epochs,
    }


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
