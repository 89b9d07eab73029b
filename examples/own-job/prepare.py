"""Makes a small image-classification dataset: <dest>/<class>/<n>.png."""

import argparse
import os

import numpy as np
from PIL import Image

p = argparse.ArgumentParser()
p.add_argument("--dest", required=True)
p.add_argument("--classes", type=int, default=4)
p.add_argument("--per-class", type=int, default=600)
p.add_argument("--size", type=int, default=96)
args = p.parse_args()
rng = np.random.default_rng(0)
for c in range(args.classes):
    os.makedirs(os.path.join(args.dest, f"class{c}"), exist_ok=True)
    for n in range(args.per_class):
        pixels = (rng.random((args.size, args.size, 3)) * 60 + c * 50).astype(np.uint8)
        Image.fromarray(pixels).save(os.path.join(args.dest, f"class{c}", f"{n:05d}.png"))
print(f"{args.classes * args.per_class} images in {args.dest}")
