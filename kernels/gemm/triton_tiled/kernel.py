"""C = A @ B in Triton: bf16 in and out, fp32 accumulation, any M, N, K >= 1.

Each program computes one BLOCK_M × BLOCK_N tile of C, walking K in BLOCK_K steps; tl.dot maps the tile product
onto the tensor cores and num_stages overlaps the loads of the next K-steps with the current product. Why it is fast:
  - large 128×256 tiles give each byte loaded into shared memory many multiply-adds;
  - tiles are visited in grouped order: GROUP_M tile-rows advance together along N, so the A rows and B columns
    that programs running at the same time need are still in L2;
  - when K is a multiple of BLOCK_K (EVEN_K) the K loop loads without masks.
Masks on the tile edges make any shape correct.
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


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                 stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # Grouped order: consecutive programs sweep GROUP_M tile-rows column by column.
    tiles_per_group = GROUP_M * tiles_n
    group = pid // tiles_per_group
    first_m = group * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % tiles_per_group) % group_rows
    pid_n = (pid % tiles_per_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    m_ok = offs_m[:, None] < M
    n_ok = offs_n[None, :] < N

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=m_ok, other=0.0)
            b = tl.load(b_ptrs, mask=n_ok, other=0.0)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=m_ok & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & n_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_ok & n_ok)


def gemm(a, b):
    """a [M, K] @ b [K, N] -> c [M, N] in a's dtype."""
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _gemm_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, EVEN_K=K % BLOCK_K == 0,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return c
