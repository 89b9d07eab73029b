"""PyTorch Lightning, run as ``python lightning_ddp.py`` with ``Trainer(devices=2)``: Lightning
starts the second rank itself (its subprocess launcher re-runs this script with LOCAL_RANK=1)
and joins both to a gloo process group. Each rank reads its share of the .npy sample files
(Lightning's DistributedSampler) and times its own main thread around each next() of its
loader (``--truth``: own_truth.py): a DataLoader subclass, which Lightning keeps when it
rebuilds the loader with its sampler, times the iterator it hands to Lightning's fetcher; an
epoch ends at Lightning's epoch end (it takes len(loader) batches, never a StopIteration).
"""

import argparse
import glob
import os
import time

import lightning as L
import torch
from own_truth import Truth
from torch import nn
from torch_parts import NpyFiles

TRUTH = []  # this process's Truth, made when Lightning knows the rank


class TimedLoader(torch.utils.data.DataLoader):
    def __iter__(self):
        truth = TRUTH[0]
        truth.epoch_start()
        it = super().__iter__()
        while True:
            t0 = time.time()
            try:
                batch = next(it)
            except StopIteration:
                truth.epoch_end(t0)
                return
            truth.waited(t0, time.time(), len(batch[0]))
            yield batch


class Model(L.LightningModule):
    def __init__(self, step_ms, truth_dir):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(256, 4))
        self.step_ms, self.truth_dir = step_ms, truth_dir

    def on_train_start(self):
        TRUTH.append(Truth(self.global_rank, pid=os.getpid()))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        time.sleep(self.step_ms / 1000.0)
        return loss

    def on_train_epoch_end(self):  # Lightning takes len(loader) batches: no StopIteration
        TRUTH[0].epoch_end(time.time())

    def on_train_end(self):
        TRUTH[0].write(os.path.join(self.truth_dir, f"rank-{self.global_rank}.json"))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--bs", type=int, default=8)
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--truth", required=True, help="a folder: rank-R.json per rank")
    a = ap.parse_args()
    torch.set_num_threads(1)
    data = NpyFiles(sorted(glob.glob(os.path.join(a.data, "*.npy"))))
    loader = TimedLoader(data, batch_size=a.bs)
    trainer = L.Trainer(accelerator="cpu", devices=a.devices, strategy="ddp",
                        max_epochs=a.epochs, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    trainer.fit(Model(a.step_ms, a.truth), loader)


if __name__ == "__main__":
    main()
