"""Layer normalization over the feature dimension, with learned scale and shift."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        return self.ln(x)


batch_size = 16
seq_len = 64
features = 256


def get_inputs():
    return [torch.randn(batch_size, seq_len, features) * 2.0 + 0.5]


def get_init_inputs():
    return [features]
