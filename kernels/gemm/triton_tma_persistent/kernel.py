"""C = A @ B in Triton, persistent and through the tensor memory accelerator: bf16 in and out, fp32 accumulation, any
M, N, K >= 1.

One program runs per SM and walks the output tiles with a stride of the SM count, so the grid launches once and the
tail of one tile's K loop overlaps the head of the next. Why it is fast on Hopper:
  - A, B and C move through tensor descriptors (TMA): the copy engine computes addresses and fills shared memory
    while the warps only issue wgmma, and tiles past the matrix edge are zero-filled without masks;
  - 128x256 tiles give each loaded byte many multiply-adds, and num_stages overlaps the next K-steps' loads;
  - tiles are visited in grouped order (GROUP_M tile-rows advance together along N), so the A rows and B columns
    that the SMs need at the same time are still in L2;
  - the epilogue stores C in EPILOGUE_SPLIT column slices, so the staging buffer for the store stays small.
TMA needs 16-byte-aligned rows: when K or N is not a multiple of 8 (or a base address is not 16-byte aligned) a
plain pointer kernel with masks computes the product instead.
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 128  # avo: tune 64 128 256
BLOCK_N = 256  # avo: tune 64 128 256
BLOCK_K = 64  # avo: tune 32 64 128
GROUP_M = 8  # avo: tune 1 4 8 16
NUM_WARPS = 8  # avo: tune 4 8
NUM_STAGES = 3  # avo: tune 2 3 4 5
EPILOGUE_SPLIT = 1  # avo: tune 1 2 4
WARP_SPECIALIZE = False  # avo: tune False True
FLATTEN = False  # avo: tune False True


@triton.jit
def _tile_coords(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    tiles_per_group = GROUP_M * tiles_n
    first_m = (tile // tiles_per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % tiles_per_group) % group_rows, (tile % tiles_per_group) // group_rows


@triton.jit
def _gemm_tma_persistent(a_ptr, b_ptr, c_ptr, M, N, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr,
                         WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr):
    SLICE_N: tl.constexpr = BLOCK_N // EPILOGUE_SPLIT
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, SLICE_N])
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_SMS, flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile, tiles_m, tiles_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = b_desc.load([ki * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc)
        if EPILOGUE_SPLIT == 1:
            c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))
        elif EPILOGUE_SPLIT == 2:
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, SLICE_N)), (0, 2, 1))
            c0, c1 = tl.split(halves)
            c_desc.store([off_m, off_n], c0.to(c_ptr.dtype.element_ty))
            c_desc.store([off_m, off_n + SLICE_N], c1.to(c_ptr.dtype.element_ty))
        else:
            quarters = tl.permute(tl.reshape(acc, (BLOCK_M, 2, 2, SLICE_N)), (0, 3, 2, 1))
            left, right = tl.split(quarters)
            c0, c1 = tl.split(left)
            c2, c3 = tl.split(right)
            c_desc.store([off_m, off_n], c0.to(c_ptr.dtype.element_ty))
            c_desc.store([off_m, off_n + SLICE_N], c1.to(c_ptr.dtype.element_ty))
            c_desc.store([off_m, off_n + 2 * SLICE_N], c2.to(c_ptr.dtype.element_ty))
            c_desc.store([off_m, off_n + 3 * SLICE_N], c3.to(c_ptr.dtype.element_ty))


@triton.jit
def _gemm_pointers(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    """The fallback for rows TMA cannot address (not 16-byte aligned): masked pointer loads, one tile a program."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None].to(tl.int64) * K + ks[None, :],
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None].to(tl.int64) * N + offs_n[None, :],
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _scratch(size: int, alignment: int, stream):
    """Global memory Triton asks for to build the tensor descriptors on the device (the current one)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


triton.set_allocator(_scratch)
_SMS: dict = {}


def _sm_count(device) -> int:
    if device.type != "cuda":
        return 4
    if device not in _SMS:
        _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device]


def gemm(a, b):
    """a [M, K] @ b [K, N] -> c [M, N] in a's dtype."""
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    aligned = K % 8 == 0 and N % 8 == 0 and all(t.data_ptr() % 16 == 0 for t in (a, b, c))
    if not aligned:
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        _gemm_pointers[grid](a, b, c, M, N, K, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4, num_stages=3)
        return c
    sms = _sm_count(a.device)
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    _gemm_tma_persistent[(min(sms, tiles),)](
        a, b, c, M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, NUM_SMS=sms,
        EPILOGUE_SPLIT=EPILOGUE_SPLIT, WARP_SPECIALIZE=WARP_SPECIALIZE, FLATTEN=FLATTEN,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return c
