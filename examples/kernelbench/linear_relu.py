"""relu(x @ Wᵀ + b) at an LLM projection's size: a KernelBench-format problem (Model, get_inputs, get_init_inputs).

    avo bench examples/kernelbench/linear_relu_triton --kernel 'examples/kernelbench/linear_relu.py?dtype=bfloat16'
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 8192
in_features = 4096
out_features = 4096


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
