// Attention forward on Hopper's warpgroup tensor cores, FlashAttention-3 style: o = softmax(q kᵀ · scale) v, causal
// or not, grouped-query heads read in place, any S >= 1, head dim 64 or 128, bf16 or fp16, fp32 softmax state.
// q, k, v, o are [B, H, S, D] contiguous; TMA sees q, k, v as 3-D tensors [B x H, S, D].
//
// Why it is fast:
//   - warp specialization: warpgroup 0 is the producer, one thread issuing TMA copies (Q once, then K and V tiles
//     into a STAGES-deep shared-memory ring with full/empty mbarriers per tile); CONSUMERS warpgroups of 64 query
//     rows each only compute. setmaxnreg moves registers to the consumers (O, S and P live in registers);
//   - CONSUMERS = 3 (head dim 64 only): 192-row tiles. O is half the size at D = 64, so a third consumer fits in the
//     register file (160 each instead of 240); each K/V tile then serves 192 query rows, and with three warpgroups
//     taking turns two softmaxes hide under every matmul, which fills the tensor cores better (FlashAttention-3
//     takes 192-row tiles at D = 64 too);
//   - both matmuls on wgmma: S = Q Kᵀ with both operands in shared memory (TMA's 128-byte swizzle, no ldmatrix),
//     then O += P V with P taken straight from the softmax's registers (the accumulator layout of S is the A-operand
//     layout of 16-bit P), so P never touches shared memory;
//   - OVERLAP (intra-warpgroup pipelining): block j's Q Kᵀ and block j-1's P V are issued together, and block j's
//     softmax runs while P V is still on the tensor cores;
//   - PINGPONG: the consumer warpgroups take turns issuing their matmuls (a token passed round them over one named
//     barrier each), so one's softmax (exp2 on the special-function units) runs under the others' matmuls;
//   - PERSISTENT (non-causal): one block per SM walks the tiles, and the producer loads the next tile's Q and first
//     K/V blocks while the consumers finish the last one (its final P V and the stores of O);
//   - causal and persistent (SPAN, kernel.py's CAUSAL_PERSISTENT, for short sequences, whose tiles are a few
//     blocks long, so a block's start and the wait for its Q weigh): each block walks a contiguous run of about
//     tiles / gridDim.x tiles in ORDER 1, every head's 1, 2, ... num_m blocks long tiles in turn, so every run holds
//     about the same work and reads its heads' K and V while they are in L2;
//   - causal: only the diagonal blocks are masked, blocks past the diagonal are never loaded, and ORDER = 1 (the
//     default) runs a head's query blocks together, heaviest first, so its K and V stay in L2 and the long blocks
//     start early; with one block per tile the hardware hands the blocks of these unequal tiles to SMs as they
//     free up, and DYNAMIC below does the same on a persistent grid (kernel.py's table takes it wherever it won).
//     ORDER = 2 takes every head's heaviest block first and loses L2 reuse; ORDER = 0 is ascending;
//   - causal and dynamic (kernel.py's CAUSAL_DYNAMIC): one block per SM, each taking its next tile from a counter in
//     global memory (an atomic add), in ORDER 1's order, so the tiles go out heaviest first head by head as blocks
//     free up, as the hardware would hand out one block per tile, but without a block's start per tile, and with the
//     next tile's Q (Q_BUFFERS 2) and first K and V loaded under the current tile's end. The producer takes each
//     tile and passes it to the consumers beside its Q; the last block to finish sets the counter back to zero for
//     the next launch;
//   - ALIGN_END (causal): a head's tiles are cut from its last row back, so where BLOCK_M does not divide S the one
//     partial tile is the head's first, which sees a block or two of keys, instead of its last, which sees them all
//     (S = 2048 on 192-row tiles: 64 rows of padding against all 2048 keys, 6% of the head's work). Rows before
//     row 0 load as zeros (TMA fills outside the tensor), are masked and are stored nowhere (a consumer that
//     starts before row 0 stores from its registers, O_TMA or not: a TMA store from there stops the kernel);
//   - SKIP_IDLE: where BLOCK_M does not divide a head's rows, the last tile's consumers past the last row (the
//     first tile's before row 0 with ALIGN_END) issue no matmul, so the others have the tensor cores to themselves:
//     at S = 1024 on 192-row tiles two of the last tile's three consumers hold padding only. They walk the tile's
//     barriers as the others do (consume_tile with WORK false), so every barrier sees the arrivals it counts;
//   - GQA: query head h reads kv head h / (Hq / Hkv) through the same tensor map, no copies; packed (kernel.py's
//     PACK_GQA, non-causal), the query heads of one kv head are a single head of `rows` = G x S rows (contiguous in
//     q and o), cut into tiles with no partial tile at each query head's end; keys stay S per kv head;
//   - O_TMA: each consumer writes its finished 64 rows of O to a staging buffer of its own in shared memory (TMA's
//     128-byte swizzle: no bank conflicts) and one thread hands them to TMA, so the warps go on to the next tile
//     while the copy engine stores O in whole 128-byte rows (stores straight from the registers write 16 bytes of
//     each 32-byte sector per instruction). Costs 64 x D x 2 bytes of shared memory per consumer.
//   - Q_BUFFERS = 2 (persistent grids): two Q tiles in shared memory, so the producer loads the next tile's Q as soon
//     as it has issued this tile's K and V, instead of when the consumers let go of the one Q buffer near the tile's
//     end; the next tile's first Q Kᵀ then finds its Q in place. Short sequences pay the Q load's latency once per
//     few K/V blocks, so it weighs there. Costs one more Q tile of shared memory.
// Edges: TMA zero-fills rows past `rows` (S unpacked); keys past S are masked, rows past `rows` are not stored.
// Tunables come as -D defines from kernel.py.
#include "hopper.cuh"
#include "wgmma.cuh"

