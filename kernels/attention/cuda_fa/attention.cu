// Attention forward, FlashAttention-2 style, on the tensor cores: o = softmax(q kᵀ · scale, causal mask optional) v.
// q and o are [B, Hq, S, D], k and v [B, Hkv, S, D], contiguous, bf16 or fp16; query head h reads kv head h / group.
//
// A block owns BLOCK_M = 16 · NUM_WARPS query rows of one head, 16 per warp, and walks the keys in BLOCK_N steps:
// S = Q Kᵀ with mma.sync (Q's fragments stay in registers), an online softmax in fp32 registers (running row max
// and row sum, exp2 with the scale folded in), then O += P V with P re-packed from the S accumulators straight
// into MMA A-fragments, never through shared memory. K and V tiles are double-buffered with cp.async, so the next
// step's loads overlap this step's math. Causal blocks stop at the diagonal and are scheduled longest first.
// Edges: query and key rows past S are zero-filled on load, keys past S are masked, rows past S are not stored.
// Tunables arrive as -D defines from kernel.py; the defaults here are for compiling the file on its own.
#include "ptx.cuh"

#ifndef NUM_WARPS
#define NUM_WARPS 4
#endif
#ifndef BLOCK_N
#define BLOCK_N 64
#endif

constexpr int THREADS = NUM_WARPS * 32;
constexpr int BLOCK_M = 16 * NUM_WARPS;
// kernel.py passes (BLOCK_M + 4 * BLOCK_N) * (D + 8) * 2 bytes of dynamic shared memory: Q, then K and V twice.

static_assert(BLOCK_N % 16 == 0, "BLOCK_N must be a multiple of 16, the K of one MMA");

