// C = A B on the tensor cores: A [M, K], B [K, N], C [M, N], row-major bf16 or fp16, fp32 accumulation, any M, N, K.
//
// Each block computes one BLOCK_M x BLOCK_N tile of C, walking K in BLOCK_K steps; its WARPS_M x WARPS_N warps
// each own a sub-tile made of 16x8 mma.sync tiles. Why it is reasonably fast:
//   - tiles stream through shared memory in a NUM_STAGES-deep cp.async ring, so the loads of the next K-steps
//     overlap the multiply-adds of the current one;
//   - ldmatrix feeds the MMA fragments straight from shared memory, whose rows are padded by 16 bytes so the eight
//     rows of one 8x8 matrix fall in different banks;
//   - tiles are visited in grouped order (GROUP_M tile-rows advance together along N) to keep A and B in L2.
// Edges: rows and columns past the matrix are zero-filled on load and masked on store. When K or N is not a multiple
// of 8 (rows not 16-byte aligned) the `_unaligned` kernels load element by element instead of with cp.async.
// Tunables arrive as -D defines from kernel.py; the defaults here are for compiling the file on its own.
#include "ptx.cuh"

#ifndef BLOCK_M
#define BLOCK_M 128
#endif
#ifndef BLOCK_N
#define BLOCK_N 128
#endif
#ifndef BLOCK_K
#define BLOCK_K 32
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 4
#endif
#ifndef NUM_STAGES
#define NUM_STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2  // blocks per SM the register allocation must allow (__launch_bounds__)
#endif

constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int WARP_TILE_M = BLOCK_M / WARPS_M;
constexpr int WARP_TILE_N = BLOCK_N / WARPS_N;
constexpr int MMA_M = WARP_TILE_M / 16;
constexpr int MMA_N = WARP_TILE_N / 8;
constexpr int A_STRIDE = BLOCK_K + 8;  // elements per shared-memory row, padded
constexpr int B_STRIDE = BLOCK_N + 8;
constexpr int A_STAGE = BLOCK_M * A_STRIDE;
constexpr int B_STAGE = BLOCK_K * B_STRIDE;
// kernel.py passes NUM_STAGES * (A_STAGE + B_STAGE) * 2 bytes of dynamic shared memory.

static_assert(BLOCK_M % (16 * WARPS_M) == 0, "each warp needs a multiple of 16 rows: BLOCK_M % (16 * WARPS_M) == 0");
static_assert(BLOCK_N % (16 * WARPS_N) == 0, "each warp needs a multiple of 16 columns: BLOCK_N % (16 * WARPS_N) == 0");
static_assert(BLOCK_K % 16 == 0, "BLOCK_K must be a multiple of 16, the K of one MMA");
static_assert(NUM_STAGES >= 2, "NUM_STAGES must be at least 2");
static_assert(GROUP_M >= 1, "GROUP_M must be at least 1");

// One 8-element (16-byte) chunk of a row into shared memory. `left` is how many elements the row still has from
// `src` on (<= 0: none); `base` is any valid address of the matrix, read by no one, for chunks wholly outside it.
template <bool VEC>
__device__ __forceinline__ void copy_chunk(unsigned short* dst, const unsigned short* src, const unsigned short* base,
                                           bool row_ok, int left) {
    if constexpr (VEC) {  // rows are 16-byte aligned and hold a multiple of 8 elements: a chunk is all in or all out
        const bool ok = row_ok && left > 0;
        cp_async_16(smem_addr(dst), ok ? src : base, ok ? 16 : 0);
    } else {
        unsigned* dst32 = reinterpret_cast<unsigned*>(dst);
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
            const unsigned lo = (row_ok && j < left) ? src[j] : 0u;
            const unsigned hi = (row_ok && j + 1 < left) ? src[j + 1] : 0u;
            dst32[j / 2] = lo | (hi << 16);
        }
    }
}

// The A tile (rows m0.., columns k0..) and the B tile (rows k0.., columns n0..) of one K-step into one stage.
template <bool VEC>
__device__ __forceinline__ void load_stage(unsigned short* sA, unsigned short* sB, const unsigned short* A,
                                           const unsigned short* B, int M, int N, int K, int m0, int n0, int k0,
                                           int tid) {
    constexpr int A_CHUNKS = BLOCK_M * BLOCK_K / 8;
    constexpr int B_CHUNKS = BLOCK_K * BLOCK_N / 8;
#pragma unroll
    for (int i = 0; i < (A_CHUNKS + THREADS - 1) / THREADS; ++i) {
        const int c = tid + i * THREADS;
        if (A_CHUNKS % THREADS == 0 || c < A_CHUNKS) {
            const int row = c / (BLOCK_K / 8), col = c % (BLOCK_K / 8) * 8;
            const int gm = m0 + row, gk = k0 + col;
            copy_chunk<VEC>(sA + row * A_STRIDE + col, A + (long long)gm * K + gk, A, gm < M, K - gk);
        }
    }
#pragma unroll
    for (int i = 0; i < (B_CHUNKS + THREADS - 1) / THREADS; ++i) {
        const int c = tid + i * THREADS;
        if (B_CHUNKS % THREADS == 0 || c < B_CHUNKS) {
            const int row = c / (BLOCK_N / 8), col = c % (BLOCK_N / 8) * 8;
            const int gk = k0 + row, gn = n0 + col;
            copy_chunk<VEC>(sB + row * B_STRIDE + col, B + (long long)gk * N + gn, B, gk < K, N - gn);
        }
    }
}