#ifndef BLOCK_N
#define BLOCK_N 192
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
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef O_TMA
#define O_TMA 0
#endif
#ifndef Q_BUFFERS
#define Q_BUFFERS 1
#endif
#ifndef ALIGN_END
#define ALIGN_END 0
#endif
#ifndef SKIP_IDLE
#define SKIP_IDLE 0
#endif

constexpr int BLOCK_M = 64 * CONSUMERS;     // query rows per block: 64 per consumer warpgroup
constexpr int THREADS = 128 * (CONSUMERS + 1);  // a producer warpgroup + the consumer warpgroups
constexpr int PRODUCER_REGS = 24;
// What the consumers may take of the 65536 registers of the block (one block per SM) once the producer is down to
// PRODUCER_REGS, rounded down to setmaxnreg's multiple of 8: 240 for two (as FlashAttention-3), 160 for three.
constexpr int CONSUMER_REGS = (65536 - 128 * PRODUCER_REGS) / (128 * CONSUMERS) / 8 * 8;
static_assert(CONSUMERS == 2 || CONSUMERS == 3, "CONSUMERS: 2 or 3 consumer warpgroups");
static_assert(128 * PRODUCER_REGS + 128 * CONSUMERS * CONSUMER_REGS <= 65536, "register budgets over the file");
constexpr int BOX_ROW = 128;                // bytes per row of a 64-column box (the swizzle span)
constexpr int Q_BOX = BLOCK_M * BOX_ROW;    // one 64-column box of the Q tile
constexpr int KV_BOX = BLOCK_N * BOX_ROW;   // one 64-column box of a K or V tile
static_assert(BLOCK_N % 16 == 0 && BLOCK_N >= 64 && BLOCK_N <= 192,
              "BLOCK_N: 64, 96, 128, 160, 176 or 192 (the widths wgmma.cuh has wrappers for)");
static_assert(STAGES >= 2, "STAGES must be at least 2");
static_assert(ORDER >= 0 && ORDER <= 2, "ORDER: 0 (ascending), 1 (heaviest first per head), 2 (heaviest first)");
static_assert(Q_BUFFERS == 1 || Q_BUFFERS == 2, "Q_BUFFERS: 1 or 2 Q tiles");
// kernel.py launches THREADS threads with Q_BUFFERS * D * BLOCK_M * 2 + STAGES * 2 * D * BLOCK_N * 2 (+ D * BLOCK_M
// * 2 with O_TMA) + 2048 bytes of dynamic shared memory: the Q tiles, the K and V rings, O's staging buffers, 1 KB to
// align them to the swizzle atom and 1 KB for barriers.

#include "warpgroup.cuh"

