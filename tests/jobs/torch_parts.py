"""What the test jobs' PyTorch scripts share besides their style: a dataset of one .npy file
per sample, and a training step (a small model's SGD step, then ``step_ms`` off the GIL for
the rest of a bigger model, as its kernels would be)."""

import time

import numpy as np
import torch
from torch import nn


class NpyFiles(torch.utils.data.Dataset):
    def __init__(self, files, before=None):
        self.files, self.before = files, before

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        x = np.load(self.files[i])
        if self.before is not None:
            self.before()  # the sample's own cost: decoding, augmenting
        return torch.from_numpy(x), i % 4


def sgd_step(model, step_ms):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch):
        x, y = batch
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        time.sleep(step_ms / 1000.0)

    return step
