"""Cheat: reach layer_norm through getattr with a name built at run time, so no line names it.
Expected: rejected, runtime.library_op (aten.native_layer_norm)."""

import torch
import torch.nn as nn

_OP = "".join(["layer", "_", "norm"])


class _NormParameters(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = _NormParameters(features)

    def forward(self, x):
        op = getattr(torch, _OP)
        return op(x, (x.shape[-1],), self.ln.weight, self.ln.bias, 1e-5)
