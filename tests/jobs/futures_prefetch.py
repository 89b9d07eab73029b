"""A trainer whose input pipeline is a ``concurrent.futures`` thread pool: while the model
runs a step, the pool reads and decodes the next batch (raw sample files read whole with
``open().read()``, ``--sample-ms`` of CPU each); the loop takes it with ``future.result()``.
No DataLoader, no queue.Queue. Each rank trains on its own share of the files, without a
process group.

The script times its own main thread, the truth the hooks must match: each ``result()`` (the
wait), the steps, the bytes it read, and the AU they give, written to ``--truth``.
"""

import argparse
import concurrent.futures
import glob
import os
import time

import numpy as np
import torch
from own_truth import Truth
from torch import nn


def spin(ms):
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


def load(files, sample_ms):
    xs, nbytes = [], 0
    for f in files:
        with open(f, "rb") as fh:
            raw = fh.read()
        nbytes += len(raw)
        xs.append(np.frombuffer(raw, np.float32).reshape(16, 16))
        spin(sample_ms)
    return torch.from_numpy(np.stack(xs)), torch.arange(len(files)) % 4, nbytes


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
    files = sorted(glob.glob(os.path.join(a.data, "*.bin")))[a.rank :: a.world_size]
    batches = [files[i : i + a.bs] for i in range(0, len(files), a.bs)]
    model = nn.Sequential(nn.Flatten(), nn.Linear(256, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    truth = Truth(a.rank, bytes=0)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="io") as pool:
        for _epoch in range(a.epochs):
            truth.epoch_start()
            nxt = pool.submit(load, batches[0], a.sample_ms)
            for k in range(len(batches)):
                t0 = time.time()
                x, y, nbytes = nxt.result()
                truth.waited(t0, time.time(), len(x))
                truth.doc["bytes"] += nbytes
                if k + 1 < len(batches):
                    nxt = pool.submit(load, batches[k + 1], a.sample_ms)
                nn.functional.cross_entropy(model(x), y).backward()
                time.sleep(a.step_ms / 1000.0)
                opt.step()
                opt.zero_grad()
            truth.epoch_end(time.time())
    truth.write(a.truth)


if __name__ == "__main__":
    main()
