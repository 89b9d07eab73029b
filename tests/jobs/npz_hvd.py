"""Horovod + PyTorch over NPZ shards: a map-style Dataset that opens a shard per sample."""

import argparse
import glob
import os
import time

import horovod.torch as hvd
import numpy as np
import torch
from torch import nn


def spin(ms):
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


class Shards(torch.utils.data.Dataset):
    def __init__(self, root, sample_ms):
        self.files = sorted(glob.glob(os.path.join(root, "*.npz")))
        with np.load(self.files[0]) as z:
            self.per = len(z["labels"])
        self.sample_ms = sample_ms

    def __len__(self):
        return len(self.files) * self.per

    def __getitem__(self, i):
        with np.load(self.files[i // self.per]) as z:
            x, y = z["images"][i % self.per], int(z["labels"][i % self.per])
        spin(self.sample_ms)  # "decoding and augmenting"
        return torch.from_numpy(x), y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-root", required=True)
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--bs", type=int, default=16)
    ap.add_argument("--n-epochs", type=int, default=2)
    ap.add_argument("--sample-ms", type=float, default=0.0)
    ap.add_argument("--step-ms", type=float, default=0.0)
    a = ap.parse_args()
    hvd.init()
    torch.set_num_threads(1)
    data = Shards(a.data_root, a.sample_ms)
    sampler = torch.utils.data.distributed.DistributedSampler(data, hvd.size(), hvd.rank())
    loader = torch.utils.data.DataLoader(
        data, batch_size=a.bs, sampler=sampler, num_workers=a.num_workers
    )
    model = nn.Sequential(nn.Flatten(), nn.Linear(256, 4))
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters()
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for epoch in range(a.n_epochs):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            spin(a.step_ms)  # "the rest of the model"
            if hvd.rank() == 0 and step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
