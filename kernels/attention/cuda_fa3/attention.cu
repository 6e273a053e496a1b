// Attention forward on Hopper's warpgroup tensor cores, FlashAttention-3 style: o = softmax(q kᵀ · scale) v, causal
// or not, grouped-query heads read in place, any S >= 1, head dim 64 or 128, bf16 or fp16, fp32 softmax state.
// q, k, v, o are [B, H, S, D] contiguous; TMA sees q, k, v as 3-D tensors [B x H, S, D].
//
// Why it is fast:
//   - warp specialization: warpgroup 0 is the producer, one thread issuing TMA copies (Q once, then K and V tiles
//     into a STAGES-deep shared-memory ring with full/empty mbarriers per tile); two consumer warpgroups, 64 query
//     rows each, only compute. setmaxnreg moves registers to the consumers (O, S and P live in registers);
//   - both matmuls on wgmma: S = Q Kᵀ with both operands in shared memory (TMA's 128-byte swizzle, no ldmatrix),
//     then O += P V with P taken straight from the softmax's registers (the accumulator layout of S is the A-operand
//     layout of 16-bit P), so P never touches shared memory;
//   - OVERLAP (intra-warpgroup pipelining): block j's Q Kᵀ and block j-1's P V are issued together, and block j's
//     softmax runs while P V is still on the tensor cores;
//   - PINGPONG: the two consumer warpgroups take turns issuing their matmuls (two named barriers pass a token), so
//     one's softmax (exp2 on the special-function units) runs under the other's matmuls;
//   - causal: only the diagonal blocks are masked, blocks past the diagonal are never loaded, and ORDER = 2 starts
//     the heaviest query blocks of every head first (ORDER = 1: heaviest first within a head, heads in order);
//   - GQA: query head h reads kv head h / (Hq / Hkv) through the same tensor map, no copies.
// Edges: TMA zero-fills rows past S; keys past S are masked, rows past S are not stored. Tunables come as -D
// defines from kernel.py.
#include "hopper.cuh"
#include "wgmma.cuh"

#ifndef BLOCK_N
#define BLOCK_N 128
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef PINGPONG
#define PINGPONG 1
#endif
#ifndef OVERLAP
#define OVERLAP 1
#endif
#ifndef ORDER
#define ORDER 1
#endif

constexpr int BLOCK_M = 128;                // query rows per block: 64 per consumer warpgroup
constexpr int THREADS = 384;                // producer warpgroup + 2 consumer warpgroups
constexpr int PRODUCER_REGS = 24;
constexpr int CONSUMER_REGS = 240;
constexpr int BOX_ROW = 128;                // bytes per row of a 64-column box (the swizzle span)
constexpr int Q_BOX = BLOCK_M * BOX_ROW;    // one 64-column box of the Q tile
constexpr int KV_BOX = BLOCK_N * BOX_ROW;   // one 64-column box of a K or V tile
static_assert(BLOCK_N % 16 == 0 && BLOCK_N >= 64 && BLOCK_N <= 192, "BLOCK_N: 64 to 192, a multiple of 16");
static_assert(STAGES >= 2, "STAGES must be at least 2");
static_assert(ORDER >= 0 && ORDER <= 2, "ORDER: 0 (ascending), 1 (heaviest first per head), 2 (heaviest first)");
// kernel.py passes D * BLOCK_M * 2 + STAGES * 2 * D * BLOCK_N * 2 + 2048 bytes of dynamic shared memory: the Q
// tile, the K and V rings, 1 KB to align them to the swizzle atom and 1 KB for barriers.

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
    for (int kk = 0; kk < BLOCK_N / 16; ++kk) mma_rs<FP16, D>(o, p[kk], smem_desc(sv + kk * 16 * BOX_ROW, KV_BOX, 1024));
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

// Ping-pong: a consumer waits for its token (hardware barrier 1 + c) before issuing matmuls and passes it to the
// other one after. Consumer 1 hands the first token over and keeps its last one, so every barrier phase completes.
__device__ __forceinline__ void token_wait(int c) {
    if constexpr (PINGPONG) named_barrier(1 + c, 256);
}
__device__ __forceinline__ void token_pass(int c, bool last) {
    if constexpr (PINGPONG) {
        if (!(last && c == 1)) named_barrier_arrive(2 - c, 256);
    }
}

