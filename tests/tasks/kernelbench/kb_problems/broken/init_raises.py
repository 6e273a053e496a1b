"""Model raises in __init__: the user's file is at fault, and evolve says so in one line."""
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        raise ValueError("no weights")
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(16)]

def get_init_inputs():
    return [3]
