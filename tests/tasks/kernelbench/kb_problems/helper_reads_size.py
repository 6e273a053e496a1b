"""A model whose forward calls a helper that reads a size constant: that constant must not be scaled."""

import torch
import torch.nn as nn


def _rows(x):
    return x.reshape(batch_size, -1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _rows(x) * 2.0


batch_size = 16
channels = 8
width = 32


def get_inputs():
    return [torch.randn(batch_size, channels, width)]


def get_init_inputs():
    return []
