"""Attention forward in CUDA C++ for Hopper, FlashAttention-3 style: TMA loads, warp-specialized wgmma for both
matmuls, P fed from registers, ping-pong between two consumer warpgroups, block j's softmax under block j-1's P V.
Causal or not, grouped-query heads, any S >= 1, head dim 64 or 128, bf16 or fp16.

attention.cu holds the kernel and says why it is fast; this file builds the TMA maps of q, k and v (3-D views
[B x H, S, D], boxes of 128 or BLOCK_N rows x 64 columns, 128-byte swizzle), sizes the grid in the order ORDER
names (one block per SM when PERSISTENT and not causal, else one per tile), and passes the tunables below to the
compiler as -D defines (one build per dtype and head dim).
"""

import math

import torch

from avo.cuda import load_module, tensor_map

BLOCK_N = 192  # avo: tune 64 96 128 160 176 192
STAGES = 2  # avo: tune 2 3
PINGPONG = True  # avo: tune False True
OVERLAP = True  # avo: tune False True
ORDER = 1  # avo: tune 0 1 2
PERSISTENT = True  # avo: tune False True

BLOCK_M = 128  # query rows per block: 64 per consumer warpgroup (fixed in attention.cu)
CONSUMERS = 2  # consumer warpgroups per block; a producer warpgroup comes on top (fixed in attention.cu)
_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
# One build per dtype and head dim, so the evaluator (and a first call) compiles them in parallel, not in series.
_MODULES = {(dtype, d): load_module("attention.cu", defines={
    "BLOCK_N": BLOCK_N, "STAGES": STAGES, "PINGPONG": PINGPONG, "OVERLAP": OVERLAP, "ORDER": ORDER,
    "PERSISTENT": PERSISTENT, "KERNEL_FP16": dtype == "fp16", "KERNEL_D": d,
}) for dtype in _DTYPES.values() for d in (64, 128)}
_SMEM_LIMIT = 227 * 1024
LOG2E = 1.0 / math.log(2.0)
_SMS: dict = {}


def _sm_count(device) -> int:
    if device not in _SMS:
        _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device]


def _smem_bytes(d: int) -> int:
    """The Q tile, STAGES K tiles and STAGES V tiles, 1 KB to align them to the swizzle atom, 1 KB for barriers."""
    return (BLOCK_M * d + 2 * STAGES * BLOCK_N * d) * 2 + 2048


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
    smem = _smem_bytes(D)
    if smem > _SMEM_LIMIT:
        raise ValueError(f"BLOCK_N={BLOCK_N}, STAGES={STAGES} need {smem} bytes of shared memory at D={D}: "
                         f"over {_SMEM_LIMIT}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty((B, Hq, S, D), dtype=q.dtype, device=q.device)
    map_q = tensor_map(q.view(B * Hq, S, D), box=(1, BLOCK_M, 64))
    map_k = tensor_map(k.view(B * Hkv, S, D), box=(1, BLOCK_N, 64))
    map_v = tensor_map(v.view(B * Hkv, S, D), box=(1, BLOCK_N, 64))
    # Tiles of 128 query rows of one head. Causal tiles differ in length, and the hardware hands blocks to SMs as
    # they free up, which balances them better than a fixed split; equal non-causal tiles gain from a persistent grid.
    tiles = -(-S // BLOCK_M) * B * Hq
    grid = min(tiles, _sm_count(q.device)) if PERSISTENT and not causal else tiles
    dtype = _DTYPES[q.dtype]
    _MODULES[dtype, D].launch(f"attention_{dtype}_d{D}", grid, 384, (map_q, map_k, map_v, o, S, Hq, Hq // Hkv, B * Hq,
                                                                  float(sm_scale) * LOG2E, int(bool(causal))),
                              shared_mem=smem)
    return o
