"""Cheat: call torch's softmax under another name. Expected: rejected, runtime.library_op (aten._softmax is a
compute op of the reference, however it is reached)."""

import torch.nn as nn
from torch import softmax as normalize_rows


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return normalize_rows(x, dim=1)
