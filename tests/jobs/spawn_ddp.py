"""PyTorch DDP whose ranks the script starts itself, with ``torch.multiprocessing.spawn``: run
as one process (``python spawn_ddp.py``), it spawns ``--nprocs`` ranks that join a gloo
process group on this host. Each rank reads its share of the .npy sample files through a
DistributedSampler and times its own main thread (``--truth``: own_truth.py).
"""

import argparse
import glob
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from own_truth import Truth
from torch import nn
from torch_parts import NpyFiles, sgd_step


def rank_main(rank, world, port, a):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    data = NpyFiles(sorted(glob.glob(os.path.join(a.data, "*.npy"))))
    sampler = torch.utils.data.distributed.DistributedSampler(data, world, rank, shuffle=False)
    loader = torch.utils.data.DataLoader(data, batch_size=a.bs, sampler=sampler)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Flatten(), nn.Linear(256, 4)))
    step = sgd_step(model, a.step_ms)
    truth = Truth(rank, pid=os.getpid())
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        truth.timed_epoch(iter(loader), step)
    truth.write(os.path.join(a.truth, f"rank-{rank}.json"))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--bs", type=int, default=8)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--truth", required=True, help="a folder: rank-R.json per rank")
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(a.nprocs, port, a), nprocs=a.nprocs)


if __name__ == "__main__":
    main()
