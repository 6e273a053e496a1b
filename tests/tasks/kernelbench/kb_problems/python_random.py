"""A model scaled by Python's own random numbers, which no torch seed controls: nothing can be checked."""

import random

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * random.uniform(1.0, 2.0)


batch_size = 8
dim = 32


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
