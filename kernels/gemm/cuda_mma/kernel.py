"""C = A @ B in CUDA C++ with mma.sync tensor-core instructions: bf16 (or fp16) in and out, fp32 accumulation, any
M, N, K >= 1.

gemm.cu holds the kernel (a cp.async multi-stage pipeline feeding ldmatrix + mma.sync; see its header); this file
picks the kernel for the dtype and alignment, sizes the grid and shared memory, and passes the tunables below to
the compiler as -D defines. avo.cuda compiles gemm.cu with NVRTC for the GPU present on the first call.
"""

import torch

from avo.cuda import load_module

BLOCK_M = 128  # avo: tune 64 128 256
BLOCK_N = 128  # avo: tune 64 128 256
BLOCK_K = 32  # avo: tune 32 64
WARPS_M = 2  # avo: tune 1 2 4
WARPS_N = 4  # avo: tune 1 2 4
NUM_STAGES = 4  # avo: tune 2 3 4 5
GROUP_M = 8  # avo: tune 1 4 8 16
MIN_BLOCKS = 2  # avo: tune 1 2

_module = load_module("gemm.cu", defines={
    "BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K, "WARPS_M": WARPS_M, "WARPS_N": WARPS_N,
    "NUM_STAGES": NUM_STAGES, "GROUP_M": GROUP_M, "MIN_BLOCKS": MIN_BLOCKS,
})
_KERNELS = {torch.bfloat16: "gemm_bf16", torch.float16: "gemm_fp16"}
# Shared memory per block, as gemm.cu lays it out: NUM_STAGES stages of an A tile and a B tile, rows padded by 8.
_SMEM_BYTES = NUM_STAGES * (BLOCK_M * (BLOCK_K + 8) + BLOCK_K * (BLOCK_N + 8)) * 2


def gemm(a, b):
    """a [M, K] @ b [K, N] -> c [M, N] in a's dtype."""
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in _KERNELS:
        raise ValueError(f"a and b must both be bfloat16 or float16; got {a.dtype} and {b.dtype}")
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    # cp.async moves 16-byte chunks: rows must start on 16-byte boundaries, i.e. K and N multiples of 8 elements.
    aligned = K % 8 == 0 and N % 8 == 0 and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0
    name = _KERNELS[a.dtype] + ("" if aligned else "_unaligned")
    tiles = -(-M // BLOCK_M) * -(-N // BLOCK_N)
    _module.launch(name, tiles, WARPS_M * WARPS_N * 32, (a, b, c, M, N, K), shared_mem=_SMEM_BYTES)
    return c
