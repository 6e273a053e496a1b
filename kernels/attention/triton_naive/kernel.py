"""Attention forward, a first correct Triton version: tiled online softmax, nothing tuned yet.

Each program owns BLOCK_M query rows of one (batch, query head) and walks the key/value blocks it may attend to,
keeping the running row maximum, row sum and output accumulator in registers (online softmax), so the S×S score
matrix is never written out. Causal programs stop at the diagonal. Grouped-query heads read their shared kv
head in place. Every key block is masked (sequence end and, when causal, the diagonal), which keeps the code
short and right for any S >= 1 at the price of mask work on blocks that need none. Small 64×64 tiles, 4 warps
and 2 pipeline stages: what one writes before measuring.

Four structural switches, all off as written, name the usual next steps (constexpr flags: with all of them off
the kernel computes exactly what the single masked loop above does):
  - EXP2: fold log2(e) into the score scale and use exp2 (the hardware's ex2) instead of exp;
  - MASK_SPLIT: split the key range so only the blocks that cross the diagonal or the sequence end pay for masks;
  - HEAVY_FIRST: launch the causal query blocks with the most keys first, so the short ones fill the tail;
  - FMA_SCALE: take the row maximum of the raw scores and scale that, so scaling a score and subtracting the
    maximum fuse into one multiply-add (instead of a multiply per score, then a subtract).
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 64  # avo: tune 64 128
BLOCK_N = 64  # avo: tune 32 64 128
NUM_WARPS = 4  # avo: tune 4 8
NUM_STAGES = 2  # avo: tune 2 3 4
EXP2 = False  # avo: tune False True
MASK_SPLIT = False  # avo: tune False True
HEAVY_FIRST = False  # avo: tune False True
FMA_SCALE = False  # avo: tune False True

LOG2_E = 1.4426950408889634


@triton.jit
def _attend(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_m, offs_d,
            lo, hi, seq_len, qk_scale, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr,
            BOUNDS_MASK: tl.constexpr, EXP2: tl.constexpr, FMA_SCALE: tl.constexpr):
    """Fold keys [lo, hi) into the running softmax state (m_i, l_i, acc) of this program's query rows."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seq_len
        if BOUNDS_MASK:
            k = tl.load(k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd, mask=col_ok[None, :],
                        other=0.0)
        else:
            k = tl.load(k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd)
        qk = tl.dot(q, k)
        if not FMA_SCALE:
            qk = qk * qk_scale
        if CAUSAL_MASK or BOUNDS_MASK:
            keep = col_ok[None, :]
            if CAUSAL_MASK:
                keep = keep & (cols[None, :] <= offs_m[:, None])
            qk = tl.where(keep, qk, float("-inf"))
        if FMA_SCALE:
            # qk_scale > 0, so the maximum of the scaled scores is the scaled maximum; m_i is in scaled units.
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            shifted = qk * qk_scale - m_new[:, None]
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            shifted = qk - m_new[:, None]
        if EXP2:
            p = tl.math.exp2(shifted)
            alpha = tl.math.exp2(m_i - m_new)
        else:
            p = tl.exp(shifted)
            alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if BOUNDS_MASK:
            v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=col_ok[:, None],
                        other=0.0)
        else:
            v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
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
                   IS_CAUSAL: tl.constexpr, EXP2: tl.constexpr, MASK_SPLIT: tl.constexpr,
                   HEAVY_FIRST: tl.constexpr, FMA_SCALE: tl.constexpr):
    pid_m = tl.program_id(0)
    if IS_CAUSAL and HEAVY_FIRST:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    batch = pid_bh // num_q_heads
    head = pid_bh % num_q_heads
    kv_head = head // group_size

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
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

    hi = seq_len
    if IS_CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, seq_len)
    if MASK_SPLIT:
        # Key blocks wholly left of the diagonal and inside the sequence need no mask; the rest get both masks.
        free = (seq_len // BLOCK_N) * BLOCK_N
        if IS_CAUSAL:
            free = tl.minimum(free, ((pid_m * BLOCK_M) // BLOCK_N) * BLOCK_N)
        acc, m_i, l_i = _attend(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                                offs_m, offs_d, 0, free, seq_len, qk_scale, BLOCK_N, False, False, EXP2, FMA_SCALE)
        acc, m_i, l_i = _attend(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                                offs_m, offs_d, free, hi, seq_len, qk_scale, BLOCK_N, IS_CAUSAL, True, EXP2, FMA_SCALE)
    else:
        acc, m_i, l_i = _attend(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                                offs_m, offs_d, 0, hi, seq_len, qk_scale, BLOCK_N, IS_CAUSAL, True, EXP2, FMA_SCALE)

    acc = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od, acc.to(o_ptr.dtype.element_ty),
             mask=row_ok)


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
        num_q_heads, num_q_heads // num_kv_heads, seq_len, float(sm_scale) * (LOG2_E if EXP2 else 1.0),
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, IS_CAUSAL=bool(causal), EXP2=EXP2,
        MASK_SPLIT=MASK_SPLIT, HEAVY_FIRST=HEAVY_FIRST, FMA_SCALE=FMA_SCALE,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return o