// Ping-pong: a consumer waits for its token (hardware barrier 1 + c, its 128 threads and the 128 of the one before)
// before issuing matmuls and passes it round to the next one (c + 1, the last to 0) after, so they issue in turn
// 0, 1, .., 0, 1, ... The last consumer hands the first token over and keeps its last one, so every barrier phase
// completes: each barrier sees as many arrivals as waits per tile.
__device__ __forceinline__ void token_wait(int c) {
    if constexpr (PINGPONG) named_barrier(1 + c, 256);
}
__device__ __forceinline__ void token_pass(int c, bool last) {
    if constexpr (PINGPONG) {
        if (!(last && c == CONSUMERS - 1)) named_barrier_arrive(1 + (c + 1) % CONSUMERS, 256);
    }
}

// The shared-memory layout and the barriers both roles walk: Q_BUFFERS Q tiles, then STAGES K tiles and STAGES V
// tiles, then with O_TMA a 64-row staging buffer of O per consumer (every part a multiple of 1 KB: swizzle-aligned).
template <int D>
struct Smem {
    static constexpr int Q_BYTES = D * BLOCK_M * 2, KV_BYTES = D * BLOCK_N * 2, O_BYTES = 64 * D * 2;
    unsigned char *q, *k, *v, *o;
    unsigned long long *full_k, *full_v, *empty_k, *empty_v, *full_q, *empty_q;
    int* tile;  // per Q buffer: the tile its Q belongs to (DYNAMIC), or -1 for "no more tiles"
    __device__ __forceinline__ explicit Smem(unsigned char* raw) {
        q = raw + ((1024 - (smem_u32(raw) & 1023)) & 1023);
        k = q + Q_BUFFERS * Q_BYTES;
        v = k + STAGES * KV_BYTES;
        o = v + STAGES * KV_BYTES;
        full_k = reinterpret_cast<unsigned long long*>(o + (O_TMA ? CONSUMERS * O_BYTES : 0));
        full_v = full_k + STAGES;
        empty_k = full_v + STAGES;
        empty_v = empty_k + STAGES;
        full_q = empty_v + STAGES;
        empty_q = full_q + Q_BUFFERS;
        tile = reinterpret_cast<int*>(empty_q + Q_BUFFERS);
    }
};

// A ring position: slot and the parity of its current use (a ring of SLOTS: STAGES for K and V, Q_BUFFERS for Q).
template <int SLOTS>
struct RingOf {
    int stage = 0, phase = 0;
    __device__ __forceinline__ void advance() {
        if (++stage == SLOTS) { stage = 0; phase ^= 1; }
    }
};
using Ring = RingOf<STAGES>;
using QRing = RingOf<Q_BUFFERS>;

// Work tile `tile` of `tiles` = (B x Hq) x num_m: ORDER 0 and 1 walk a head's query blocks together (its K and V stay
// in L2), 1 from the heaviest (causal: the last rows see the most keys); 2 takes every head's heaviest block first.
struct Tile {
    int m_block, bh, n_blocks, first_row;
    __device__ __forceinline__ Tile(int tile, int num_m, int heads, int S, bool causal) {
        if (ORDER == 2) {
            bh = tile % heads;
            m_block = num_m - 1 - tile / heads;
        } else {
            bh = tile / num_m;
            m_block = ORDER == 1 ? num_m - 1 - tile % num_m : tile % num_m;
        }
        // ALIGN_END (causal): the tiles end on the last row, so the one partial tile is the first, which sees the
        // fewest keys; its rows before row 0 are loaded as zeros, fully masked and stored nowhere.
        first_row = m_block * BLOCK_M - (ALIGN_END && causal ? num_m * BLOCK_M - S : 0);
        const int kv_end = causal ? min(S, first_row + BLOCK_M) : S;
        n_blocks = (kv_end + BLOCK_N - 1) / BLOCK_N;
    }
};

