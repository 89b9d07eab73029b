"""A PyTorch job annotated for DFTracer exactly as DFTracer's overlap-analysis guide teaches
(../shared/seeds/004): Profile("computation") on forward, Profile("IO", "real_IO").iter()
around the data loader, Profile("MyDataset") on the dataset's __getitem__. Run by the tests
under DFTracer alone (LD_PRELOAD, DFTRACER_* variables), not through iosweep.

--sample-ms: CPU per sample in __getitem__ (decoding); --step-ms: CPU per forward (the model).
"""

import argparse
import os
import time

import numpy as np
import torch
from dftracer.python import dft_fn as Profile
from dftracer.python import dftracer

dlp_computation = Profile("computation")
dlp_io = Profile("IO", "real_IO")
dlp_dataset = Profile("MyDataset")


def spin(ms):
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


class MyDataset(torch.utils.data.Dataset):
    def __init__(self, root, sample_ms):
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root))
        self.sample_ms = sample_ms

    def __len__(self):
        return len(self.files)

    @dlp_dataset.log
    def __getitem__(self, idx: int):
        with open(self.files[idx], "rb") as f:
            x = np.frombuffer(f.read(), dtype=np.float32).copy()
        spin(self.sample_ms)
        return torch.from_numpy(x), idx % 4


@dlp_computation.log
def forward(model: torch.nn.Module, x: torch.Tensor, step_ms: float):
    spin(step_ms)
    return model(x)


def training(model, optimizer, dataloader, num_epoch, step_ms):
    for _epoch in range(num_epoch):
        for x, y in dlp_io.iter(dataloader):
            optimizer.zero_grad()
            out = forward(model, x, step_ms)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            optimizer.step()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--sample-ms", type=float, default=0.0)
    p.add_argument("--step-ms", type=float, default=0.0)
    a = p.parse_args()
    log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
    torch.set_num_threads(1)
    data = MyDataset(a.data, a.sample_ms)
    loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=a.workers)
    model = torch.nn.Linear(256, 4)
    training(model, torch.optim.SGD(model.parameters(), lr=0.01), loader, a.epochs, a.step_ms)
    log.finalize()


if __name__ == "__main__":
    main()
