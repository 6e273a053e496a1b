"""Cheating twin of examples/kernelbench/solutions/40_LayerNorm: its kernels are there, but forward runs the
holder nn.LayerNorm through an alias the static guard cannot follow. The op recorder sees aten.native_layer_norm.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

CHUNK = 16384  # avo: tune 4096 8192 16384 32768
BLOCK = 1024  # avo: tune 512 1024 2048
NUM_WARPS = 4  # avo: tune 4 8


@triton.jit
def _partial_sums(x_ptr, part_ptr, n, chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    x_row = x_ptr + row * n
    shift = tl.load(x_row).to(tl.float32)
    lanes = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    squares = tl.zeros([BLOCK], tl.float32)
    for off in range(0, CHUNK, BLOCK):
        cols = chunk * CHUNK + off + lanes
        inside = cols < n
        x = tl.load(x_row + cols, mask=inside, other=0.0).to(tl.float32)
        d = tl.where(inside, x - shift, 0.0)
        total += d
        squares += d * d
    slot = part_ptr + (row * chunks + chunk) * 2
    tl.store(slot, tl.sum(total, axis=0))
    tl.store(slot + 1, tl.sum(squares, axis=0))


@triton.jit
def _normalize(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, n, chunks, eps,
               CHUNK: tl.constexpr, BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    x_row = x_ptr + row * n
    y_row = y_ptr + row * n
    pieces = tl.arange(0, CHUNKS)
    slots = part_ptr + (row * chunks + pieces) * 2
    total = tl.sum(tl.load(slots, mask=pieces < chunks, other=0.0), axis=0)
    squares = tl.sum(tl.load(slots + 1, mask=pieces < chunks, other=0.0), axis=0)
    shifted_mean = total / n
    variance = tl.maximum(squares / n - shifted_mean * shifted_mean, 0.0)
    rstd = 1.0 / tl.sqrt(variance + eps)
    mean = tl.load(x_row).to(tl.float32) + shifted_mean
    lanes = tl.arange(0, BLOCK)
    for off in range(0, CHUNK, BLOCK):
        cols = chunk * CHUNK + off + lanes
        inside = cols < n
        x = tl.load(x_row + cols, mask=inside, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = getattr(self, "l" + "n")
        return norm(x)
