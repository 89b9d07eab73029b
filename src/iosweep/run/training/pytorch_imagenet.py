"""Horovod + PyTorch on an ImageNet-style JPEG folder: the workload of the ResNet-50/ImageNet seed.

One file is opened, read and decoded (Pillow) per sample, by ``DataLoader(num_workers=W)``
worker processes forked from the rank (or by the rank itself when W = 0); each sample is a
random-resized crop with a random flip. ``DistributedSampler`` gives each rank a disjoint
part of the files, a different part each epoch (``set_epoch``). A ResNet (plain torch: no
torchvision) trains with Horovod's ``DistributedOptimizer``; rank 0 saves model and optimizer
after every epoch.

Each step records its compute (batch in hand to optimizer step done, with a device sync on
GPU) and, apart, the time the rank waited for that batch. Under DFTracer the two are also
app-level events (``fetch``, ``compute``) beside the POSIX events of the same processes.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time

import horovod.torch as hvd
import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from iosweep.run.training import base_parser
from iosweep.run.training.imagefiles import Annotations, image_files
from iosweep.run.training.progress import Progress

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


# --- the network: ResNet-18 (basic blocks) or ResNet-50 (bottlenecks), as in He et al. -----
class Basic(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        self.c1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(width)
        self.c2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(width)
        self.skip = _shortcut(cin, width, stride)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.skip(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        out = width * 4
        self.c1 = nn.Conv2d(cin, width, 1, bias=False)
        self.b1 = nn.BatchNorm2d(width)
        self.c2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.b2 = nn.BatchNorm2d(width)
        self.c3 = nn.Conv2d(width, out, 1, bias=False)
        self.b3 = nn.BatchNorm2d(out)
        self.skip = _shortcut(cin, out, stride)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)))
        return F.relu(self.b3(self.c3(y)) + self.skip(x))


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


ARCHS: dict[str, tuple[type[Basic] | type[Bottleneck], tuple[int, ...]]] = {
    "resnet18": (Basic, (2, 2, 2, 2)),
    "resnet50": (Bottleneck, (3, 4, 6, 3)),
}


class ResNet(nn.Module):
    def __init__(self, arch: str, classes: int):
        super().__init__()
        block, depths = ARCHS[arch]
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        layers, cin = [], 64
        for i, n in enumerate(depths):
            width = 64 * 2**i
            for j in range(n):
                layers.append(block(cin, width, 2 if j == 0 and i > 0 else 1))
                cin = width * block.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# --- the data: one JPEG file per sample -----------------------------------------------------
def random_resized_crop(img: Image.Image, size: int, rng: random.Random) -> Image.Image:
    """A crop of 8-100 % of the area with aspect ratio 3/4-4/3, resized to size x size
    (the Inception crop, as torchvision's RandomResizedCrop); the centre if none fits."""
    w, h = img.size
    area = w * h
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw, ch = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < cw <= w and 0 < ch <= h:
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            return img.resize((size, size), Image.Resampling.BILINEAR, box=(x, y, x + cw, y + ch))
    s = min(w, h)
    box = ((w - s) // 2, (h - s) // 2, (w + s) // 2, (h + s) // 2)
    return img.resize((size, size), Image.Resampling.BILINEAR, box=box)


class JpegFolder(torch.utils.data.Dataset):
    """``(image tensor, label)`` per file: opened, read and decoded when the sample is asked for."""

    def __init__(self, root: str, size: int):
        self.paths, self.labels, self.classes = image_files(root)
        self.size = size
        self.draws = 0  # per process: a new crop for a sample each time it is drawn

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        path = self.paths[i]
        self.draws += 1
        rng = random.Random(f"{torch.initial_seed()}-{i}-{self.draws}")  # reproducible
        try:
            with open(path, "rb") as f:  # as torchvision's pil_loader
                img = Image.open(f).convert("RGB")
        except OSError as e:
            raise OSError(f"{path}: cannot read or decode the image: {e}") from e
        img = random_resized_crop(img, self.size, rng)
        if rng.random() < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        x = (np.asarray(img, np.float32) / 255.0 - MEAN) / STD
        return torch.from_numpy(x.transpose(2, 0, 1).copy()), self.labels[i]


def parse_args(argv=None):
    p = base_parser(__doc__, lr=0.1)
    p.add_argument("--loader-workers", type=int, default=0)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--arch", choices=sorted(ARCHS), default="resnet18")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    return p.parse_args(argv)


def pick_device(choice: str) -> torch.device:
    if choice == "cuda" or (choice == "auto" and torch.cuda.is_available()):
        torch.cuda.set_device(hvd.local_rank())
        return torch.device("cuda", hvd.local_rank())
    return torch.device("cpu")


class CpuAveraging:
    """Gradient averaging for a model on a GPU when Horovod has no CUDA support: one
    allreduce of all gradients, staged in host memory (MPI/Gloo)."""

    def __init__(self, model: nn.Module):
        self.params = [p for p in model.parameters() if p.requires_grad]

    def __call__(self) -> None:
        grads = [p.grad for p in self.params if p.grad is not None]
        flat = hvd.allreduce(
            torch.cat([g.reshape(-1) for g in grads]).cpu(), op=hvd.Average, name="grads"
        )
        flat = flat.to(grads[0].device)
        i = 0
        for g in grads:
            g.copy_(flat[i : i + g.numel()].view_as(g))
            i += g.numel()


def main(argv=None) -> int:
    args = parse_args(argv)
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rank, size = hvd.rank(), hvd.size()
    device = pick_device(args.device)
    progress = Progress(args.progress, rank)
    notes = Annotations()

    data = JpegFolder(args.data, args.image_size)
    sampler: torch.utils.data.distributed.DistributedSampler = (
        torch.utils.data.distributed.DistributedSampler(
            data, num_replicas=size, rank=rank, shuffle=True, seed=args.seed
        )
    )
    loader = torch.utils.data.DataLoader(
        data,
        batch_size=args.batch_size,
        sampler=sampler,
        num_workers=args.loader_workers,
        pin_memory=device.type == "cuda",
    )
    model = ResNet(args.arch, len(data.classes)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    cpu_average = None
    if device.type == "cuda" and not hvd.cuda_built():
        cpu_average = CpuAveraging(model) if size > 1 else None
    else:
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    progress.metrics["device"] = str(device)

    loss = torch.tensor(0.0)
    for epoch in range(args.epochs):
        model.train()
        sampler.set_epoch(epoch)
        t_epoch = time.time()
        with progress.phase(f"pipeline-start-{epoch}"):  # its loader workers start here
            batches = iter(loader)
        step = 0
        while not args.steps_per_epoch or step < args.steps_per_epoch:
            t_wait = time.time()
            with notes.region("fetch", "next_batch", epoch, step):
                try:
                    x, y = next(batches)
                except StopIteration:
                    break
            t0 = time.time()
            with notes.region("compute", "train_step", epoch, step):
                x = x.to(device, non_blocking=True)
                y = y.to(device, non_blocking=True)
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                if cpu_average is not None:
                    cpu_average()
                progress.optimizer_step(optimizer, timed=device.type == "cpu")
                if device.type == "cuda":
                    torch.cuda.synchronize()
            progress.add_step(epoch, step, t0, time.time(), wait=(t_wait, t0), samples=len(y))
            step += 1
        del batches  # ends the epoch's workers before the checkpoint
        progress.steps.append({"epoch": epoch, "step": -1, "start": t_epoch, "end": time.time()})
        if rank == 0:
            print(f"epoch {epoch}: {step} steps, loss {loss.item():.4f}", flush=True)
            if args.checkpoint_dir:
                with progress.phase(f"checkpoint-{epoch}"):
                    os.makedirs(args.checkpoint_dir, exist_ok=True)
                    torch.save(
                        {
                            "epoch": epoch,
                            "model": model.state_dict(),
                            "optimizer": optimizer.state_dict(),
                        },
                        os.path.join(args.checkpoint_dir, f"checkpoint-{epoch}.pt"),
                    )
    progress.metrics["loss"] = float(loss.item())
    notes.finalize()
    progress.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