// How a block finds its tiles (kernel.py's `walk`): one (a block per tile) or every gridDim.x-th (persistent); a
// contiguous run, block b taking tiles [b * tiles / gridDim.x, (b + 1) * tiles / gridDim.x); or its first tile
// blockIdx.x and each next one from the counter.
enum WalkMode { STRIDED = 0, SPAN = 1, DYNAMIC = 2 };
struct Walk {
    int first, end, step;
    __device__ __forceinline__ Walk(int tiles, int mode) {
        if (mode == SPAN) {
            first = static_cast<int>(static_cast<long long>(blockIdx.x) * tiles / gridDim.x);
            end = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * tiles / gridDim.x);
            step = 1;
        } else {
            first = blockIdx.x, end = tiles, step = gridDim.x;
        }
    }
};

// The producer's next tile with DYNAMIC: gridDim.x first tiles were handed out by blockIdx.x, the counter numbers the
// rest. A block that draws past the last tile counts itself done; the last one done sets both counters back to zero
// (every block has drawn its last by then), so the next launch starts from zero.
__device__ __forceinline__ int next_dynamic(int* counter, int tiles) {
    const int tile = gridDim.x + atomicAdd(counter, 1);
    if (tile >= tiles) {
        __threadfence();
        if (atomicAdd(counter + 1, 1) == static_cast<int>(gridDim.x) - 1) {
            counter[0] = 0;
            counter[1] = 0;
        }
    }
    return tile;
}

// The producer (one thread): per tile, Q once the consumers are done with that Q buffer's last tile (with DYNAMIC the
// tile's number beside it), then K and V of every block into the ring, as far ahead as the ring's free slots allow.
// With DYNAMIC a tile number of -1 after the last tile tells the consumers to stop.
template <int D>
__device__ __forceinline__ void produce(const Smem<D>& sm, const TensorMap* map_q, const TensorMap* map_k,
                                        const TensorMap* map_v, int S, int rows, int Hq, int group, int heads,
                                        bool causal, int mode, int* counter) {
    const int num_m = (rows + BLOCK_M - 1) / BLOCK_M, tiles = num_m * heads;
    const Walk walk(tiles, mode);
    Ring ring;
    QRing qs;
    for (int tile = walk.first; tile < walk.end;
         tile = mode == DYNAMIC ? next_dynamic(counter, tiles) : tile + walk.step) {
        const Tile w(tile, num_m, heads, S, causal);
        const int bkv = (w.bh / Hq) * (Hq / group) + (w.bh % Hq) / group;  // the query head's kv head
        unsigned char* q = sm.q + qs.stage * Smem<D>::Q_BYTES;
        mbar_wait(&sm.empty_q[qs.stage], qs.phase ^ 1);
        sm.tile[qs.stage] = tile;  // published by the arrive below (release), read after the consumers' wait
        mbar_arrive_expect_tx(&sm.full_q[qs.stage], Smem<D>::Q_BYTES);
#pragma unroll
        for (int b = 0; b < D / 64; ++b)
            tma_load_3d(q + b * Q_BOX, map_q, &sm.full_q[qs.stage], b * 64, w.first_row, w.bh);
        qs.advance();
        for (int j = 0; j < w.n_blocks; ++j) {
            const int st = ring.stage, offset = st * Smem<D>::KV_BYTES;
            mbar_wait(&sm.empty_k[st], ring.phase ^ 1);
            mbar_arrive_expect_tx(&sm.full_k[st], Smem<D>::KV_BYTES);
#pragma unroll
            for (int b = 0; b < D / 64; ++b)
                tma_load_3d(sm.k + offset + b * KV_BOX, map_k, &sm.full_k[st], b * 64, j * BLOCK_N, bkv);
            mbar_wait(&sm.empty_v[st], ring.phase ^ 1);
            mbar_arrive_expect_tx(&sm.full_v[st], Smem<D>::KV_BYTES);
#pragma unroll
            for (int b = 0; b < D / 64; ++b)
                tma_load_3d(sm.v + offset + b * KV_BOX, map_v, &sm.full_v[st], b * 64, j * BLOCK_N, bkv);
            ring.advance();
        }
    }
    if (mode == DYNAMIC) {
        mbar_wait(&sm.empty_q[qs.stage], qs.phase ^ 1);
        sm.tile[qs.stage] = -1;
        mbar_arrive(&sm.full_q[qs.stage]);
    }
}

