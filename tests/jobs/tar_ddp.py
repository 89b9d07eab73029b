"""torch.distributed (DDP, gloo) under torchrun: an IterableDataset streaming tar shards.

Shards are split by rank, then by loader worker; each member is decoded with Pillow. The
loop takes batches with next() until a step budget per epoch is spent or the data end.
"""

import argparse
import glob
import io
import tarfile
import time

import numpy as np
import torch
import torch.distributed as dist
from PIL import Image
from torch import nn


def burn(ms):
    t = time.perf_counter() + ms / 1e3
    while time.perf_counter() < t:
        pass


class TarStream(torch.utils.data.IterableDataset):
    def __init__(self, pattern, decode_ms, rank, world):
        self.shards = sorted(glob.glob(pattern))[rank::world]
        self.decode_ms = decode_ms

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        mine = self.shards if info is None else self.shards[info.id :: info.num_workers]
        for shard in mine:
            with tarfile.open(shard) as tar:
                for m in tar:
                    img = Image.open(io.BytesIO(tar.extractfile(m).read())).convert("L")
                    burn(self.decode_ms)
                    x = torch.from_numpy(np.asarray(img, np.float32) / 255.0)
                    yield x.flatten(), int(m.name.split(".cls")[1][0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shards-glob", required=True)
    p.add_argument("--loader-procs", type=int, default=0)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--epochs-total", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=1000)
    p.add_argument("--decode-ms", type=float, default=0.0)
    p.add_argument("--fwd-ms", type=float, default=0.0)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    ds = TarStream(args.shards_glob, args.decode_ms, rank, world)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.micro_batch, num_workers=args.loader_procs)
    model = nn.parallel.DistributedDataParallel(nn.Linear(576, 5))
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    for ep in range(args.epochs_total):
        it = iter(dl)
        steps = 0
        while steps < args.max_steps:
            try:
                x, y = next(it)
            except StopIteration:
                break
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            burn(args.fwd_ms)
            steps += 1
        if rank == 0:
            print(f"[ep {ep}] {steps} steps, loss={loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
