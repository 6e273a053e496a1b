// One consumer warpgroup's math on its 64 query rows: both matmuls issued on wgmma, the online softmax, P packed
// into wgmma's A fragment, and O's rescaling. Part of attention.cu, which includes it after its tile constants
// (BLOCK_N, BOX_ROW, Q_BOX, KV_BOX).
#pragma once

template <bool FP16, int N>
__device__ __forceinline__ void mma_kk(float (&d)[N / 2], unsigned long long da, unsigned long long db, int scale) {
    if constexpr (FP16) wgmma_kk_f16(d, da, db, scale);
    else wgmma_kk_bf16(d, da, db, scale);
}
template <bool FP16, int N>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long db) {
    if constexpr (FP16) wgmma_rs_f16(d, a, db, 1);
    else wgmma_rs_bf16(d, a, db, 1);
}

// S = Q Kᵀ for this warpgroup's 64 rows: D / 16 K-major slices of 16 columns, 4 per 128-byte box row.
template <bool FP16, int D>
__device__ __forceinline__ void issue_qk(float (&s)[BLOCK_N / 2], const unsigned char* sq, const unsigned char* sk) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
        mma_kk<FP16, BLOCK_N>(s, smem_desc(sq + (kk / 4) * Q_BOX + (kk % 4) * 32, 16, 1024),
                              smem_desc(sk + (kk / 4) * KV_BOX + (kk % 4) * 32, 16, 1024), kk > 0);
    wgmma_commit();
}

// O += P V: BLOCK_N / 16 slices of 16 keys; V is N-major (its 64-column boxes KV_BOX bytes apart).
template <bool FP16, int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const unsigned (&p)[BLOCK_N / 16][4],
                                         const unsigned char* sv) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
        mma_rs<FP16, D>(o, p[kk], smem_desc(sv + kk * 16 * BOX_ROW, KV_BOX, 1024));
    wgmma_commit();
}

// Online softmax of one block of scores, in place: s becomes exp2(s * scale - m) with m the running row maximum
// (scaled); alpha is the factor the rows' earlier O and l shrink by. A thread holds rows g and g + 8 of its warp's
// 16, columns 8j + 2 (lane % 4) + {0, 1}; the other three lanes of a quad hold the rest of the row.
__device__ __forceinline__ void softmax(float (&s)[BLOCK_N / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                        float scale, bool mask, int key0, int row0, int S, bool causal) {
    const int lane = threadIdx.x % 32;
    if (mask) {
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int key = key0 + j * 8 + (lane % 4) * 2 + e;
                    if (key >= S || (causal && key > row0 + h * 8)) s[j * 4 + h * 2 + e] = __int_as_float(0xff800000);
                }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = s[h * 2];
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j) mx = fmaxf(mx, fmaxf(s[j * 4 + h * 2], s[j * 4 + h * 2 + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
        const float m_new = fmaxf(m[h], mx * scale);
        const float m_use = m_new == __int_as_float(0xff800000) ? 0.f : m_new;  // a row with no key yet
        alpha[h] = ex2(m[h] - m_use);
        m[h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float v = ex2(fmaf(s[j * 4 + h * 2 + e], scale, -m_use));
                s[j * 4 + h * 2 + e] = v;
                sum += v;
            }
        l[h] = l[h] * alpha[h] + sum;
    }
}

// P in 16-bit, as wgmma's A fragment: slice kk's four registers are rows g / g + 8 at columns 2 (lane % 4) and 8 more.
template <bool FP16>
__device__ __forceinline__ void to_p(const float (&s)[BLOCK_N / 2], unsigned (&p)[BLOCK_N / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const float lo = s[kk * 8 + r * 2], hi = s[kk * 8 + r * 2 + 1];
            p[kk][r] = FP16 ? pack_f16(lo, hi) : pack_bf16(lo, hi);
        }
}

// Keeps P's registers alive (unchanged) until the wgmma that reads them is known to be done.
__device__ __forceinline__ void fence_p(unsigned (&p)[BLOCK_N / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk) fence_regs(p[kk]);
}

template <int D>
__device__ __forceinline__ void rescale(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            o[j * 4 + h * 2] *= alpha[h];
            o[j * 4 + h * 2 + 1] *= alpha[h];
        }
}