// O / l for this thread's two rows, those inside `rows`, straight from the registers (the quad's partial row sums
// first).
template <bool FP16, int D>
__device__ __forceinline__ void store_o(const float (&o)[D / 2], float (&l)[2], unsigned short* O, int rows,
                                        int bh, int row0) {
    const int col = (threadIdx.x % 4) * 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffff, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffff, l[h], 2);
        const float inv = 1.f / l[h];
        const int row = row0 + h * 8;
        if (row >= rows || (ALIGN_END && row < 0)) continue;
        unsigned short* out = O + (static_cast<long long>(bh) * rows + row) * D + col;
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
            const float lo = o[j * 4 + h * 2] * inv, hi = o[j * 4 + h * 2 + 1] * inv;
            *reinterpret_cast<unsigned*>(out + j * 8) = FP16 ? pack_f16(lo, hi) : pack_bf16(lo, hi);
        }
    }
}

// The same through shared memory and TMA (O_TMA): the consumer's 64 x D tile into its staging buffer as 64 x 64
// boxes in the layout of TMA's 128-byte swizzle (16-byte chunk index XOR row % 8), then one thread stores them; TMA
// clips rows past S at the tensor's edge. The buffer is written again only after its last store has read it
// (hardware barrier 4 + c: this warpgroup's 128 threads; 1 to 3 are the ping-pong tokens').
template <bool FP16, int D>
__device__ __forceinline__ void store_o_tma(const float (&o)[D / 2], float (&l)[2], unsigned char* staging,
                                            const TensorMap* map_o, int bh, int wg_first_row, int c) {
    const int t = threadIdx.x % 128;
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffff, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffff, l[h], 2);
        inv[h] = 1.f / l[h];
    }
    if (t == 0) tma_store_wait_read();
    named_barrier(4 + c, 128);
    const int r = (t / 32) * 16 + (t % 32) / 4;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = r + h * 8;
            unsigned char* box = staging + (j / 8) * 64 * BOX_ROW;
            const int offset = row * BOX_ROW + (((j % 8) ^ (row % 8)) * 16) + (t % 4) * 4;
            const float lo = o[j * 4 + h * 2] * inv[h], hi = o[j * 4 + h * 2 + 1] * inv[h];
            *reinterpret_cast<unsigned*>(box + offset) = FP16 ? pack_f16(lo, hi) : pack_bf16(lo, hi);
        }
    }
    fence_async_smem();
    named_barrier(4 + c, 128);
    if (t == 0) {
#pragma unroll
        for (int b = 0; b < D / 64; ++b) tma_store_3d(map_o, staging + b * 64 * BOX_ROW, b * 64, wg_first_row, bh);
        tma_store_commit();
    }
}

