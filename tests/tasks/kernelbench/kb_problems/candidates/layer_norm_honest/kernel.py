"""Layer norm in Triton: one program per row; mean and variance in fp32, then scale and shift."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-5


@triton.jit
def _layer_norm_rows(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    y = centered / tl.sqrt(var + eps) * w + b
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class _NormParameters(nn.Module):
    """weight and bias under nn.LayerNorm's names, so the reference's values are copied in."""

    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = _NormParameters(features)

    def forward(self, x):
        x = x.contiguous()
        features = x.shape[-1]
        rows = x.numel() // features
        y = torch.empty_like(x)
        _layer_norm_rows[(rows,)](x, self.ln.weight, self.ln.bias, y, features, EPS,
                                  BLOCK=triton.next_power_of_2(features))
        return y