template <bool BF16, bool VEC>
__device__ __forceinline__ void gemm_tile(unsigned short* smem, const unsigned short* __restrict__ A,
                                          const unsigned short* __restrict__ B, unsigned short* __restrict__ C,
                                          int M, int N, int K) {
    unsigned short* sA = smem;
    unsigned short* sB = smem + NUM_STAGES * A_STAGE;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;

    // Grouped order: consecutive blocks sweep GROUP_M tile-rows column by column.
    const int tiles_m = (M + BLOCK_M - 1) / BLOCK_M, tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (int)blockIdx.x / per_group * GROUP_M;
    const int group_rows = min(tiles_m - first_m, GROUP_M);
    const int m0 = (first_m + (int)blockIdx.x % per_group % group_rows) * BLOCK_M;
    const int n0 = ((int)blockIdx.x % per_group / group_rows) * BLOCK_N;

    float acc[MMA_M][MMA_N][4] = {};
    const int k_tiles = (K + BLOCK_K - 1) / BLOCK_K;
#pragma unroll
    for (int s = 0; s < NUM_STAGES - 1; ++s) {
        if (s < k_tiles) load_stage<VEC>(sA + s * A_STAGE, sB + s * B_STAGE, A, B, M, N, K, m0, n0, s * BLOCK_K, tid);
        cp_async_commit();  // one group per K-step, empty or not, so the wait count below stays right
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<NUM_STAGES - 2>();  // this thread's copies of step kt have landed ...
        __syncthreads();                  // ... everyone's have, and everyone is done with step kt - 1's stage
        const int next = kt + NUM_STAGES - 1;
        if (next < k_tiles) {
            const int s = next % NUM_STAGES;
            load_stage<VEC>(sA + s * A_STAGE, sB + s * B_STAGE, A, B, M, N, K, m0, n0, next * BLOCK_K, tid);
        }
        cp_async_commit();

        const unsigned short* a_s = sA + (kt % NUM_STAGES) * A_STAGE + (warp_m * WARP_TILE_M) * A_STRIDE;
        const unsigned short* b_s = sB + (kt % NUM_STAGES) * B_STAGE + warp_n * WARP_TILE_N;
#pragma unroll
        for (int kk = 0; kk < BLOCK_K; kk += 16) {
            unsigned a[MMA_M][4];
            unsigned b[MMA_N][2];
#pragma unroll
            for (int mi = 0; mi < MMA_M; ++mi)  // rows 0-15 of the 16x16 A tile at k and k + 8
                ldmatrix_x4(a[mi], smem_addr(a_s + (mi * 16 + lane % 16) * A_STRIDE + kk + lane / 16 * 8));
#pragma unroll
            for (int nj = 0; nj < MMA_N / 2; ++nj) {  // a 16x16 B tile: both k halves of two 8-column MMA tiles
                unsigned r[4];
                ldmatrix_x4_trans(r, smem_addr(b_s + (kk + lane % 16) * B_STRIDE + nj * 16 + lane / 16 * 8));
                b[2 * nj][0] = r[0];
                b[2 * nj][1] = r[1];
                b[2 * nj + 1][0] = r[2];
                b[2 * nj + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < MMA_M; ++mi)
#pragma unroll
                for (int ni = 0; ni < MMA_N; ++ni) mma_16x8x16<BF16>(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
        }
    }
    cp_async_wait<0>();

    // This lane holds rows g and g + 8, columns 2t and 2t + 1 of every 16x8 tile.
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mi = 0; mi < MMA_M; ++mi) {
#pragma unroll
        for (int ni = 0; ni < MMA_N; ++ni) {
            const int col = n0 + warp_n * WARP_TILE_N + ni * 8 + 2 * t;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int row = m0 + warp_m * WARP_TILE_M + mi * 16 + g + half * 8;
                if (row >= M) continue;
                const float x0 = acc[mi][ni][2 * half], x1 = acc[mi][ni][2 * half + 1];
                unsigned short* dst = C + (long long)row * N + col;
                if (N % 2 == 0 && col + 1 < N) {  // both in the row, and 4-byte aligned
                    *reinterpret_cast<unsigned*>(dst) = pack2<BF16>(x0, x1);
                } else {
                    if (col < N) dst[0] = round16<BF16>(x0);
                    if (col + 1 < N) dst[1] = round16<BF16>(x1);
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_bf16(const unsigned short* A, const unsigned short* B, unsigned short* C, int M, int N, int K) {
    extern __shared__ __align__(16) unsigned short smem[];
    gemm_tile<true, true>(smem, A, B, C, M, N, K);
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_bf16_unaligned(const unsigned short* A, const unsigned short* B, unsigned short* C, int M, int N, int K) {
    extern __shared__ __align__(16) unsigned short smem[];
    gemm_tile<true, false>(smem, A, B, C, M, N, K);
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_fp16(const unsigned short* A, const unsigned short* B, unsigned short* C, int M, int N, int K) {
    extern __shared__ __align__(16) unsigned short smem[];
    gemm_tile<false, true>(smem, A, B, C, M, N, K);
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_fp16_unaligned(const unsigned short* A, const unsigned short* B, unsigned short* C, int M, int N, int K) {
    extern __shared__ __align__(16) unsigned short smem[];
    gemm_tile<false, false>(smem, A, B, C, M, N, K);
}
