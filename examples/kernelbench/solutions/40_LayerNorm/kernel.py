"""ModelNew for KernelBench level 1, 40_LayerNorm: layer norm over the last three dimensions (64 x 256 x 256 = 4M
elements per row at the file's size, 16 rows).

`self.ln` stays an nn.LayerNorm, so Model's weight and bias copy in by name; forward only reads them. With 16 rows, one
program per row would leave most of the GPU idle, so each row is split in CHUNK-sized pieces: the first kernel sums
every piece (shifted by the row's first element, which keeps E[x^2] - E[x]^2 from cancelling), the second combines the
row's partial sums into mean and variance and normalizes its own piece with the weight and bias.
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
        x = x.contiguous()
        n = self.ln.weight.numel()
        rows = x.numel() // n
        y = torch.empty_like(x)
        block = min(BLOCK, triton.next_power_of_2(n))
        chunk = max(block, min(CHUNK, triton.next_power_of_2(n)))
        chunks = triton.cdiv(n, chunk)
        partial = torch.empty((rows, chunks, 2), dtype=torch.float32, device=x.device)
        _partial_sums[(rows, chunks)](x, partial, n, chunks, CHUNK=chunk, BLOCK=block, num_warps=NUM_WARPS)
        _normalize[(rows, chunks)](x, self.ln.weight, self.ln.bias, y, partial, n, chunks, self.ln.eps,
                                   CHUNK=chunk, BLOCK=block, CHUNKS=triton.next_power_of_2(chunks),
                                   num_warps=NUM_WARPS)
        return y
