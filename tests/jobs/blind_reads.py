"""PyTorch over .npy data read in ways a tracer does not see, as datasets libraries do:

- ``--mode mmap``: one array file memory-mapped (``np.load(mmap_mode="r")``, as Arrow and
  Hugging Face datasets map their files): a sample is a row, read by page faults;
- ``--mode files``: one ``.npy`` file per sample read by ``np.load``: numpy reads the header
  through Python and the array through a duplicated descriptor with C stdio (``fromfile``).

Each rank trains on its share of the samples (shuffled), without a process group, and times
its own main thread, the truth the hooks must match: the waits in ``next()``, the epochs, AU
and the bytes its samples hold, written to ``--truth``. ``--drop-cache`` evicts the data from
the page cache at each epoch's start (``posix_fadvise(DONTNEED)``, its own map dropped first: a
dataset larger than the host's memory), so every sample of a memory map comes from storage.
"""

import argparse
import glob
import os

import numpy as np
import torch
from own_truth import Truth
from torch import nn
from torch_parts import NpyFiles, sgd_step


def evict(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class Mapped(torch.utils.data.Dataset):
    def __init__(self, path, rows):
        self.path, self.rows, self.array = path, rows, None

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        if self.array is None:  # mapped once, in the process that reads
            self.array = np.load(self.path, mmap_mode="r")
        row = self.rows[i]
        return torch.from_numpy(np.array(self.array[row])), row % 4

    def close(self):
        self.array = None  # unmapped: the kernel keeps mapped pages in the cache


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--mode", choices=("mmap", "files"), required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--bs", type=int, default=16)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--drop-cache", action="store_true")
    ap.add_argument("--truth", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.mode == "mmap":
        (path,) = glob.glob(os.path.join(a.data, "*.npy"))
        shape = np.load(path, mmap_mode="r").shape
        n = shape[0]  # a contiguous block a rank: no page is mapped by two ranks
        data = Mapped(
            path, list(range(a.rank * n // a.world_size, (a.rank + 1) * n // a.world_size))
        )
        paths, per_sample = [path], int(np.prod(shape[1:])) * 4
    else:
        paths = sorted(glob.glob(os.path.join(a.data, "*.npy")))[a.rank :: a.world_size]
        data = NpyFiles(paths)
        per_sample = os.path.getsize(paths[0])
    if not len(data):
        raise SystemExit(f"no samples in {a.data}")
    loader = torch.utils.data.DataLoader(data, batch_size=a.bs, shuffle=True)
    step = sgd_step(nn.Sequential(nn.Flatten(), nn.LazyLinear(4)), a.step_ms)
    truth = Truth(a.rank, sample_bytes=per_sample)
    for _epoch in range(a.epochs):
        if a.drop_cache:
            if a.mode == "mmap":
                data.close()
            evict(paths)
        truth.timed_epoch(iter(loader), step)
    truth.doc["bytes"] = truth.doc["samples"] * per_sample
    truth.write(a.truth)


if __name__ == "__main__":
    main()
