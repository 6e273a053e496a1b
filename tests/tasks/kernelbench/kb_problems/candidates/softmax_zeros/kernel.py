"""Cheat: return zeros. An absolute tolerance lets it through where the true outputs are small (softmax over
thousands of columns); the relative norm does not. Expected: incorrect, check.mismatch (relative error 1)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)
