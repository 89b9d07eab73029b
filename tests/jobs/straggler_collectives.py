"""Ranks that wait for a straggler in their collectives: torch.distributed (gloo) under
torchrun, without DDP, each step's loss averaged over the ranks with ``dist.all_reduce``
before the optimizer step, as scripts average their metrics. Rank 1 takes ``--straggle-ms``
longer a step, so rank 0 waits about that long in each ``all_reduce``. Each rank reads its
share of raw sample files (``sync_checkpoint.RawFiles``).

The script times its own main thread, the truth the hooks must match: each ``next()`` (the
wait), each ``all_reduce`` call, the bytes it read, and AU as iosweep defines it (a step's
collectives are its compute, as MLPerf Storage counts a step), written to ``--truth``.
"""

import argparse
import glob
import os
import time

import torch
import torch.distributed as dist
from own_truth import Truth
from sync_checkpoint import RawFiles
from torch import nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--bs", type=int, default=8)
    ap.add_argument("--step-ms", type=float, default=100.0)
    ap.add_argument("--straggle-ms", type=float, default=150.0)
    ap.add_argument("--truth", required=True)
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    files = sorted(glob.glob(os.path.join(a.data, "*.bin")))[rank::world]
    loader = torch.utils.data.DataLoader(RawFiles(files), batch_size=a.bs)
    model = nn.Sequential(nn.Flatten(), nn.Linear(256, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    truth = Truth(rank, collectives=[], bytes=len(files) * 1024 * a.epochs)
    # sleep, not spin: a step's length holds when the other core is busy
    step_s = (a.step_ms + (a.straggle_ms if rank == 1 else 0.0)) / 1000.0
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
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            time.sleep(step_s)
            c0 = time.time()
            dist.all_reduce(loss.detach())
            truth.doc["collectives"].append([c0, time.time()])
            opt.step()
            opt.zero_grad()
    truth.write(a.truth)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