__device__ __forceinline__ float exp2_approx(float x) {  // 2^x; -inf gives 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// ROWS rows of D elements starting at `row0` into shared memory (row stride D + 8); rows at or past S become zeros.
template <int D, int ROWS>
__device__ __forceinline__ void load_rows(unsigned short* dst, const unsigned short* src, int row0, int S, int tid) {
    constexpr int CHUNKS = ROWS * D / 8;
#pragma unroll
    for (int i = 0; i < (CHUNKS + THREADS - 1) / THREADS; ++i) {
        const int c = tid + i * THREADS;
        if (CHUNKS % THREADS == 0 || c < CHUNKS) {
            const int row = c / (D / 8), col = c % (D / 8) * 8;
            const bool ok = row0 + row < S;
            cp_async_16(smem_addr(dst + row * (D + 8) + col), ok ? src + (long long)(row0 + row) * D + col : src,
                        ok ? 16 : 0);
        }
    }
}

template <bool BF16, int D>
__device__ __forceinline__ void attention_block(unsigned short* smem, const unsigned short* __restrict__ Q,
                                                const unsigned short* __restrict__ K,
                                                const unsigned short* __restrict__ V, unsigned short* __restrict__ O,
                                                int S, int heads_q, int group, float scale_log2, int causal) {
    constexpr int STRIDE = D + 8;  // padded rows: the eight rows of one ldmatrix fall in different banks
    constexpr int D_STEPS = D / 16;
    constexpr int S_TILES = BLOCK_N / 8;
    constexpr int O_TILES = D / 8;
    unsigned short* sQ = smem;
    unsigned short* sK = sQ + BLOCK_M * STRIDE;
    unsigned short* sV = sK + 2 * BLOCK_N * STRIDE;

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;  // this lane holds rows g and g + 8, columns 2t and 2t + 1 of a tile
    const int bh = blockIdx.x;             // batch * heads_q + head: heads sharing a kv head run side by side
    const int m0 = (gridDim.y - 1 - blockIdx.y) * BLOCK_M;
    const int heads_kv = heads_q / group;
    const int kv_bh = bh / heads_q * heads_kv + bh % heads_q / group;
    const unsigned short* q = Q + (long long)bh * S * D;
    const unsigned short* k = K + (long long)kv_bh * S * D;
    const unsigned short* v = V + (long long)kv_bh * S * D;
    unsigned short* o = O + (long long)bh * S * D;

    const int kv_end = causal ? min(S, m0 + BLOCK_M) : S;
    const int n_blocks = (kv_end + BLOCK_N - 1) / BLOCK_N;
    load_rows<D, BLOCK_M>(sQ, q, m0, S, tid);
    load_rows<D, BLOCK_N>(sK, k, 0, S, tid);
    load_rows<D, BLOCK_N>(sV, v, 0, S, tid);
    cp_async_commit();

    const float neg_inf = __int_as_float(0xff800000);
    const int row_a = m0 + warp * 16 + g, row_b = row_a + 8;
    float acc[O_TILES][4] = {};
    float row_max[2] = {neg_inf, neg_inf};
    float row_sum[2] = {0.f, 0.f};  // this lane's share; the quad's shares are added at the end
    unsigned qf[D_STEPS][4];

    for (int j = 0; j < n_blocks; ++j) {
        cp_async_wait<0>();
        __syncthreads();  // step j's K and V (and Q) are in; everyone is done with step j - 1's buffers
        if (j == 0) {
#pragma unroll
            for (int kd = 0; kd < D_STEPS; ++kd)
                ldmatrix_x4(qf[kd], smem_addr(sQ + (warp * 16 + lane % 16) * STRIDE + kd * 16 + lane / 16 * 8));
        }
        if (j + 1 < n_blocks) {
            const int buf = (j + 1) % 2;
            load_rows<D, BLOCK_N>(sK + buf * BLOCK_N * STRIDE, k, (j + 1) * BLOCK_N, S, tid);
            load_rows<D, BLOCK_N>(sV + buf * BLOCK_N * STRIDE, v, (j + 1) * BLOCK_N, S, tid);
        }
        cp_async_commit();
        const unsigned short* k_s = sK + (j % 2) * BLOCK_N * STRIDE;
        const unsigned short* v_s = sV + (j % 2) * BLOCK_N * STRIDE;

        // S = Q Kᵀ: K's rows are keys, so a plain ldmatrix of a 16-key x 16-dim tile gives the B fragments of
        // two 8-key MMA tiles (matrices: keys 0-7 dims 0-7, keys 0-7 dims 8-15, keys 8-15 dims 0-7, 8-15 8-15).
        float s[S_TILES][4] = {};
#pragma unroll
        for (int kd = 0; kd < D_STEPS; ++kd) {
#pragma unroll
            for (int nj = 0; nj < S_TILES / 2; ++nj) {
                unsigned r[4];
                ldmatrix_x4(r, smem_addr(k_s + (nj * 16 + lane % 8 + lane / 16 * 8) * STRIDE + kd * 16 +
                                         lane / 8 % 2 * 8));
                mma_16x8x16<BF16>(s[2 * nj], qf[kd], r[0], r[1]);
                mma_16x8x16<BF16>(s[2 * nj + 1], qf[kd], r[2], r[3]);
            }
        }

        // Scale into log2 units and mask keys past S and, when causal, past the row.
        const int n0 = j * BLOCK_N;
        const bool masked = n0 + BLOCK_N > S || (causal && n0 + BLOCK_N - 1 > m0);
        float step_max[2] = {row_max[0], row_max[1]};
#pragma unroll
        for (int nt = 0; nt < S_TILES; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float x = s[nt][e] * scale_log2;
                if (masked) {
                    const int key = n0 + nt * 8 + 2 * t + (e & 1);
                    const int row = e < 2 ? row_a : row_b;
                    if (key >= S || (causal && key > row)) x = neg_inf;
                }
                s[nt][e] = x;
                step_max[e / 2] = fmaxf(step_max[e / 2], x);
            }
        }
        float base[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // the quad's four lanes share a row
            step_max[h] = fmaxf(step_max[h], __shfl_xor_sync(0xffffffffu, step_max[h], 1));
            step_max[h] = fmaxf(step_max[h], __shfl_xor_sync(0xffffffffu, step_max[h], 2));
            base[h] = step_max[h] == neg_inf ? 0.f : step_max[h];  // a row with nothing seen yet stays at zero
            const float rescale = exp2_approx(row_max[h] - base[h]);
            row_max[h] = step_max[h];
            row_sum[h] *= rescale;
#pragma unroll
            for (int dt = 0; dt < O_TILES; ++dt) {
                acc[dt][2 * h] *= rescale;
                acc[dt][2 * h + 1] *= rescale;
            }
        }
#pragma unroll
        for (int nt = 0; nt < S_TILES; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                s[nt][e] = exp2_approx(s[nt][e] - base[e / 2]);
                row_sum[e / 2] += s[nt][e];
            }
        }

        // O += P V: the accumulators of two adjacent 8-key tiles are exactly the A fragment of one 16-key step.
        // V's rows are keys, so the transposing ldmatrix gives the B fragments of two 8-dim output tiles.
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            const unsigned p[4] = {pack2<BF16>(s[2 * kk][0], s[2 * kk][1]), pack2<BF16>(s[2 * kk][2], s[2 * kk][3]),
                                   pack2<BF16>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack2<BF16>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dj = 0; dj < D / 16; ++dj) {
                unsigned r[4];
                ldmatrix_x4_trans(r, smem_addr(v_s + (kk * 16 + lane % 16) * STRIDE + dj * 16 + lane / 16 * 8));
                mma_16x8x16<BF16>(acc[2 * dj], p, r[0], r[1]);
                mma_16x8x16<BF16>(acc[2 * dj + 1], p, r[2], r[3]);
            }
        }
    }
    cp_async_wait<0>();

    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float total = row_sum[h];
        total += __shfl_xor_sync(0xffffffffu, total, 1);
        total += __shfl_xor_sync(0xffffffffu, total, 2);
        inv[h] = total > 0.f ? 1.f / total : 0.f;
    }
#pragma unroll
    for (int dt = 0; dt < O_TILES; ++dt) {
        const int col = dt * 8 + 2 * t;
        if (row_a < S)
            *reinterpret_cast<unsigned*>(o + (long long)row_a * D + col) =
                pack2<BF16>(acc[dt][0] * inv[0], acc[dt][1] * inv[0]);
        if (row_b < S)
            *reinterpret_cast<unsigned*>(o + (long long)row_b * D + col) =
                pack2<BF16>(acc[dt][2] * inv[1], acc[dt][3] * inv[1]);
    }
}

#define ATTENTION_KERNEL(NAME, IS_BF16, HEAD_DIM)                                                                    \
    extern "C" __global__ void __launch_bounds__(THREADS)                                                           \
    NAME(const unsigned short* Q, const unsigned short* K, const unsigned short* V, unsigned short* O, int S,      \
         int heads_q, int group, float scale_log2, int causal) {                                                   \
        extern __shared__ __align__(16) unsigned short smem[];                                                     \
        attention_block<IS_BF16, HEAD_DIM>(smem, Q, K, V, O, S, heads_q, group, scale_log2, causal);               \
    }

ATTENTION_KERNEL(attention_bf16_d64, true, 64)
ATTENTION_KERNEL(attention_bf16_d128, true, 128)
ATTENTION_KERNEL(attention_fp16_d64, false, 64)
ATTENTION_KERNEL(attention_fp16_d128, false, 128)
