"""A DataLoader loop that saves a checkpoint synchronously every ``--every`` steps
(``torch.save`` of the model and optimizer state, padded to ``--ckpt-mb``: a bigger model's
weights), in the training loop, as most scripts do. Each rank trains on its own share of raw
sample files (read whole), without a process group, and writes its own checkpoint file.

The script times its own main thread, the truth the hooks must match: each ``next()`` (the
wait), each save, the steps, the bytes it read, and AU as iosweep defines it, the checkpoint
neither compute nor wait (the accelerator idles through a synchronous save), written to
``--truth``.
"""

import argparse
import glob
import os
import time

import numpy as np
import torch
from own_truth import Truth
from torch import nn


class RawFiles(torch.utils.data.Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as fh:
            raw = fh.read()
        return torch.from_numpy(np.frombuffer(raw, np.float32).reshape(16, 16).copy()), i % 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--bs", type=int, default=8)
    ap.add_argument("--step-ms", type=float, default=100.0)
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--ckpt-mb", type=int, default=64)
    ap.add_argument("--truth", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    files = sorted(glob.glob(os.path.join(a.data, "*.bin")))[a.rank :: a.world_size]
    loader = torch.utils.data.DataLoader(RawFiles(files), batch_size=a.bs)
    model = nn.Sequential(nn.Flatten(), nn.Linear(256, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    pad = torch.zeros(a.ckpt_mb * 2**18)  # float32: ckpt_mb MiB
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"ckpt-rank{a.rank}.pt")
    truth = Truth(a.rank, saves=[], bytes=len(files) * 1024 * a.epochs)
    step = 0
    for _epoch in range(a.epochs):
        truth.epoch_start()
        it = iter(loader)
        while True:
            t0 = time.time()
            try:
                x, y = next(it)
            except StopIteration:
                truth.epoch_end(t0)
                break
            truth.waited(t0, time.time(), len(x))
            nn.functional.cross_entropy(model(x), y).backward()
            time.sleep(a.step_ms / 1000.0)
            opt.step()
            opt.zero_grad()
            step += 1
            if step % a.every == 0:
                s0 = time.time()
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "pad": pad}, path)
                s1 = time.time()
                truth.doc["saves"].append([s0, s1])
                truth.set_apart(s0, s1)
    truth.write(a.truth)


if __name__ == "__main__":
    main()
