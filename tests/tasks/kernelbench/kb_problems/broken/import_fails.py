"""A problem file whose import raises."""

import torch
import torch.nn as nn

SCALE = 1.0 / 0


class Model(nn.Module):
    def forward(self, x):
        return x * SCALE


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
