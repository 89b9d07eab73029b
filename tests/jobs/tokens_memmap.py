"""A language-model trainer in nanoGPT's style: no DataLoader, no Dataset. Each step slices
its batch of token windows out of a ``np.memmap`` of a uint16 token file (mapped again every
step, as nanoGPT does), packs them (``--fetch-ms`` of CPU: tokenising, masking), and runs the
model (``--step-ms`` off the GIL before the optimizer step, as a bigger model's kernels
would). Each rank reads its own half of the file, without a process group.

The script times its own main thread, the truth the hooks must match: each batch's fetch (the
wait), the steps, and the AU they give (``own_truth.py``), written to ``--truth``.
"""

import argparse
import os
import time

import numpy as np
import torch
from own_truth import Truth
from torch import nn

VOCAB, CONTEXT = 512, 64


def spin(ms):
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


def get_batch(path, lo, hi, rng, bs, fetch_ms):
    data = np.memmap(path, dtype=np.uint16, mode="r")  # nanoGPT maps it again each batch
    ix = rng.integers(lo, hi - CONTEXT - 1, bs)
    x = torch.stack([torch.from_numpy(data[i : i + CONTEXT].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + CONTEXT].astype(np.int64)) for i in ix])
    spin(fetch_ms)
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--bs", type=int, default=8)
    ap.add_argument("--fetch-ms", type=float, default=0.0)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--truth", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    path = os.path.join(a.data, "train.bin")
    n = os.path.getsize(path) // 2
    lo, hi = n * a.rank // a.world_size, n * (a.rank + 1) // a.world_size
    model = nn.Sequential(nn.Embedding(VOCAB, 32), nn.Linear(32, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(a.rank)
    truth = Truth(a.rank, bytes=0)
    truth.epoch_start()
    for _ in range(a.iters):
        t0 = time.time()
        x, y = get_batch(path, lo, hi, rng, a.bs, a.fetch_ms)
        truth.waited(t0, time.time(), a.bs)
        truth.doc["bytes"] += 2 * x.numel() + 2 * y.numel()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
        loss.backward()
        time.sleep(a.step_ms / 1000.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    truth.epoch_end(time.time())
    truth.write(a.truth)


if __name__ == "__main__":
    main()
