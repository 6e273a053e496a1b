"""C = A @ B in CUDA C++ for Hopper: TMA loads, warp-specialized wgmma, a persistent tile loop. bf16 (or fp16) in and
out, fp32 accumulation, any M, N, K >= 1.

gemm.cu holds the kernel and says why it is fast; this file builds the TMA tensor maps of A and B (boxes of
BLOCK_M x 64 and 64 x 64 elements, 128-byte swizzle; C's boxes of 64 x 64 for the TMA store), launches one block
per SM (or per tile, when there are fewer tiles), and passes the tunables below to the compiler as -D defines.
Shapes whose rows are not 16-byte aligned (K or N not a multiple of 8) go to a simple kernel in the same file: TMA
cannot address them.
"""

import torch

from avo.cuda import load_module, tensor_map

BLOCK_M = 128  # avo: tune 128 256
BLOCK_N = 256  # avo: tune 128 192 256
STAGES = 3  # avo: tune 2 3 4 5 6
GROUP_M = 8  # avo: tune 1 4 8 16
MMA_LAG = False  # avo: tune False True
TMA_STORE = True  # avo: tune False True
CLUSTER_M = 1  # avo: tune 1 2

BLOCK_K = 64  # one 128-byte swizzle row of 16-bit elements (fixed in gemm.cu)
CONSUMERS = 2  # wgmma warpgroups per block (BLOCK_M / CONSUMERS rows each); a producer warpgroup comes on top
_module = load_module("gemm.cu", defines={
    "BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "STAGES": STAGES, "GROUP_M": GROUP_M, "MMA_LAG": MMA_LAG,
    "CONSUMERS": CONSUMERS, "TMA_STORE": TMA_STORE, "CLUSTER_M": CLUSTER_M,
})
_KERNELS = {torch.bfloat16: "gemm_bf16", torch.float16: "gemm_fp16"}
_THREADS = 128 * (CONSUMERS + 1)
# STAGES slots of an A tile and a B tile, the C tile's staging buffer (TMA_STORE), 1 KB to align the ring to the
# swizzle atom and 1 KB for barriers.
_SMEM_BYTES = (STAGES * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) + (BLOCK_M * BLOCK_N if TMA_STORE else 0)) * 2 + 2048


_SMS: dict = {}


def _sm_count(device) -> int:
    if device not in _SMS:
        _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device]


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
    if K % 8 or N % 8 or a.data_ptr() % 16 or b.data_ptr() % 16:
        name = "gemm_simple_" + _KERNELS[a.dtype].split("_")[1]
        _module.launch(name, (-(-N // 128), min(M, 65535)), 128, (a, b, c, M, N, K))
        return c
    map_a = tensor_map(a, box=(BLOCK_M, BLOCK_K))
    map_b = tensor_map(b, box=(BLOCK_K, 64))
    map_c = tensor_map(c, box=(64, 64))
    # Blocks come in clusters of CLUSTER_M, each cluster taking CLUSTER_M vertically adjacent tiles at a time.
    units = -(-M // (BLOCK_M * CLUSTER_M)) * -(-N // BLOCK_N)
    grid = min(units, _sm_count(a.device) // CLUSTER_M) * CLUSTER_M
    _module.launch(_KERNELS[a.dtype], grid, _THREADS, (map_a, map_b, map_c, c, M, N, K), shared_mem=_SMEM_BYTES)
    return c