// One consumer warpgroup on one tile: its 64 query rows against every K/V block, then O to global memory. Q goes back
// to the producer as soon as the tile's last Q Kᵀ is done, so the next tile's Q loads under this tile's last P V.
// WORK false (SKIP_IDLE, a consumer none of whose rows exists) is the same walk of the barriers with no matmul,
// softmax or store: a separate instance, since a run-time condition around the matmuls inside the loop makes ptxas
// serialize every wgmma.
template <bool FP16, int D, bool WORK = true>
__device__ __forceinline__ void consume_tile(const Smem<D>& sm, Ring& ring, const QRing& qs, const Tile& w,
                                             unsigned short* O, const TensorMap* map_o, int S, int rows,
                                             float scale, bool causal) {
    constexpr int KV_BYTES = Smem<D>::KV_BYTES;
    const int c = threadIdx.x / 128 - 1, t = threadIdx.x % 128;
    const int wg_first_row = w.first_row + c * 64;
    const int row0 = wg_first_row + (t / 32) * 16 + (t % 32) / 4;  // this thread's rows: row0 and row0 + 8
    const unsigned char* q = sm.q + qs.stage * Smem<D>::Q_BYTES + c * 64 * BOX_ROW;
    float o[D / 2], s[BLOCK_N / 2], m[2], l[2], alpha[2];
    unsigned p[BLOCK_N / 16][4];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    m[0] = m[1] = __int_as_float(0xff800000);
    l[0] = l[1] = 0.f;
    if constexpr (WORK) {  // the idle instance is entered from here, past these two
        if (PINGPONG && c == CONSUMERS - 1) named_barrier_arrive(1, 256);  // consumer 0 issues first
        mbar_wait(&sm.full_q[qs.stage], qs.phase);
    }
    if constexpr (SKIP_IDLE && WORK) {
        if (wg_first_row >= rows || wg_first_row + 64 <= 0) {  // past the last row, or before row 0 (ALIGN_END)
            consume_tile<FP16, D, false>(sm, ring, qs, w, O, map_o, S, rows, scale, causal);
            return;
        }
    }

    auto needs_mask = [&](int j) {
        const int key0 = j * BLOCK_N;
        return key0 + BLOCK_N > S || (causal && key0 + BLOCK_N - 1 > wg_first_row);
    };
    auto release = [&](unsigned long long* bar) {
        if (t == 0) mbar_arrive(bar);
    };

    if constexpr (OVERLAP) {
        mbar_wait(&sm.full_k[ring.stage], ring.phase);
        token_wait(c);
        if constexpr (WORK) issue_qk<FP16, D>(s, q, sm.k + ring.stage * KV_BYTES);
        token_pass(c, false);
        wgmma_wait<0>();
        fence_regs(s);
        release(&sm.empty_k[ring.stage]);
        if constexpr (WORK) {
            softmax(s, m, l, alpha, scale, needs_mask(0), 0, row0, S, causal);
            to_p<FP16>(s, p);
        }
        Ring prev = ring;
        ring.advance();
        for (int j = 1; j < w.n_blocks; ++j) {
            mbar_wait(&sm.full_k[ring.stage], ring.phase);
            mbar_wait(&sm.full_v[prev.stage], prev.phase);
            token_wait(c);
            if constexpr (WORK) {
                issue_qk<FP16, D>(s, q, sm.k + ring.stage * KV_BYTES);
                issue_pv<FP16, D>(o, p, sm.v + prev.stage * KV_BYTES);
            }
            token_pass(c, false);
            wgmma_wait<1>();
            fence_regs(s);
            release(&sm.empty_k[ring.stage]);
            if constexpr (WORK) softmax(s, m, l, alpha, scale, needs_mask(j), j * BLOCK_N, row0, S, causal);
            wgmma_wait<0>();
            fence_regs(o);
            fence_p(p);
            release(&sm.empty_v[prev.stage]);
            if constexpr (WORK) {
                rescale<D>(o, alpha);
                to_p<FP16>(s, p);
            }
            prev = ring;
            ring.advance();
        }
        release(&sm.empty_q[qs.stage]);
        mbar_wait(&sm.full_v[prev.stage], prev.phase);
        token_wait(c);
        if constexpr (WORK) issue_pv<FP16, D>(o, p, sm.v + prev.stage * KV_BYTES);
        token_pass(c, true);
        wgmma_wait<0>();
        fence_regs(o);
        fence_p(p);
        release(&sm.empty_v[prev.stage]);
    } else {
        for (int j = 0; j < w.n_blocks; ++j) {
            mbar_wait(&sm.full_k[ring.stage], ring.phase);
            token_wait(c);
            if constexpr (WORK) issue_qk<FP16, D>(s, q, sm.k + ring.stage * KV_BYTES);
            token_pass(c, false);
            wgmma_wait<0>();
            fence_regs(s);
            release(&sm.empty_k[ring.stage]);
            if (j == w.n_blocks - 1) release(&sm.empty_q[qs.stage]);
            if constexpr (WORK) {
                softmax(s, m, l, alpha, scale, needs_mask(j), j * BLOCK_N, row0, S, causal);
                rescale<D>(o, alpha);
                to_p<FP16>(s, p);
            }
            mbar_wait(&sm.full_v[ring.stage], ring.phase);
            token_wait(c);
            if constexpr (WORK) issue_pv<FP16, D>(o, p, sm.v + ring.stage * KV_BYTES);
            token_pass(c, j == w.n_blocks - 1);
            wgmma_wait<0>();
            fence_regs(o);
            fence_p(p);
            release(&sm.empty_v[ring.stage]);
            ring.advance();
        }
    }
    if constexpr (!WORK)
        return;  // none of its rows exists: nothing to store
    else if constexpr (O_TMA) {
        // A TMA store whose box starts before row 0 stops the kernel (illegal instruction on the H200), so with
        // ALIGN_END the first tile's consumers that start there store from the registers.
        if (ALIGN_END && wg_first_row < 0) store_o<FP16, D>(o, l, O, rows, w.bh, row0);
        else store_o_tma<FP16, D>(o, l, sm.o + c * Smem<D>::O_BYTES, map_o, w.bh, wg_first_row, c);
    } else
        store_o<FP16, D>(o, l, O, rows, w.bh, row0);
}

