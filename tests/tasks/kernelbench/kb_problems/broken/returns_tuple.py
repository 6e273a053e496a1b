"""A problem whose forward returns two tensors."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.max(dim=1)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
