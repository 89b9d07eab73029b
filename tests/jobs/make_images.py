"""Writes a folder of small PNG files, <label>_<n>.png (with TensorFlow's PNG encoder)."""

import os
import sys

import numpy as np
import tensorflow as tf

dest, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 256
os.makedirs(dest, exist_ok=True)
rng = np.random.default_rng(11)
for n in range(count):
    pixels = rng.integers(0, 255, (20, 20, 3), dtype=np.uint8)
    tf.io.write_file(os.path.join(dest, f"{n % 3}_{n:05d}.png"), tf.io.encode_png(pixels))
