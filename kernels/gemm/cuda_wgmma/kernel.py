"""C = A @ B in CUDA C++ for Hopper: TMA loads, warp-specialized wgmma, a persistent tile loop, split-K where the
tiles are too few to fill the GPU. bf16 (or fp16) in and out, fp32 accumulation, any M, N, K >= 1.

gemm.cu holds the kernel and says why it is fast; this file picks a configuration per shape (the table below),
builds the TMA tensor maps of A and B (boxes of BLOCK_M x 64 and 64 x 64 elements, 128-byte swizzle; C's boxes of
64 x 64 for the TMA store), launches one block per SM (or per work unit, when there are fewer), and passes the
tunables to the compiler as -D defines. Shapes whose rows are not 16-byte aligned (K or N not a multiple of 8) go
to a simple kernel in the same file: TMA cannot address them.
"""

import math

import torch

from avo.cuda import load_module, tensor_map

# The large tile: every shape with more than FEW_ROWS rows (the bench suite's shapes all take it, unsplit).
BLOCK_M = 128  # avo: tune 128 256
BLOCK_N = 256  # avo: tune 128 192 256
STAGES = 3  # avo: tune 2 3 4 5 6
GROUP_M = 8  # avo: tune 1 4 8 16
MMA_LAG = False  # avo: tune False True
TMA_STORE = True  # avo: tune False True
CLUSTER_M = 1  # avo: tune 1 2

# Few tokens (M <= FEW_ROWS): a 64-row tile for one consumer warpgroup, since a 128-row tile would spend half its
# tensor-core time on rows of zeros, and such a GEMM is bound by reading B (the weights) once: deeper pipelines
# keep more of B in flight. Off (0) until measured on a GPU; 64 is the setting built for it.
FEW_ROWS = 0  # avo: tune 0 64
FEW_BLOCK_N = 256  # avo: tune 128 256
FEW_STAGES = 4  # avo: tune 3 4 5 6

# Split-K: when the tiles leave the last wave of SMs part-empty (few tokens, long K), each tile's K range is cut
# into parts reduced in a fixed order (deterministic). The count is the one with the shortest estimated time, in
# K-steps of 64: waves x (steps per part + writing its fp32 partial) + the last part's reading of all of them, where
# one partial's trip costs about PARTIAL_STEPS steps (a 128x256 fp32 tile at an SM's share of bandwidth against its
# wgmma time per step); each part walks at least MIN_SPLIT_STEPS steps. Off (1) until measured on a GPU; 8 is the
# setting built for it.
MAX_SPLITS = 1  # avo: tune 1 2 4 8 16
PARTIAL_STEPS = 2.5  # avo: tune 0.0 1.0 2.5 5.0 10.0
MIN_SPLIT_STEPS = 8  # avo: tune 4 8 16 32

BLOCK_K = 64  # one 128-byte swizzle row of 16-bit elements (fixed in gemm.cu)
CONSUMERS = 2  # wgmma warpgroups per block of the large tile (BLOCK_M / CONSUMERS rows each)
_KERNELS = {torch.bfloat16: "gemm_bf16", torch.float16: "gemm_fp16"}


class _Build:
    """One compiled configuration: tile shape, pipeline depth and consumer warpgroups."""

    def __init__(self, block_m: int, block_n: int, stages: int, consumers: int, cluster_m: int):
        self.block_m, self.block_n, self.consumers, self.cluster_m = block_m, block_n, consumers, cluster_m
        self.threads = 128 * (consumers + 1)  # a producer warpgroup on top of the consumers
        # STAGES slots of an A tile and a B tile, the C tile's staging buffer (TMA_STORE), 1 KB to align the ring
        # to the swizzle atom and 1 KB for barriers.
        self.smem = (stages * (block_m * BLOCK_K + BLOCK_K * block_n) + (block_m * block_n if TMA_STORE else 0)) * 2 \
            + 2048
        self.module = load_module("gemm.cu", defines={
            "BLOCK_M": block_m, "BLOCK_N": block_n, "STAGES": stages, "GROUP_M": GROUP_M, "MMA_LAG": MMA_LAG,
            "CONSUMERS": consumers, "TMA_STORE": TMA_STORE, "CLUSTER_M": cluster_m,
        })


_LARGE = _Build(BLOCK_M, BLOCK_N, STAGES, CONSUMERS, CLUSTER_M)
_FEW = _Build(64, FEW_BLOCK_N, FEW_STAGES, 1, 1)
_SIMPLE = _LARGE.module  # gemm_simple_* do not depend on the defines

_SMS: dict = {}
_WORKSPACE: dict = {}


def _sm_count(device) -> int:
    if device not in _SMS:
        _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device]


def _splits(units: int, k_steps: int, sms: int) -> int:
    """The K split with the shortest estimated time (the fewest parts among equals), if it saves 3% or more."""
    def steps(splits: int) -> float:
        if splits == 1:
            return math.ceil(units / sms) * k_steps
        return math.ceil(units * splits / sms) * (k_steps / splits + PARTIAL_STEPS) + PARTIAL_STEPS * splits

    best = min(range(1, max(1, min(MAX_SPLITS, k_steps // MIN_SPLIT_STEPS)) + 1), key=steps)
    return best if steps(best) < 0.97 * steps(1) else 1  # under 3% is within what the estimate can tell


def _workspace(device, partial_floats: int, counters: int):
    """fp32 partials and per-tile arrival counters (zero between calls: the last unit of a tile resets its own),
    grown as shapes need and kept."""
    held = _WORKSPACE.get(device)
    if held is None or held[0].numel() < partial_floats or held[1].numel() < counters:
        floats = max(partial_floats, held[0].numel() if held else 0)
        count = max(counters, held[1].numel() if held else 0)
        held = (torch.empty(floats, dtype=torch.float32, device=device),
                torch.zeros(count, dtype=torch.int32, device=device))
        _WORKSPACE[device] = held
    return held


def plan(M: int, N: int, K: int, sms: int) -> tuple[_Build, int, int]:
    """(configuration, work units, K splits) for one shape: the table above, read top to bottom."""
    build = _FEW if M <= FEW_ROWS else _LARGE
    # Blocks come in clusters of cluster_m, each cluster taking a unit of cluster_m vertically adjacent tiles.
    units = -(-M // (build.block_m * build.cluster_m)) * -(-N // build.block_n)
    return build, units, _splits(units, -(-K // BLOCK_K), sms // build.cluster_m)


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
        _SIMPLE.launch(name, (-(-N // 128), min(M, 65535)), 128, (a, b, c, M, N, K))
        return c
    sms = _sm_count(a.device)
    build, units, splits = plan(M, N, K, sms)
    map_a = tensor_map(a, box=(build.block_m, BLOCK_K))
    map_b = tensor_map(b, box=(BLOCK_K, 64))
    map_c = tensor_map(c, box=(64, 64))
    partials, arrivals = c, c  # unread when unsplit
    if splits > 1:
        slots = units * build.cluster_m * build.consumers
        partials, arrivals = _workspace(a.device, slots * splits * (build.block_m // build.consumers) *
                                        build.block_n, slots)
    grid = min(units * splits, sms // build.cluster_m) * build.cluster_m
    build.module.launch(_KERNELS[a.dtype], grid, build.threads,
                        (map_a, map_b, map_c, c, M, N, K, partials, arrivals, splits), shared_mem=build.smem)
    return c
