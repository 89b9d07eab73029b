"""Horovod + PyTorch MNIST, as Horovod's examples/pytorch/pytorch_mnist.py does it.

Every rank reads the *shared* IDX files whole (as torchvision's MNIST does), trains on its
DistributedSampler shard with allreduced gradients, rank 0 saves a checkpoint every epoch,
and every rank evaluates its shard of the test set (accuracy averaged with allreduce).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import horovod.torch as hvd
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iosweep.run.dataset import IDX_FILES, read_idx
from iosweep.run.training import base_parser
from iosweep.run.training.progress import Progress


class Net(nn.Module):
    """The network of Horovod's pytorch_mnist.py."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def load_split(data_dir: str, split: str) -> torch.utils.data.TensorDataset:
    images = read_idx(Path(data_dir) / IDX_FILES[f"{split}_images"])
    labels = read_idx(Path(data_dir) / IDX_FILES[f"{split}_labels"])
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - 0.1307) / 0.3081  # MNIST mean/std, as in torchvision's transforms
    return torch.utils.data.TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


def parse_args(argv=None):
    p = base_parser(__doc__, lr=0.01)
    p.add_argument("--loader-workers", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rank, size = hvd.rank(), hvd.size()
    progress = Progress(args.progress, rank)

    with progress.phase("load-train"):
        train = load_split(args.data, "train")
    sampler: torch.utils.data.distributed.DistributedSampler[Any] = (
        torch.utils.data.distributed.DistributedSampler(train, num_replicas=size, rank=rank)
    )
    loader = torch.utils.data.DataLoader(
        train, batch_size=args.batch_size, sampler=sampler, num_workers=args.loader_workers
    )
    model = Net()
    # Horovod scales the learning rate by the number of workers.
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=0.5)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(args.epochs):
        model.train()
        sampler.set_epoch(epoch)
        t_epoch = time.time()
        loss = torch.tensor(0.0)
        batches = iter(loader)
        steps = args.steps_per_epoch or len(loader)  # 0: the whole epoch
        for step in range(steps):
            t_wait = time.time()
            try:
                data, target = next(batches)
            except StopIteration:
                break
            t0 = time.time()
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            progress.optimizer_step(optimizer)
            progress.add_step(epoch, step, t0, time.time(), wait=(t_wait, t0), samples=len(target))
        progress.steps.append({"epoch": epoch, "step": -1, "start": t_epoch, "end": time.time()})
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)
            if args.checkpoint_dir:
                with progress.phase(f"checkpoint-{epoch}"):
                    os.makedirs(args.checkpoint_dir, exist_ok=True)
                    torch.save(
                        {"epoch": epoch, "model": model.state_dict()},
                        os.path.join(args.checkpoint_dir, f"checkpoint-{epoch}.pt"),
                    )

    with progress.phase("eval"):
        model.eval()
        test = load_split(args.data, "test")
        x, y = test.tensors
        with torch.no_grad():
            correct = (model(x[rank::size]).argmax(1) == y[rank::size]).float().mean()
        accuracy = hvd.allreduce(correct, name="accuracy").item()
    progress.metrics = {"accuracy": accuracy, "loss": float(loss.item())}
    if rank == 0:
        print(f"test accuracy {accuracy:.4f}", flush=True)
    progress.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
