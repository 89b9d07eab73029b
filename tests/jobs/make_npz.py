"""Writes NPZ shards: --shards files of --per-shard samples (16x16 float32 images, labels)."""

import argparse
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--shards", type=int, default=16)
ap.add_argument("--per-shard", type=int, default=32)
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
rng = np.random.default_rng(7)
for i in range(a.shards):
    x = rng.standard_normal((a.per_shard, 1, 16, 16)).astype(np.float32)
    y = rng.integers(0, 4, a.per_shard)
    np.savez(os.path.join(a.out, f"shard-{i:04d}.npz"), images=x, labels=y)
print(f"wrote {a.shards} shards to {a.out}")