// A consumer warpgroup: 64 query rows against every K/V block the producer brings, then O / l to global memory.
template <bool FP16, int D>
__device__ __forceinline__ void consume(const unsigned char* sq, const unsigned char* sk, const unsigned char* sv,
                                        unsigned long long* full_k, unsigned long long* full_v,
                                        unsigned long long* empty_k, unsigned long long* empty_v,
                                        unsigned long long* full_q, unsigned short* O, int S, int bh, int m_block,
                                        int n_blocks, float scale, bool causal) {
    constexpr int KV_BYTES = D * BLOCK_N * 2;
    const int c = threadIdx.x / 128 - 1, t = threadIdx.x % 128;
    const int row0 = m_block * BLOCK_M + c * 64 + (t / 32) * 16 + (t % 32) / 4;  // this thread's rows: row0, row0 + 8
    const int wg_first_row = m_block * BLOCK_M + c * 64;
    const unsigned char* q = sq + c * 64 * BOX_ROW;
    float o[D / 2], s[BLOCK_N / 2], m[2], l[2], alpha[2];
    unsigned p[BLOCK_N / 16][4];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    m[0] = m[1] = __int_as_float(0xff800000);
    l[0] = l[1] = 0.f;
    if (PINGPONG && c == 1) named_barrier_arrive(1, 256);  // consumer 0 issues first
    mbar_wait(full_q, 0);

    auto needs_mask = [&](int j) {
        const int key0 = j * BLOCK_N;
        return key0 + BLOCK_N > S || (causal && key0 + BLOCK_N - 1 > wg_first_row);
    };
    auto release = [&](unsigned long long* bar) {
        if (t == 0) mbar_arrive(bar);
    };

    int stage = 0, phase = 0;
    if constexpr (OVERLAP) {
        mbar_wait(&full_k[0], 0);
        token_wait(c);
        issue_qk<FP16, D>(s, q, sk);
        token_pass(c, false);
        wgmma_wait<0>();
        fence_regs(s);
        release(&empty_k[0]);
        softmax(s, m, l, alpha, scale, needs_mask(0), 0, row0, S, causal);
        to_p<FP16>(s, p);
        int prev = 0, prev_phase = 0;
        if (++stage == STAGES) { stage = 0; phase ^= 1; }
        for (int j = 1; j < n_blocks; ++j) {
            mbar_wait(&full_k[stage], phase);
            mbar_wait(&full_v[prev], prev_phase);
            token_wait(c);
            issue_qk<FP16, D>(s, q, sk + stage * KV_BYTES);
            issue_pv<FP16, D>(o, p, sv + prev * KV_BYTES);
            token_pass(c, false);
            wgmma_wait<1>();
            fence_regs(s);
            release(&empty_k[stage]);
            softmax(s, m, l, alpha, scale, needs_mask(j), j * BLOCK_N, row0, S, causal);
            wgmma_wait<0>();
            fence_regs(o);
            fence_p(p);
            release(&empty_v[prev]);
            rescale<D>(o, alpha);
            to_p<FP16>(s, p);
            prev = stage;
            prev_phase = phase;
            if (++stage == STAGES) { stage = 0; phase ^= 1; }
        }
        mbar_wait(&full_v[prev], prev_phase);
        token_wait(c);
        issue_pv<FP16, D>(o, p, sv + prev * KV_BYTES);
        token_pass(c, true);
        wgmma_wait<0>();
        fence_regs(o);
        fence_p(p);
        release(&empty_v[prev]);
    } else {
        for (int j = 0; j < n_blocks; ++j) {
            mbar_wait(&full_k[stage], phase);
            token_wait(c);
            issue_qk<FP16, D>(s, q, sk + stage * KV_BYTES);
            token_pass(c, false);
            wgmma_wait<0>();
            fence_regs(s);
            release(&empty_k[stage]);
            softmax(s, m, l, alpha, scale, needs_mask(j), j * BLOCK_N, row0, S, causal);
            rescale<D>(o, alpha);
            to_p<FP16>(s, p);
            mbar_wait(&full_v[stage], phase);
            token_wait(c);
            issue_pv<FP16, D>(o, p, sv + stage * KV_BYTES);
            token_pass(c, j == n_blocks - 1);
            wgmma_wait<0>();
            fence_regs(o);
            fence_p(p);
            release(&empty_v[stage]);
            if (++stage == STAGES) { stage = 0; phase ^= 1; }
        }
    }

    // The quad's partial row sums, then O / l for the rows inside S.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffff, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffff, l[h], 2);
        l[h] = 1.f / l[h];
    }
    const int col = (t % 4) * 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = row0 + h * 8;
        if (row >= S) continue;
        unsigned short* out = O + (static_cast<long long>(bh) * S + row) * D + col;
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
            const float lo = o[j * 4 + h * 2] * l[h], hi = o[j * 4 + h * 2 + 1] * l[h];
            *reinterpret_cast<unsigned*>(out + j * 8) = FP16 ? pack_f16(lo, hi) : pack_bf16(lo, hi);
        }
    }
}

