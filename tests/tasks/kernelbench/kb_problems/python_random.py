"""A model scaled by Python state that no torch seed controls, as Python's own `random` is: nothing can be checked.
The state is a call counter rather than `random.uniform`, so that two calls always differ by more than any tolerance
(two uniform draws in [1, 2] fall within 1e-3 of each other about once in 300 pairs, and the test then flaked)."""

import itertools

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * next(_calls)


_calls = itertools.count(1)
batch_size = 8
dim = 32


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
