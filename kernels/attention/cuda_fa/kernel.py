"""Attention forward in CUDA C++, FlashAttention-2 style with mma.sync tensor-core instructions: causal or not,
grouped-query heads, any S >= 1, head dim 64 or 128, bf16 or fp16.

attention.cu holds the kernel (online softmax over double-buffered K/V tiles; see its header); this file picks the
kernel for the dtype and head dim, sizes the grid and shared memory, and passes the tunables below to the compiler
as -D defines. avo.cuda compiles attention.cu with NVRTC for the GPU present on the first call.
"""

import math

import torch

from avo.cuda import load_module

NUM_WARPS = 4  # avo: tune 2 4 8
BLOCK_N = 64  # avo: tune 32 64 128

_module = load_module("attention.cu", defines={"NUM_WARPS": NUM_WARPS, "BLOCK_N": BLOCK_N})
_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
BLOCK_M = 16 * NUM_WARPS  # query rows per block: 16 per warp, as attention.cu lays them out
LOG2E = 1.0 / math.log(2.0)


def _aligned(x):
    """Contiguous, and starting on a 16-byte boundary (cp.async moves 16-byte chunks)."""
    x = x.contiguous()
    return x if x.data_ptr() % 16 == 0 else x.clone()


def attention(q, k, v, causal, sm_scale):
    """q [B, Hq, S, D], k and v [B, Hkv, S, D] -> o [B, Hq, S, D] in q's dtype."""
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    if D not in (64, 128):
        raise ValueError(f"head dim {D} is not supported: 64 or 128")
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k and v must all be bfloat16 or float16; got {q.dtype}, {k.dtype}, {v.dtype}")
    if Hq % Hkv or tuple(k.shape) != (B, Hkv, S, D) or tuple(v.shape) != (B, Hkv, S, D):
        raise ValueError(f"shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not fit attention")
    q, k, v = _aligned(q), _aligned(k), _aligned(v)
    o = torch.empty((B, Hq, S, D), dtype=q.dtype, device=q.device)
    smem = (BLOCK_M + 4 * BLOCK_N) * (D + 8) * 2  # Q tile, then K and V tiles twice (double buffer), rows padded
    _module.launch(f"attention_{_DTYPES[q.dtype]}_d{D}", (B * Hq, -(-S // BLOCK_M)), NUM_WARPS * 32,
                   (q, k, v, o, S, Hq, Hq // Hkv, float(sm_scale) * LOG2E, int(bool(causal))), shared_mem=smem)
    return o