template <bool FP16, int D>
__device__ __forceinline__ void attention_body(const TensorMap* map_q, const TensorMap* map_k, const TensorMap* map_v,
                                               unsigned short* O, int S, int Hq, int group, float scale,
                                               bool causal) {
    constexpr int Q_BYTES = D * BLOCK_M * 2, KV_BYTES = D * BLOCK_N * 2;
    extern __shared__ unsigned char smem_raw[];
    unsigned char* sq = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* sk = sq + Q_BYTES;
    unsigned char* sv = sk + STAGES * KV_BYTES;
    unsigned long long* bars = reinterpret_cast<unsigned long long*>(sv + STAGES * KV_BYTES);
    unsigned long long *full_k = bars, *full_v = bars + STAGES, *empty_k = bars + 2 * STAGES,
                       *empty_v = bars + 3 * STAGES, *full_q = bars + 4 * STAGES;

    const int num_m = (S + BLOCK_M - 1) / BLOCK_M;
    const int m_block = ORDER == 0 ? blockIdx.x : ORDER == 1 ? num_m - 1 - blockIdx.x : num_m - 1 - blockIdx.y;
    const int bh = ORDER == 2 ? blockIdx.x : blockIdx.y;               // batch * Hq + query head
    const int bkv = (bh / Hq) * (Hq / group) + (bh % Hq) / group;     // its kv head
    const int kv_end = causal ? min(S, (m_block + 1) * BLOCK_M) : S;
    const int n_blocks = (kv_end + BLOCK_N - 1) / BLOCK_N;

    if (threadIdx.x == 0) {
        for (int i = 0; i < STAGES; ++i) {
            mbar_init(&full_k[i], 1);
            mbar_init(&full_v[i], 1);
            mbar_init(&empty_k[i], 2);
            mbar_init(&empty_v[i], 2);
        }
        mbar_init(full_q, 1);
        mbar_fence_init();
    }
    __syncthreads();

    if (threadIdx.x < 128) {
        regs_dealloc<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(map_q);
            tma_prefetch_map(map_k);
            tma_prefetch_map(map_v);
            mbar_arrive_expect_tx(full_q, Q_BYTES);
#pragma unroll
            for (int b = 0; b < D / 64; ++b) tma_load_3d(sq + b * Q_BOX, map_q, full_q, b * 64, m_block * BLOCK_M, bh);
            int stage = 0, phase = 0;
            for (int j = 0; j < n_blocks; ++j) {
                mbar_wait(&empty_k[stage], phase ^ 1);
                mbar_arrive_expect_tx(&full_k[stage], KV_BYTES);
#pragma unroll
                for (int b = 0; b < D / 64; ++b)
                    tma_load_3d(sk + stage * KV_BYTES + b * KV_BOX, map_k, &full_k[stage], b * 64, j * BLOCK_N, bkv);
                mbar_wait(&empty_v[stage], phase ^ 1);
                mbar_arrive_expect_tx(&full_v[stage], KV_BYTES);
#pragma unroll
                for (int b = 0; b < D / 64; ++b)
                    tma_load_3d(sv + stage * KV_BYTES + b * KV_BOX, map_v, &full_v[stage], b * 64, j * BLOCK_N, bkv);
                if (++stage == STAGES) { stage = 0; phase ^= 1; }
            }
        }
    } else {
        regs_alloc<CONSUMER_REGS>();
        consume<FP16, D>(sq, sk, sv, full_k, full_v, empty_k, empty_v, full_q, O, S, bh, m_block, n_blocks, scale,
                         causal);
    }
}

#define ATTENTION_KERNEL(NAME, FP16, D)                                                                           \
    extern "C" __global__ void __launch_bounds__(THREADS, 1)                                                     \
    NAME(const __grid_constant__ TensorMap map_q, const __grid_constant__ TensorMap map_k,                       \
         const __grid_constant__ TensorMap map_v, unsigned short* O, int S, int Hq, int group, float scale,      \
         int causal) {                                                                                           \
        attention_body<FP16, D>(&map_q, &map_k, &map_v, O, S, Hq, group, scale, causal != 0);                    \
    }

ATTENTION_KERNEL(attention_bf16_d64, false, 64)
ATTENTION_KERNEL(attention_bf16_d128, false, 128)
ATTENTION_KERNEL(attention_fp16_d64, true, 64)
ATTENTION_KERNEL(attention_fp16_d128, true, 128)
