"""An ordinary Horovod + PyTorch training script: nothing in it knows iosweep.

Images are decoded and augmented with Pillow in a map-style Dataset; a small CNN trains on
32x32 crops; rank 0 saves a checkpoint after every epoch.
"""

import argparse
import os

import horovod.torch as hvd
import numpy as np
import torch
from PIL import Image
from torch import nn


class Images(torch.utils.data.Dataset):
    def __init__(self, root):
        classes = sorted(os.listdir(root))
        self.items = [
            (os.path.join(root, c, f), i)
            for i, c in enumerate(classes)
            for f in sorted(os.listdir(os.path.join(root, c)))
        ]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        img = Image.open(path).convert("RGB").rotate(np.random.uniform(-15, 15))
        img = img.resize((48, 48), Image.BICUBIC).crop((8, 8, 40, 40))
        x = np.asarray(img, np.float32).transpose(2, 0, 1) / 255.0
        return torch.from_numpy(x.copy()), label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--save-to", default="")
    args = ap.parse_args()

    hvd.init()
    torch.set_num_threads(1)
    data = Images(args.data_dir)
    sampler = torch.utils.data.distributed.DistributedSampler(data, hvd.size(), hvd.rank())
    loader = torch.utils.data.DataLoader(
        data, batch_size=args.batch, sampler=sampler, num_workers=args.workers
    )
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 4),
    )
    opt = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for images, labels in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            opt.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)
            if args.save_to:
                os.makedirs(args.save_to, exist_ok=True)
                torch.save(model.state_dict(), os.path.join(args.save_to, f"epoch{epoch}.pt"))


if __name__ == "__main__":
    main()
