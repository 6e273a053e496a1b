"""Attention forward in the FlashAttention-2 style, in Triton.

Each program owns BLOCK_M query rows of one (batch, query head) and streams the keys and values through shared
memory in BLOCK_N blocks, keeping a running row maximum m, row sum l and output accumulator in registers (online
softmax), so the S×S score matrix never leaves the chip. Why it is fast:
  - sm_scale is folded into log2(e), so each score costs one multiply and one exp2 (the hardware's ex2);
  - causal programs skip every key block above the diagonal, and only the blocks that cross the diagonal pay for
    the mask: the key range is split into an unmasked part and a masked (diagonal) part;
  - grouped-query heads index their shared kv head directly: k and v are never copied;
  - causal programs with the most work (the last query blocks) are launched first to balance the tail.
Masks on the query rows and on the last key block make any S >= 1 correct; D is 64 or 128.
Tiles of 64 queries x 64 keys on one warpgroup (4 warps), three stages: on an H200 that is 0.78x cuDNN on the bench
suite, where 128 x 128 on 8 warps, the textbook choice, is 0.75x (BENCHMARKS.md).
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 64  # avo: tune 64 128
BLOCK_N = 64  # avo: tune 32 64 128
NUM_WARPS = 4  # avo: tune 4 8
NUM_STAGES = 3  # avo: tune 2 3 4
CAUSAL_SPLIT = True  # avo: tune True False

LOG2_E = 1.4426950408889634


@triton.jit
def _attend_block_range(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                        offs_m, offs_d, lo, hi, seq_len, qk_scale,
                        BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr, BOUNDS_MASK: tl.constexpr):
    """Fold keys [lo, hi) into the running softmax state of this program's query rows."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        k_ptrs = k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd
        v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd
        if BOUNDS_MASK:
            k = tl.load(k_ptrs, mask=cols[None, :] < seq_len, other=0.0)
        else:
            k = tl.load(k_ptrs)
        qk = tl.dot(q, k)
        if CAUSAL_MASK or BOUNDS_MASK:
            keep = cols[None, :] < seq_len
            if CAUSAL_MASK:
                keep = keep & (cols[None, :] <= offs_m[:, None])
            qk = tl.where(keep, qk, float("-inf"))
        # Scaling the row maximum rather than every score lets exp2's argument be one fused multiply-add.
        # Every row sees at least one unmasked key before a fully masked block, so m_new is finite.
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if BOUNDS_MASK:
            v = tl.load(v_ptrs, mask=cols[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr,
                   stride_qb, stride_qh, stride_qm, stride_qd,
                   stride_kb, stride_kh, stride_kn, stride_kd,
                   stride_vb, stride_vh, stride_vn, stride_vd,
                   stride_ob, stride_oh, stride_om, stride_od,
                   num_q_heads, group_size, seq_len, qk_scale,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   IS_CAUSAL: tl.constexpr, CAUSAL_SPLIT: tl.constexpr):
    pid_m = tl.program_id(0)
    if IS_CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    batch = pid_bh // num_q_heads
    head = pid_bh % num_q_heads
    kv_head = head // group_size

    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = q_ptr + batch.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
    k_base = k_ptr + batch.to(tl.int64) * stride_kb + kv_head.to(tl.int64) * stride_kh
    v_base = v_ptr + batch.to(tl.int64) * stride_vb + kv_head.to(tl.int64) * stride_vh
    o_base = o_ptr + batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh

    row_ok = offs_m[:, None] < seq_len
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=row_ok, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    if IS_CAUSAL:
        end = tl.minimum(start_m + BLOCK_M, seq_len)
        if CAUSAL_SPLIT:
            # Key blocks wholly left of this query block need no mask; the rest straddle the diagonal.
            diag = (start_m // BLOCK_N) * BLOCK_N
            acc, m_i, l_i = _attend_block_range(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd,
                                                stride_vn, stride_vd, offs_m, offs_d, 0, diag, seq_len,
                                                qk_scale, BLOCK_N, False, False)
            acc, m_i, l_i = _attend_block_range(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd,
                                                stride_vn, stride_vd, offs_m, offs_d, diag, end, seq_len,
                                                qk_scale, BLOCK_N, True, True)
        else:
            acc, m_i, l_i = _attend_block_range(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd,
                                                stride_vn, stride_vd, offs_m, offs_d, 0, end, seq_len,
                                                qk_scale, BLOCK_N, True, True)
    else:
        full = (seq_len // BLOCK_N) * BLOCK_N
        acc, m_i, l_i = _attend_block_range(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd,
                                            stride_vn, stride_vd, offs_m, offs_d, 0, full, seq_len,
                                            qk_scale, BLOCK_N, False, False)
        acc, m_i, l_i = _attend_block_range(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd,
                                            stride_vn, stride_vd, offs_m, offs_d, full, seq_len, seq_len,
                                            qk_scale, BLOCK_N, False, True)

    acc = acc / l_i[:, None]
    o_ptrs = o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=row_ok)


def attention(q, k, v, causal, sm_scale):
    """softmax(q kᵀ · sm_scale) v for q [B, Hq, S, D] and k, v [B, Hkv, S, D]; returns o like q."""
    batch, num_q_heads, seq_len, head_dim = q.shape
    num_kv_heads = k.shape[1]
    if head_dim not in (64, 128) or num_q_heads % num_kv_heads:
        raise ValueError(f"unsupported shape: D={head_dim} (64 or 128), Hq={num_q_heads}, Hkv={num_kv_heads}")
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    grid = (triton.cdiv(seq_len, BLOCK_M), batch * num_q_heads)
    _attention_fwd[grid](
        q, k, v, o,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        num_q_heads, num_q_heads // num_kv_heads, seq_len, float(sm_scale) * LOG2_E,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, IS_CAUSAL=bool(causal), CAUSAL_SPLIT=CAUSAL_SPLIT,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return o
