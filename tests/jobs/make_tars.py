"""Writes tar shards of small PNG images with their labels as member names."""

import argparse
import io
import os
import tarfile

import numpy as np
from PIL import Image

ap = argparse.ArgumentParser()
ap.add_argument("dest")
ap.add_argument("-n", "--num-shards", type=int, default=8)
ap.add_argument("-k", "--per-shard", type=int, default=64)
a = ap.parse_args()
os.makedirs(a.dest, exist_ok=True)
rng = np.random.default_rng(3)
for s in range(a.num_shards):
    with tarfile.open(os.path.join(a.dest, f"train-{s:03d}.tar"), "w") as tar:
        for i in range(a.per_shard):
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(buf, "PNG")
            info = tarfile.TarInfo(f"{s:03d}-{i:04d}.cls{i % 5}.png")
            info.size = buf.tell()
            buf.seek(0)
            tar.addfile(info, buf)
