"""PyTorch with a thread prefetcher around its DataLoader (the BackgroundGenerator pattern: a
producer thread iterates the loader and puts batches on a queue.Queue; the training loop in
the main thread takes them off it). Each rank trains on its own share of .npy sample files,
without a process group.

The script times its own main thread, the truth the hooks must match: each ``next()`` on the
prefetcher (the wait), the epochs, and the AU they give, written to ``--truth``.
"""

import argparse
import functools
import glob
import os
import queue
import threading
import time

import torch
from own_truth import Truth
from torch import nn
from torch_parts import NpyFiles, sgd_step


def spin(ms):
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


class BackgroundGenerator(threading.Thread):
    """prefetch_generator's class, as users copy it: a daemon thread filling a queue."""

    def __init__(self, generator, max_prefetch=2):
        super().__init__(daemon=True, name="prefetcher")
        self.queue = queue.Queue(max_prefetch)
        self.generator = generator
        self.start()

    def run(self):
        for item in self.generator:
            self.queue.put(item)
        self.queue.put(None)

    def __iter__(self):
        return self

    def __next__(self):
        item = self.queue.get()
        if item is None:
            raise StopIteration
        return item


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--bs", type=int, default=8)
    ap.add_argument("--sample-ms", type=float, default=0.0)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--truth", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    files = sorted(glob.glob(os.path.join(a.data, "*.npy")))[a.rank :: a.world_size]
    if not files:
        raise SystemExit(f"no .npy files in {a.data}")
    data = NpyFiles(files, before=functools.partial(spin, a.sample_ms))
    loader = torch.utils.data.DataLoader(data, batch_size=a.bs)
    step = sgd_step(nn.Sequential(nn.Flatten(), nn.Linear(256, 4)), a.step_ms)
    truth = Truth(a.rank)
    for _epoch in range(a.epochs):
        truth.timed_epoch(BackgroundGenerator(loader), step)
    truth.write(a.truth)


if __name__ == "__main__":
    main()
