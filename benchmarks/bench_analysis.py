"""Benchmark: ``analyze_run`` on a synthetic trace store of 10 million segments over 128 ranks.

1. Synthesises (seeded, reproducible) a store that looks like a data-parallel training run:
   each rank reads its partition of 2048 dataset shards (64 MiB each) in 256 KiB chunks,
   one partition per epoch with the partitions rotating between epochs, with a share of
   small random 4 KiB reads mixed in; each rank has 4 DataLoader worker processes; rank 0
   writes a 100 MB checkpoint after each epoch in 1 MiB chunks; the manifest's steps (100 per
   epoch per rank) and Darshan-like counters per (process, file) come with it.
2. Runs ``analyze_run`` on it in a fresh subprocess and prints the wall time and the peak
   RSS of that subprocess (``VmHWM``); exits 1 if the peak reaches ``--limit-gib``.

Usage: python benchmarks/bench_analysis.py [--segments 10000000] [--ranks 128] [--keep DIR]
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

from iosweep.testing.stores import build_store, dictionary, table
from iosweep.trace.schema import SIZE_BINS, RankInfo, RunMeta, darshan_size_bin

CHUNK = 256 * 1024
SHARD = 64 * 1024 * 1024
N_SHARDS = 2048
CKPT_BYTES = 100_000_000
CKPT_CHUNK = 1 << 20


def synthesize(out: Path, n_segments: int, n_ranks: int, seed: int = 20240601) -> dict:
    rng = np.random.default_rng(seed)
    per_rank = n_segments // n_ranks
    ops_per_shard = SHARD // CHUNK
    shards_per_rank = N_SHARDS // n_ranks
    ops_per_epoch = shards_per_rank * ops_per_shard
    epochs = int(np.ceil(per_rank / ops_per_epoch))
    n = per_rank * n_ranks
    rank = np.repeat(np.arange(n_ranks, dtype=np.int32), per_rank)
    i = np.tile(np.arange(per_rank, dtype=np.int64), n_ranks)
    epoch = (i // ops_per_epoch).astype(np.int32)
    j = i % ops_per_epoch
    # Rank r reads shards r*k .. r*k+k-1 in epoch 0; partitions rotate by one rank per epoch.
    shard = ((rank.astype(np.int64) + epoch) % n_ranks) * shards_per_rank + j // ops_per_shard
    offset = (j % ops_per_shard) * CHUNK
    length = np.full(n, CHUNK, np.int64)
    small = rng.random(n) < 0.1  # sample reads at random places: 4 KiB
    offset[small] = rng.integers(0, SHARD // 4096, small.sum()) * 4096
    length[small] = 4096
    # Time: each epoch takes 60 s on every rank, ops spread over its first 40 s.
    epoch_len = 60.0
    t0 = 5.0 + epoch * epoch_len + (j / ops_per_epoch) * 40.0 + rng.random(n) * 0.002
    dur = length / 2e9 + rng.exponential(5e-5, n)
    pid = 100_000 + rank.astype(np.int64) * 10 + rng.integers(1, 5, n)  # 4 DataLoader workers
    paths = [f"/lustre/imagenet/train/shard-{k:05d}.tfrecord" for k in range(N_SHARDS)]
    # Rank 0's checkpoints: 100 MB in 1 MiB writes after every epoch.
    ck_ops = CKPT_BYTES // CKPT_CHUNK
    ck_epoch = np.repeat(np.arange(epochs), ck_ops)
    ck_i = np.tile(np.arange(ck_ops), epochs)
    ck_path = N_SHARDS + ck_epoch
    paths += [f"/lustre/run/checkpoints/ckpt-{e}.pt" for e in range(epochs)]
    ck_t = 5.0 + ck_epoch * epoch_len + 45.0 + ck_i * 1e-3

    m = len(ck_i)
    tab = table(
        "segments",
        {
            "rank": pa.array(np.concatenate([rank, np.zeros(m, np.int32)])),
            "host": dictionary(
                np.concatenate([rank // 4, np.zeros(m, np.int32)]),
                [f"node{h:03d}" for h in range(n_ranks // 4 + 1)],
            ),
            "pid": pa.array(np.concatenate([pid, np.full(m, 100_000, np.int64)])),
            "path": dictionary(np.concatenate([shard, ck_path]).astype(np.int32), paths),
            "module": dictionary(np.zeros(n + m, np.int32), ["POSIX"]),
            "op": dictionary(
                np.concatenate([np.zeros(n, np.int32), np.ones(m, np.int32)]), ["read", "write"]
            ),
            "offset": pa.array(np.concatenate([offset, ck_i * CKPT_CHUNK])),
            "length": pa.array(np.concatenate([length, np.full(m, CKPT_CHUNK, np.int64)])),
            "start": pa.array(np.concatenate([t0, ck_t])),
            "end": pa.array(np.concatenate([t0 + dur, ck_t + 8e-4])),
        },
    )
    # Counters per (pid, file) as Darshan would keep them, from the same operations.
    key = np.concatenate([pid, np.full(m, 100_000, np.int64)]) * 4096 + np.concatenate(
        [shard, ck_path]
    )
    uk, inv = np.unique(key, return_inverse=True)
    lens = np.concatenate([length, np.full(m, CKPT_CHUNK, np.int64)])
    is_w = np.concatenate([np.zeros(n, bool), np.ones(m, bool)])
    k = len(uk)
    cpid = uk // 4096
    cfile = (uk % 4096).astype(np.int32)
    crank = ((cpid - 100_000) // 10).astype(np.int32)
    bins = darshan_size_bin(lens)
    ctr = {
        "rank": pa.array(crank),
        "host": dictionary(crank // 4, [f"node{h:03d}" for h in range(n_ranks // 4 + 1)]),
        "pid": pa.array(cpid),
        "path": dictionary(cfile, paths),
        "module": dictionary(np.zeros(k, np.int32), ["POSIX"]),
        "opens": pa.array(np.ones(k, np.int64)),
        "reads": pa.array(np.bincount(inv, weights=~is_w, minlength=k).astype(np.int64)),
        "writes": pa.array(np.bincount(inv, weights=is_w, minlength=k).astype(np.int64)),
        "bytes_read": pa.array(
            np.bincount(inv, weights=lens * ~is_w, minlength=k).astype(np.int64)
        ),
        "bytes_written": pa.array(
            np.bincount(inv, weights=lens * is_w, minlength=k).astype(np.int64)
        ),
        "meta_time": pa.array(np.full(k, 1e-4)),
    }
    for b, name in enumerate(SIZE_BINS):
        ctr[f"size_read_{name}"] = pa.array(
            np.bincount(inv, weights=(bins == b) & ~is_w, minlength=k).astype(np.int64)
        )
    steps_n = 100
    sr = np.repeat(np.arange(n_ranks), epochs * (steps_n + 1))
    se = np.tile(np.repeat(np.arange(epochs), steps_n + 1), n_ranks)
    ss = np.tile(np.tile(np.arange(-1, steps_n), epochs), n_ranks)
    st0 = 5.0 + se * epoch_len + np.where(ss < 0, 0.0, ss * 0.4 + 0.1)
    st1 = np.where(ss < 0, 5.0 + (se + 1) * epoch_len - 1.0, st0 + 0.3)
    steps = table("steps", {"rank": sr, "epoch": se, "step": ss, "start": st0, "end": st1})
    ranks = [
        RankInfo(
            rank=r, local_rank=r % 4, size=n_ranks, pid=100_000 + r * 10, host=f"node{r // 4:03d}"
        )
        for r in range(n_ranks)
    ]
    meta = RunMeta(
        run_id="bench",
        clock_zero=1.7e9,
        tracer="darshan",
        start=0.0,
        end=10.0 + epochs * epoch_len,
        ranks=ranks,
        params={
            "framework": "synthetic",
            "nodes": n_ranks // 4,
            "ppn": 4,
            "ranks": n_ranks,
            "rep": 0,
        },
    )
    build_store(out, meta, segments=tab, counters=table("counters", ctr), steps=steps)
    return {
        "segments": tab.num_rows,
        "ranks": n_ranks,
        "files": len(paths),
        "epochs": epochs,
        "counter_records": k,
    }


CHILD = """
import json, resource, sys, time
from iosweep.analysis import analyze_run
t = time.perf_counter()
sm = analyze_run(sys.argv[1], sys.argv[2])
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork + exec (the parent's store build)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss": hwm * 1024,
                  "status": sm["analysis_status"],
                  "strategy": sm["access"].get("dataset"), "insights": [i["id"] for i in sm["insights"]],
                  "segments": sm["trace"]["segments"]}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=10_000_000)
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--limit-gib", type=float, default=4.0)
    ap.add_argument(
        "--keep", type=Path, help="write the store and the analysis here instead of a temp dir"
    )
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="iosweep-bench-") as tmp:
        base = a.keep or Path(tmp)
        store, out = base / "store", base / "analysis"
        t = time.perf_counter()
        info = synthesize(store, a.segments, a.ranks)
        size = sum(f.stat().st_size for f in store.iterdir())
        print(
            f"synthesised {info} in {time.perf_counter() - t:.1f} s; store {size / 2**20:.0f} MiB"
        )
        r = subprocess.run(
            [sys.executable, "-c", CHILD, str(store), str(out)], capture_output=True, text=True
        )
        if r.returncode:
            print(r.stderr, file=sys.stderr)
            return r.returncode
        res = json.loads(r.stdout.strip().splitlines()[-1])
        gib = res["peak_rss"] / 2**30
        print(
            f"analyze_run: {res['wall_s']:.1f} s wall, {res['cpu_s']:.1f} s CPU (incl. imports), "
            f"peak RSS {gib:.2f} GiB "
            f"({res['peak_rss'] / res['segments']:.0f} B per segment); status {res['status']}, "
            f"dataset access {res['strategy']}, insights {res['insights']}"
        )
        if gib >= a.limit_gib:
            print(f"FAIL: peak RSS {gib:.2f} GiB >= {a.limit_gib} GiB", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