// One block per tile, or (kernel.py's PERSISTENT) one block per SM walking its tiles (Walk).
template <bool FP16, int D>
__device__ __forceinline__ void attention_body(const TensorMap* map_q, const TensorMap* map_k, const TensorMap* map_v,
                                               const TensorMap* map_o, unsigned short* O, int S, int rows, int Hq,
                                               int group, int heads, float scale, bool causal, int mode,
                                               int* counter) {
    static_assert(CONSUMERS == 2 || D == 64, "three consumer warpgroups fit the register file at head dim 64 only");
    extern __shared__ unsigned char smem_raw[];
    const Smem<D> sm(smem_raw);
    if (threadIdx.x == 0) {
        for (int i = 0; i < STAGES; ++i) {
            mbar_init(&sm.full_k[i], 1);
            mbar_init(&sm.full_v[i], 1);
            mbar_init(&sm.empty_k[i], CONSUMERS);  // one arrival per consumer warpgroup
            mbar_init(&sm.empty_v[i], CONSUMERS);
        }
        for (int i = 0; i < Q_BUFFERS; ++i) {
            mbar_init(&sm.full_q[i], 1);
            mbar_init(&sm.empty_q[i], CONSUMERS);
        }
        mbar_fence_init();
    }
    __syncthreads();

    if (threadIdx.x < 128) {
        regs_dealloc<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(map_q);
            tma_prefetch_map(map_k);
            tma_prefetch_map(map_v);
            produce<D>(sm, map_q, map_k, map_v, S, rows, Hq, group, heads, causal, mode, counter);
        }
    } else {
        regs_alloc<CONSUMER_REGS>();
        const int num_m = (rows + BLOCK_M - 1) / BLOCK_M;
        const Walk walk(num_m * heads, mode);
        Ring ring;
        QRing qs;
        for (int i = 0;; ++i) {
            int tile = walk.first + i * walk.step;
            if (mode == DYNAMIC) {
                mbar_wait(&sm.full_q[qs.stage], qs.phase);
                tile = sm.tile[qs.stage];
                if (tile < 0) break;
            } else if (tile >= walk.end) {
                break;
            }
            consume_tile<FP16, D>(sm, ring, qs, Tile(tile, num_m, heads, S, causal), O, map_o, S, rows, scale,
                                  causal);
            qs.advance();
        }
        if (O_TMA && threadIdx.x % 128 == 0) tma_store_wait_read();  // the staging buffer outlives its stores
    }
}

#define ATTENTION_KERNEL(NAME, FP16, D)                                                                           \
    extern "C" __global__ void __launch_bounds__(THREADS, 1)                                                     \
    NAME(const __grid_constant__ TensorMap map_q, const __grid_constant__ TensorMap map_k,                       \
         const __grid_constant__ TensorMap map_v, const __grid_constant__ TensorMap map_o, unsigned short* O,    \
         int S, int rows, int Hq, int group, int heads, float scale, int causal, int walk, int* counter) {       \
        attention_body<FP16, D>(&map_q, &map_k, &map_v, &map_o, O, S, rows, Hq, group, heads, scale, causal != 0,\
                                walk, counter);                                                                  \
    }

// kernel.py builds one of these per module (KERNEL_FP16 and KERNEL_D), so the four compile in parallel; a build
// without those defines holds all four.
#ifdef KERNEL_D
#define WANTED(FP16, D) (KERNEL_D == D && KERNEL_FP16 == FP16)
#else
#define WANTED(FP16, D) 1
#endif
#if WANTED(0, 64)
ATTENTION_KERNEL(attention_bf16_d64, false, 64)
#endif
#if WANTED(0, 128)
ATTENTION_KERNEL(attention_bf16_d128, false, 128)
#endif
#if WANTED(1, 64)
ATTENTION_KERNEL(attention_fp16_d64, true, 64)
#endif
#if WANTED(1, 128)
ATTENTION_KERNEL(attention_fp16_d128, true, 128)
#endif
