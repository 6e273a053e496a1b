// C = A B on Hopper's warpgroup tensor cores: A [M, K], B [K, N], C [M, N], row-major bf16 or fp16, fp32
// accumulation. Needs K and N multiples of 8 (16-byte rows, for TMA); kernel.py sends others to simple.cu.
//
// Why it is fast:
//   - warp specialization: warpgroup 0 is the producer, one thread of it issuing TMA copies of A and B tiles into a
//     STAGES-deep shared-memory ring; CONSUMERS warpgroups only issue wgmma. Full/empty mbarriers per stage hand
//     the slots back and forth, so loads of the next K-steps run under the current products;
//   - wgmma reads both operands straight from shared memory in TMA's 128-byte swizzle (no bank conflicts, no
//     ldmatrix), 64 x BLOCK_N x 16 per instruction, accumulators in registers; setmaxnreg moves registers from the
//     producer (which needs few) to the consumers (BLOCK_N / 2 accumulators per thread and sub-tile);
//   - persistent: one block per SM walks the output tiles in grouped order (GROUP_M tile-rows advance together
//     along N, so the A and B panels the SMs need at the same time stay in L2), and the producer runs ahead into the
//     next tile while the consumers store the last one;
//   - the first loads leave at once: the producer issues its first unit's first STAGES steps right after the
//     barriers' set-up, before the work list's divisions, which a GEMM bound by streaming B otherwise waited on;
//   - MMA_LAG = 1 keeps one stage's wgmma in flight while the next is issued, releasing a slot one step later;
//   - ACC_SETS = 2 (with MMA_LAG implied): a consumer's K-steps alternate between two register tiles, so the next
//     step's wgmma do not accumulate into the registers the last step's are still writing; the second set is added
//     into the first at the end of the unit (one order whatever the timing: bitwise repeatable). For tiles whose
//     accumulators leave room for twice as many (64 x 64, 64 x 128, 128 x 128 on two consumers). Off by default;
//   - WG_SPLIT_K = 1 (with CONSUMERS = 2, for the 64-row tiles): both consumers hold all of the tile's rows and take
//     alternate K-steps of each unit (the first k_begin, k_begin + 2, ...; the second the others), each stage
//     filled on a barrier of the consumer taking it and released by it; at the end the second hands its fp32 sum
//     to the first through shared memory, which adds it (one order whatever the timing: bitwise repeatable) and
//     finishes the tile (in RED_ROUNDS rounds, so that a wide tile's buffer leaves room for its stages). Two
//     warpgroups keep twice the wgmma in flight where one 64-row consumer waits on each step. kernel.py turns it on
//     for the few-token tiles (0.877 against 0.857x cuBLAS at 128 rows on the H200, BENCHMARKS.md);
//   - CLUSTER_M = 2 pairs the blocks of two vertically adjacent tiles in a thread-block cluster: both need the same
//     B panel, so each loads half of it and TMA multicasts that half into both blocks' shared memory (half the B
//     traffic from L2); a slot is refilled only when the consumers of both blocks have released it. The release
//     is a plain arrival on each block's barrier: with .release.cluster ptxas put a GPU-wide MEMBAR before each
//     arrival, and the pairs ran at 0.57x of CLUSTER_M = 1. Without it they run at 0.98-1.02x of it on the H200
//     (BENCHMARKS.md): the kernel is bound by its tensor cores, not by L2, so halving B's traffic buys nothing
//     the pairs' lockstep does not cost back. Off by default;
//   - CLUSTER_N = 2 (for the 64-row tiles, and the 128-row ones up to 256 rows): clusters of CLUSTER_M x CLUSTER_N
//     adjacent tiles (rank = column x CLUSTER_M + row). Each block loads A_SHARE of its tile's rows of A and
//     multicasts them to the blocks of its cluster row (same rows of C), and its share of B to those of its cluster
//     column. A slot is refilled only when every block whose loads land in it (its cluster row and column) has
//     released it. On an edge row the first block's share (EDGE_ROWS) holds all of its rows, and the second loads
//     none (map_a_edge goes unread). cuBLAS runs its 64 x 64 tiles in pairs along N at 64 x 8192 x 8192, and its
//     128 x 128 at 256 x 8192 x 28672 (BENCHMARKS.md): each A tile comes from L2 once for both. Off by default;
//   - TMA_STORE = 1: each consumer writes its finished tile to shared memory (128-byte swizzle: no bank conflicts)
//     and one thread hands it to TMA, so the warps go on to the next tile's wgmma while the copy engine stores C.
//     With C_STAGED, C_STAGED boxes of 64 x 64 at a time, so that a wide tile keeps room for its stages;
//   - BLOCK_N = 320: wider than one wgmma (256 columns at most), each K-slice takes two, 256 and 64 columns wide,
//     into one accumulator array in the tile's order. kernel.py picks it where its waves divide a shape better than
//     narrower tiles' do: 1024 x 10240 x 8192 is 256 tiles of 128 x 320 (under two waves on 132 SMs), against 320
//     of 128 x 256. Its C tile (80 KB) is staged a few boxes at a time, so that three 56 KB stages fit beside it.
//   - BLOCK_N = 160 (with TMA_STORE 0): two and a half of B's 64-column boxes, so B arrives instead in five
//     32-column boxes in the 64-byte swizzle, one wgmma of 160 columns spans them in whole atoms, and C is stored
//     from the registers. kernel.py weighs it where 160 divides N into waves that fill the SMs (WIDTH_160):
//     256 x 10240 x 8192 is 128 tiles of 128 x 160, one wave walking all of K, where 128 x 320 tiles are 64 and
//     split in two. The same for the few-token tiles' widths that fit N's tiles into one wave (80, 96, 112: B in
//     16- or 32-column boxes): 64 x 10240 x 8192 is 128 tiles of 64 x 80, where 64 x 128 tiles are 80.
//   - split-K (`splits` > 1, chosen per shape by kernel.py): when the output tiles are too few to fill the SMs (few
//     tokens, long K), each tile's K range is cut into `splits` parts, one work unit each. A unit's consumer writes
//     its fp32 partial to a workspace in its own register order (coalesced, no shared memory), and the consumer
//     that arrives last at the tile's counter adds the parts up in split order 0, 1, ... and stores C: the sum's
//     order never depends on which unit finished first, so results are bitwise the same from run to run. With
//     KEEP_OWN parts 0 and 1 keep their own in registers, and skip writing it where every other part is in
//     (reduce_splits). The last one also zeroes the counter for the next call.
//   - split tail (`whole` < the tile count, chosen per shape by kernel.py): only the tiles past the first `whole` are
//     split as above. kernel.py sets `whole` to the tiles of the full waves, so they run whole as unsplit, and the
//     last, partial wave's tiles are cut into enough units to fill the SMs (wave quantization); split-K is whole = 0.
//   - stream-K (`stream` > 0 blocks, chosen per shape by kernel.py): the tiles past `whole` are not cut into equal
//     parts but have their K-steps, tile after tile, dealt out in equal contiguous runs to blocks 0 .. stream - 1,
//     so every block ends within one K-step of the others however few tiles there are (80 tiles of 128 steps on
//     132 SMs: 77 or 78 steps each, where whole tiles take 128 and halves 64 + 64). A run meets two or three
//     tiles; each piece of a tile is reduced as a split part is, in the order of the blocks that hold them.
//     With `lanes` > 1 the tail is dealt by columns: the `lanes` tiles of one tile column (they read the same B
//     panel) go to `lanes` blocks with the same run, one row each, so those blocks walk the same K offsets together
//     and B comes from DRAM once, the other rows reading it from L2 (with one block per tile, the rows sharing a
//     panel were whole runs apart in K and B came from DRAM once per row).
//   - DESC_OFFSETS = 1 and UNIFORM_WG = 1 (kernel.py sets both but on the 128 x 320 tile, where they lost): a
//     consumer finds each wgmma's shared-memory descriptors by adding offsets to those of the ring's first tiles,
//     and reads its warpgroup's index as warp-uniform, so that nvcc keeps its loop state and descriptors in uniform
//     registers: between a step's wgmma of the 128 x 128 tile 48 instructions in all against 117 (BENCHMARKS.md;
//     see desc_a below and gemm_body).
//   - B_K_MAJOR = 1 builds the twin that reads B given as [N, K] rows (the transpose of a contiguous tensor:
//     nn.Linear's weight.t()) in place: TMA loads 64-row boxes of its N x K rows, laid out in shared memory as A's
//     are, and wgmma reads them K-major (no transpose bit), so no copy of the weight is made.
// Edges: TMA zero-fills boxes past M, N or K (a last tile row of EDGE_ROWS rows or fewer loads only those of A);
// stores are masked. Tunables come as -D defines from kernel.py.
#include "hopper.cuh"
#include "wgmma.cuh"

#ifndef BLOCK_M
#define BLOCK_M 128
#endif
#ifndef BLOCK_N
#define BLOCK_N 256
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef MMA_LAG
#define MMA_LAG 0
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef TMA_STORE
#define TMA_STORE 1
#endif
#ifndef CLUSTER_M
#define CLUSTER_M 1
#endif
#ifndef CLUSTER_N
#define CLUSTER_N 1
#endif
#ifndef ACC_SETS
#define ACC_SETS 1
#endif
#ifndef B_K_MAJOR
#define B_K_MAJOR 0
#endif
#ifndef C_STAGED
#define C_STAGED 0
#endif
#ifndef WG_SPLIT_K
#define WG_SPLIT_K 0
#endif
#ifndef RED_ROUNDS
#define RED_ROUNDS 1
#endif
#ifndef KEEP_OWN
#define KEEP_OWN 0
#endif

constexpr int BLOCK_K = 64;                       // one 128-byte swizzle row of 16-bit elements
constexpr int THREADS = 128 * (CONSUMERS + 1);
constexpr int WAYS = WG_SPLIT_K ? CONSUMERS : 1;   // consumers sharing each unit's rows, each taking every WAYS-th step
constexpr int STORERS = CONSUMERS / WAYS;          // consumers holding distinct rows of C (each stores its own)
constexpr int WG_M = BLOCK_M / STORERS;            // rows of C per consumer warpgroup
constexpr int SUB_M = WG_M / 64;                   // m64 sub-tiles per consumer
constexpr int ACC = BLOCK_N / 2;                   // fp32 accumulators per thread per sub-tile
constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;
// A tile row holding EDGE_ROWS rows of M or fewer (the last, where M is no multiple of BLOCK_M) loads one box of
// EDGE_ROWS rows through map_a_edge, not a BLOCK_M-row box half or more past M (TMA's fill of those rows ran slow:
// 192 x 8192 x 8192 0.82x cuBLAS, 1.00x with the one box, on an H100, BENCHMARKS.md). The slot's other rows keep
// what they held: a row of C reads only its own row of A, so that reaches only rows that are stored nowhere.
// The 64-row tiles too (EDGE_ROWS 32: M % 64 of 32 or fewer), unless built with A_EDGE 0.
#ifndef A_EDGE
#define A_EDGE 1
#endif
constexpr int EDGE_ROWS = A_EDGE ? BLOCK_M / 2 : 0;
// With EDGE_ANY a last tile row holding any part of a tile of M loads its rows rounded up to 8 (whole swizzle atoms),
// not only one of EDGE_ROWS or fewer: map_a_edge's box is that many rows (kernel.py's edge_box).
#ifndef EDGE_ANY
#define EDGE_ANY 0
#endif
constexpr int EDGE_MAX = EDGE_ANY && EDGE_ROWS > 0 ? BLOCK_M - 1 : EDGE_ROWS;  // the most rows of M an edge row holds
__host__ __device__ constexpr int edge_rows(int M) {  // A's rows an edge row loads
    return EDGE_ANY ? (M % BLOCK_M + 7) / 8 * 8 : EDGE_ROWS;
}
// B arrives as BLOCK_N / B_COLS boxes of BLOCK_K x B_COLS: 64 columns in the 128-byte swizzle, or for a width that
// is no multiple of 64 32 columns in the 64-byte swizzle (96: three boxes, 160: five), or for one that is no multiple
// of 32 16 columns in the 32-byte swizzle (80: five, 112: seven); an [N, K] B in boxes of B_COLS rows of 128 bytes,
// in the 128-byte swizzle whatever the width. One wgmma spans the tile in whole swizzle atoms.
constexpr int B_COLS = BLOCK_N % 64 == 0 ? 64 : BLOCK_N % 32 == 0 ? 32 : 16;
constexpr int B_SWIZZLE = B_COLS * 2;  // bytes per swizzled row of an N-major B box in shared memory
constexpr int B_BOX_BYTES = BLOCK_K * B_COLS * 2;
constexpr int B_BYTES = B_BOX_BYTES * (BLOCK_N / B_COLS);
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int N_MAIN = BLOCK_N > 256 ? 256 : BLOCK_N;  // one wgmma's columns (256 at most); past 256 a second one
constexpr int N_REST = BLOCK_N - N_MAIN;                // takes the rest (a 320-wide tile: 256 + 64)
constexpr int C_BOX_BYTES = 64 * 64 * 2;           // C leaves as boxes of 64 x 64
constexpr int C_BOXES = SUB_M * (BLOCK_N / 64);    // per storing consumer
// Boxes a consumer stages at once (C_STAGED, 0 for all of them): fewer leave room for more stages of a wide tile.
constexpr int C_RING = C_STAGED > 0 && C_STAGED < C_BOXES ? C_STAGED : C_BOXES;
constexpr int C_BYTES = TMA_STORE ? C_RING * C_BOX_BYTES : 0;  // per storing consumer
// WG_SPLIT_K: the second consumer's fp32 sum, handed over in RED_ROUNDS rounds of RED_CHUNK values per thread (a
// 64 x 320 tile's whole sum, 80 KB, would leave room for two stages)
constexpr int RED_CHUNK = SUB_M * ACC / RED_ROUNDS;
constexpr int RED_BYTES = (WAYS - 1) * RED_CHUNK * 128 * 4;
constexpr int RED_FULL = 1 + CONSUMERS, RED_FREE = 2 + CONSUMERS;  // its named barriers (1 + c: consumer c's own)
constexpr int PRODUCER_REGS = 40;
constexpr int CONSUMER_REGS = CONSUMERS == 1 ? 256 : 232;
// kernel.py passes STAGES * STAGE_BYTES + STORERS * C_BYTES + RED_BYTES + 1024 (alignment) + 1024 (barriers) bytes
// of dynamic shared memory.

static_assert(WG_M % 64 == 0 && SUB_M >= 1 && SUB_M <= 2, "a consumer's rows (BLOCK_M / STORERS) must be 64 or 128");
static_assert(BLOCK_N % 64 == 0 ? BLOCK_N <= 320 : BLOCK_N % 16 == 0 && BLOCK_N < 256,
              "BLOCK_N must be a multiple of 64 up to 320, or of 16 under 256 (one wgmma: 80, 96, 112, 160)");
static_assert(!TMA_STORE || BLOCK_N % 64 == 0,
              "TMA stores C in 64 x 64 boxes: a tile of a width no multiple of 64 stores from registers");
static_assert(ACC_SETS == 1 || ACC_SETS == 2, "ACC_SETS must be 1 or 2");
static_assert(!WG_SPLIT_K || CONSUMERS == 2, "WG_SPLIT_K splits a unit's K-steps between two consumers");
static_assert(SUB_M * ACC % RED_ROUNDS == 0, "RED_ROUNDS divides a consumer's accumulators");
// Barriers in their 1 KB: STAGES * WAYS full ones, STAGES empty ones, a flag per consumer. With WG_SPLIT_K each slot
// has a full barrier per consumer, filled for the steps that consumer takes: a consumer passes over the other's
// steps without waiting, so on one shared barrier its parity could read the phase of a fill it skipped as the one it
// waits for, once units of odd length have moved which consumer a slot's fills go to (a race that gave wrong sums
// and hung blocks); on its own barrier every phase is one of its own waits.
static_assert(STAGES * (WAYS + 1) * 8 + CONSUMERS * 4 <= 1024, "the barriers take at most 1 KB");
static_assert(STAGES <= 32, "a consumer's per-slot parities are the bits of one word");
constexpr bool LAG = MMA_LAG || ACC_SETS > 1;  // two sets only pay with a step's products in flight behind the next
static_assert(ACC_SETS * SUB_M * ACC <= 160, "accumulators past 160 registers per thread would spill");
static_assert(STAGES >= 2, "STAGES must be at least 2");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "CLUSTER_M must be 1 or 2");
static_assert((BLOCK_N / B_COLS) % CLUSTER_M == 0, "each block of a cluster loads an equal share of B's boxes");
static_assert(CLUSTER_N == 1 || CLUSTER_N == 2 || CLUSTER_N == 4, "CLUSTER_N must be 1, 2 or 4");
static_assert(BLOCK_M / CLUSTER_N % 8 == 0, "each block of a cluster loads whole swizzle atoms of A's rows");
static_assert(CLUSTER_N == 1 || EDGE_ROWS == 0 || EDGE_ROWS == BLOCK_M / CLUSTER_N,
              "an edge row's rows of A are one block's share");
static_assert(CLUSTER_N == 1 || !EDGE_ANY, "EDGE_ANY's edge rows are no block's share: one block per cluster row");
constexpr int CLUSTER = CLUSTER_M * CLUSTER_N;  // blocks of a cluster: rank = column * CLUSTER_M + row
constexpr int B_SHARE = BLOCK_N / B_COLS / CLUSTER_M;  // B boxes each block loads (and multicasts down its column)
constexpr int A_SHARE = BLOCK_M / CLUSTER_N;       // A rows each block loads (and multicasts along its row)
__host__ __device__ constexpr unsigned row_mask(int columns) {  // ranks 0, CLUSTER_M, ... of the first `columns`
    return columns == 0 ? 0u : row_mask(columns - 1) | 1u << ((columns - 1) * CLUSTER_M);
}
constexpr unsigned ROW_MASK = row_mask(CLUSTER_N);  // the blocks of cluster row 0 (of row rank_m: shifted by it)

template <bool FP16, int R>
__device__ __forceinline__ void mma_n(float (&d)[R], unsigned long long da, unsigned long long db, int scale) {
#if B_K_MAJOR
    if constexpr (FP16) wgmma_kk_f16(d, da, db, scale);
    else wgmma_kk_bf16(d, da, db, scale);
#else
    if constexpr (FP16) wgmma_f16(d, da, db, scale);
    else wgmma_bf16(d, da, db, scale);
#endif
}

// A tile's row and column in the grouped order. The divisions are branched around where the group's size says the
// answer (one group; a full group of GROUP_M rows, a power of two; a group of one row): each runtime division is some
// 25 dependent instructions, and every block's first load waits on these (BENCHMARKS.md).
__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_group = GROUP_M * tiles_n;
    int group = 0, at = tile;  // the tile's group, and its place in it
    if (tiles_m > GROUP_M) {
        group = tile / per_group;
        at = tile - group * per_group;
    }
    const int first_m = group * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    if (rows == GROUP_M) {
        tm = first_m + at % GROUP_M;
        tn = at / GROUP_M;
    } else if (rows == 1) {
        tm = first_m;
        tn = at;
    } else {
        tm = first_m + at % rows;
        tn = at / rows;
    }
}

// Work units of `tiles` tiles: the first `whole` whole, each later one cut into `splits` (stream-K aside).
__device__ __forceinline__ int unit_count(int whole, int splits, int tiles) { return whole + (tiles - whole) * splits; }

// A work unit's tile and K range: each of the first `whole` tiles is one unit, each later tile `splits` adjacent
// units (parts of its K range, `split` 0, 1, ...), or with stream-K one piece of a block's run.
struct Unit {
    int tile, split, parts, k_begin, k_end;
};
__device__ __forceinline__ Unit unit_work(int unit, int whole, int splits, int k_steps) {
    Unit u;
    if (unit < whole) {  // a whole tile: no division
        u.tile = unit, u.split = 0, u.parts = 1, u.k_begin = 0, u.k_end = k_steps;
        return u;
    }
    u.parts = splits;
    u.tile = whole + (unit - whole) / splits;
    u.split = (unit - whole) % splits;
    u.k_begin = u.split * k_steps / splits;
    u.k_end = (u.split + 1) * k_steps / splits;
    return u;
}

// One block's (or cluster's) work list, walked the same way by its producer and its consumers: units first, step,
// first + 2 step, ... of unit_work; with stream-K the whole tiles that way, then the pieces of its own run of the
// later tiles' K-steps. Stream-K's blocks come in stream / lanes groups of `lanes` (block b: group b / lanes, lane
// b % lanes); the tail's tiles in columns of `lanes` (tile whole + c lanes + l: column c, lane l). Group g's run is
// [g W / groups, (g + 1) W / groups) of the W = columns x k_steps steps, column-major, and each block of the group
// walks it on its lane's tile, so the groups holding step x are found without a table: ((x + 1) groups - 1) / W.
// kernel.py keeps each run at least one step long and lanes a divisor of the tail's tiles and of `stream`.
struct Schedule {
    int whole, splits, k_steps, first, step, count, own_whole, groups, group, lane, lanes;
    long long total, run_begin, run_end;

    __device__ __forceinline__ Schedule(int whole_, int splits_, int stream, int lanes_, int k_steps_, int tiles,
                                        int first_, int step_)
        : whole(whole_), splits(splits_), k_steps(k_steps_), first(first_), step(step_), lanes(lanes_) {
        groups = stream / lanes;
        group = first / lanes;
        lane = first % lanes;
        if (stream == 0) {
            const int units = unit_count(whole, splits, tiles);
            count = first < units ? (units - first + step - 1) / step : 0;
            own_whole = total = run_begin = run_end = 0;
            return;
        }
        own_whole = first < whole ? (whole - first + step - 1) / step : 0;
        total = static_cast<long long>((tiles - whole) / lanes) * k_steps;
        run_begin = run_end = 0;
        int pieces = 0;
        if (first < stream) {
            run_begin = group * total / groups;
            run_end = (group + 1) * total / groups;
            pieces = static_cast<int>((run_end - 1) / k_steps - run_begin / k_steps) + 1;
        }
        count = own_whole + pieces;
    }

    __device__ __forceinline__ int holder(long long x) const { return static_cast<int>(((x + 1) * groups - 1) / total); }

    __device__ __forceinline__ Unit operator[](int i) const {
        if (groups == 0) return unit_work(first + i * step, whole, splits, k_steps);
        Unit u;
        if (i < own_whole) {
            u.tile = first + i * step;
            u.split = 0, u.parts = 1, u.k_begin = 0, u.k_end = k_steps;
            return u;
        }
        const long long t = run_begin / k_steps + (i - own_whole), start = t * k_steps, end = start + k_steps;
        const int first_holder = holder(start);
        u.tile = whole + static_cast<int>(t) * lanes + lane;
        u.k_begin = static_cast<int>(max(run_begin, start) - start);
        u.k_end = static_cast<int>(min(run_end, end) - start);
        u.split = group - first_holder;
        u.parts = holder(end - 1) - first_holder + 1;
        return u;
    }
};

// The 16-row K-slice `kk` of one stage, for sub-tile `sub` of consumer `c`: A is K-major (rows of 128 bytes, 8-row
// swizzle atoms 1024 bytes apart); B is N-major (K rows of B_SWIZZLE bytes per B_COLS-column box, boxes B_BOX_BYTES
// apart), or with B_K_MAJOR K-major like A (BLOCK_N rows of 128 bytes: its B_COLS-row boxes end to end).
__device__ __forceinline__ unsigned long long desc_a(const unsigned char* sa, int row0, int kk) {
    return smem_desc(sa + row0 * 128 + kk * 32, 16, 1024);
}
__device__ __forceinline__ unsigned long long desc_b(const unsigned char* sb, int kk) {
#if B_K_MAJOR
    return smem_desc(sb + kk * 32, 16, 1024);
#else
    return smem_desc<B_SWIZZLE>(sb + kk * 16 * B_SWIZZLE, B_BOX_BYTES, 8 * B_SWIZZLE);
#endif
}
// DESC_OFFSETS = 1: a consumer makes the descriptors of the ring's first A and B tiles once and finds every other by
// adding the operand's offset from them, in 16-byte units, to the lower half (desc_at); desc_a and desc_b make each
// anew from its address, some 20 instructions per wgmma in nvcc 13.0's SASS (masked, shifted, joined to the other
// fields). The two give the same bits: the ring starts 1024-byte aligned, every offset (stage, sub-tile rows,
// K-slice, box) is a multiple of 16, and smem_desc keeps an address's 18 low bits, which hold all of a block's
// shared memory (under 256 KB), so the address field (bits 0-13, the address >> 4) grows by exactly the offset >> 4
// and never carries into the next. Off unless kernel.py sets it (it does, but on the 128 x 320 tile).
#ifndef DESC_OFFSETS
#define DESC_OFFSETS 0
#endif
#ifndef UNIFORM_WG
#define UNIFORM_WG 0
#endif
// desc_a's and desc_b's K-slice offsets, in 16-byte units, and their upper halves (the same for every tile of an
// operand: its layout's)
constexpr int A_SLICE = 32 / 16, B_SLICE = (B_K_MAJOR ? 32 : 16 * B_SWIZZLE) / 16;
constexpr unsigned A_HI = smem_desc_hi(1024), B_HI = B_K_MAJOR ? A_HI : smem_desc_hi<B_SWIZZLE>(8 * B_SWIZZLE);
// The descriptor of the operand `units` 16-byte units past the tile whose descriptor's lower half is `lo`
__device__ __forceinline__ unsigned long long desc_at(unsigned lo, unsigned hi, int units) {
    return static_cast<unsigned long long>(hi) << 32 | (lo + units);
}
static_assert(STAGE_BYTES % 16 == 0 && A_BYTES % 16 == 0 && B_BOX_BYTES % 16 == 0, "offsets in 16-byte units");

// One sub-tile's products for the K-slice kk of a stage: one wgmma of BLOCK_N columns, or past 256 two (the first
// N_MAIN columns, then the rest from B's fifth 64-column box on, into the accumulators that follow: wgmma's layout
// puts columns 8j to 8j + 7 at d[4j] to d[4j + 3], so the two halves' registers lie in the whole tile's order).
// `db`, `db_rest`: the descriptors of the stage's B tile at the K-slice, and of its columns past N_MAIN.
constexpr int B_REST = (N_MAIN / B_COLS) * B_BOX_BYTES;  // the offset of those columns' first box
template <bool FP16>
__device__ __forceinline__ void mma(float (&d)[ACC], unsigned long long da, unsigned long long db,
                                    unsigned long long db_rest, int scale) {
    mma_n<FP16>(*reinterpret_cast<float(*)[N_MAIN / 2]>(&d[0]), da, db, scale);
    if constexpr (N_REST > 0)
        mma_n<FP16>(*reinterpret_cast<float(*)[N_REST > 0 ? N_REST / 2 : 1]>(&d[N_MAIN / 2]), da, db_rest, scale);
}

template <bool FP16>
__device__ __forceinline__ void store_tile(const float (&d)[SUB_M][ACC], unsigned short* C, int M, int N, int row0,
                                           int col0) {
    const int t = threadIdx.x % 128;
    const int r = row0 + (t / 32) * 16 + (t % 32) / 4;
    const int c = col0 + (t % 4) * 2;
#pragma unroll
    for (int s = 0; s < SUB_M; ++s) {
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j) {
            const int col = c + j * 8;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = r + s * 64 + h * 8;
                if (row < M && col < N) {
                    const float lo = d[s][j * 4 + h * 2], hi = d[s][j * 4 + h * 2 + 1];
                    const unsigned v = FP16 ? pack_f16(lo, hi) : pack_bf16(lo, hi);
                    *reinterpret_cast<unsigned*>(C + static_cast<long long>(row) * N + col) = v;
                }
            }
        }
    }
}

// The consumer's finished WG_M x BLOCK_N tile to C through TMA: in rounds of C_RING 64 x 64 boxes (one round unless
// C_STAGED asks for fewer), each written into the staging buffer as TMA's 128-byte swizzle expects (16-byte chunk
// index XOR row % 8), then stored by one thread. A round overwrites the buffer only after the stores before it
// (the previous round's, or the previous tile's) have read it.
template <bool FP16>
__device__ __forceinline__ void store_tile_tma(const float (&d)[SUB_M][ACC], unsigned char* staging,
                                               const TensorMap* map_c, int consumer, int row0, int col0) {
    const int t = threadIdx.x % 128;
    const int r = (t / 32) * 16 + (t % 32) / 4;
#pragma unroll
    for (int first = 0; first < C_BOXES; first += C_RING) {
        if (t == 0) tma_store_wait_read();
        named_barrier(1 + consumer, 128);
#pragma unroll
        for (int s = 0; s < SUB_M; ++s) {
#pragma unroll
            for (int j = 0; j < BLOCK_N / 8; ++j) {
                const int slot = s * (BLOCK_N / 64) + j / 8 - first;  // box in this round's buffer
                if (slot < 0 || slot >= C_RING) continue;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = r + h * 8;
                    unsigned char* box = staging + slot * C_BOX_BYTES;
                    const int offset = row * 128 + (((j % 8) ^ (row % 8)) * 16) + (t % 4) * 4;
                    const float lo = d[s][j * 4 + h * 2], hi = d[s][j * 4 + h * 2 + 1];
                    *reinterpret_cast<unsigned*>(box + offset) = FP16 ? pack_f16(lo, hi) : pack_bf16(lo, hi);
                }
            }
        }
        fence_async_smem();
        named_barrier(1 + consumer, 128);
        if (t == 0) {
#pragma unroll
            for (int slot = 0; slot < C_RING && first + slot < C_BOXES; ++slot) {
                const int box = first + slot;
                tma_store_2d(map_c, staging + slot * C_BOX_BYTES, col0 + box % (BLOCK_N / 64) * 64,
                             row0 + box / (BLOCK_N / 64) * 64);
            }
            tma_store_commit();
        }
    }
}

constexpr int PART = SUB_M * ACC * 128;  // fp32 partial of one consumer's sub-tile, in register order

// Split-K: true for the consumer that finishes the tile, which then holds the whole sum in d, added in split order
// 0, 1, ... whichever unit came last (deterministic). The others write their partial to the workspace (`stride`
// parts' room per slot) and arrive at the tile's counter; the last to arrive finishes, reading every part back.
// With KEEP_OWN, split 0 or 1 keeps its own part in registers (it is the sum's first or second term, and x + y is
// y + x bitwise): it reads only the others', and where the counter already says every other part is written it
// skips writing its own and arriving. The workspace traffic that finishes a tile in 2 parts is then 1 or 2
// partials, where writing and reading back every part makes it 3.
__device__ __forceinline__ bool reduce_splits(float (&d)[SUB_M][ACC], float* partials, int* arrivals, int* flag,
                                              int slot, int split, int splits, int stride, int consumer) {
    const int t = threadIdx.x % 128;
    const bool in_place = KEEP_OWN && split <= 1;
    bool last = false;
    if (in_place) {  // every other part already in: the counter reads splits - 1
        if (t == 0) *flag = __ldcg(arrivals + slot) == splits - 1;
        named_barrier(1 + consumer, 128);
        last = *flag;
        named_barrier(1 + consumer, 128);  // the flag is read by all before it is written again
    }
    if (!last) {
        float* mine = partials + (static_cast<long long>(slot) * stride + split) * PART + t;
#pragma unroll
        for (int s = 0; s < SUB_M; ++s)
#pragma unroll
            for (int i = 0; i < ACC; ++i) __stcg(mine + (s * ACC + i) * 128, d[s][i]);
        __threadfence();
        named_barrier(1 + consumer, 128);
        if (t == 0) {
            const bool arrived_last = atomicAdd(arrivals + slot, 1) == splits - 1;
            if (arrived_last) arrivals[slot] = 0;  // ready for the next call: every other unit has arrived
            *flag = arrived_last;
        }
        named_barrier(1 + consumer, 128);
        last = *flag;
        named_barrier(1 + consumer, 128);  // the flag is read by all before the next tile may overwrite it
        if (!last) return false;
    } else if (t == 0) {
        arrivals[slot] = 0;  // every other unit of this tile has arrived
    }
    __threadfence();
    const float* part = partials + static_cast<long long>(slot) * stride * PART + t;
    if constexpr (KEEP_OWN) {
        // (0 + part 0) + part 1 as without KEEP_OWN, its own part (in d) as one of the two terms; the 0 + is kept
        // wherever part 0 comes from, since it turns a -0 into +0. Then the parts from 2 on.
        if (!in_place) {
#pragma unroll
            for (int s = 0; s < SUB_M; ++s)
#pragma unroll
                for (int i = 0; i < ACC; ++i) d[s][i] = 0.f + __ldcg(part + (s * ACC + i) * 128);
        } else if (split == 0) {
#pragma unroll
            for (int s = 0; s < SUB_M; ++s)
#pragma unroll
                for (int i = 0; i < ACC; ++i) d[s][i] = 0.f + d[s][i];
        } else {  // its own part 1 in d, after part 0
#pragma unroll
            for (int s = 0; s < SUB_M; ++s)
#pragma unroll
                for (int i = 0; i < ACC; ++i) d[s][i] = (0.f + __ldcg(part + (s * ACC + i) * 128)) + d[s][i];
        }
        for (int p = 1; p < splits; ++p) {
            if (in_place && p == split) continue;  // its own: added above
#pragma unroll
            for (int s = 0; s < SUB_M; ++s)
#pragma unroll
                for (int i = 0; i < ACC; ++i) d[s][i] += __ldcg(part + p * PART + (s * ACC + i) * 128);
        }
    } else {
        // Every part read back (this unit's own too, from L2), added in split order into d: no second register tile.
        for (int p = 0; p < splits; ++p, part += PART) {
#pragma unroll
            for (int s = 0; s < SUB_M; ++s)
#pragma unroll
                for (int i = 0; i < ACC; ++i) d[s][i] = (p ? d[s][i] : 0.f) + __ldcg(part + (s * ACC + i) * 128);
        }
    }
    return true;
}

// WG_SPLIT_K: the second consumer's sum of its K-steps handed to the first through shared memory (fp32 in register
// order: each thread reads back the values its twin wrote, conflict-free) and added to the first's, in that order
// whatever the timing (bitwise repeatable); true for the first, which goes on to finish the tile. `handed`: the
// second took a step of this unit (a one-step unit is the first's alone). The sum goes in RED_ROUNDS rounds of
// RED_CHUNK values. RED_FULL says the buffer holds a round, RED_FREE that it was read and may be written again;
// `writes` counts the second's rounds, so that it waits for RED_FREE before every one but its first, and once after
// its last (gemm_body), as often as the first arrives.
__device__ __forceinline__ bool hand_over(float (&d)[SUB_M][ACC], float* red, int consumer, bool handed, int& writes) {
    const int t = threadIdx.x % 128;
    if (!handed) return consumer == 0;
    if (consumer > 0) {
#pragma unroll
        for (int round = 0; round < RED_ROUNDS; ++round) {
            if (writes++) named_barrier(RED_FREE, 256);
#pragma unroll
            for (int s = 0; s < SUB_M; ++s)
#pragma unroll
                for (int i = 0; i < ACC; ++i) {
                    const int at = s * ACC + i - round * RED_CHUNK;  // its place in this round's chunk
                    if (at >= 0 && at < RED_CHUNK) red[at * 128 + t] = d[s][i];
                }
            named_barrier_arrive(RED_FULL, 256);
        }
        return false;
    }
#pragma unroll
    for (int round = 0; round < RED_ROUNDS; ++round) {
        named_barrier(RED_FULL, 256);
#pragma unroll
        for (int s = 0; s < SUB_M; ++s)
#pragma unroll
            for (int i = 0; i < ACC; ++i) {
                const int at = s * ACC + i - round * RED_CHUNK;
                if (at >= 0 && at < RED_CHUNK) d[s][i] += red[at * 128 + t];
            }
        named_barrier_arrive(RED_FREE, 256);
    }
    return true;
}

// A consumer's release of a stage: to the barrier of every block whose producer refills the slot (those of its
// cluster row, which multicast A into it, and of its column, which multicast B).
__device__ __forceinline__ void release(unsigned long long* empty_bar, unsigned rank) {
    if constexpr (CLUSTER > 1) {
#pragma unroll
        for (int r = 0; r < CLUSTER; ++r)
            if (CLUSTER_N == 1 || r % CLUSTER_M == rank % CLUSTER_M || r / CLUSTER_M == rank / CLUSTER_M)
                mbar_arrive_cluster(empty_bar, r);
    } else {
        mbar_arrive(empty_bar);
    }
}

template <bool FP16>
__device__ __forceinline__ void gemm_body(const TensorMap* map_a, const TensorMap* map_a_edge, const TensorMap* map_b,
                                          const TensorMap* map_c,
                                          unsigned short* C, int M, int N, int K, float* partials,
                                          int* arrivals, int whole, int splits, int stream, int lanes) {
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    float* red = reinterpret_cast<float*>(smem + STAGES * STAGE_BYTES + STORERS * C_BYTES);  // WG_SPLIT_K's
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * STAGE_BYTES +
                                                                     STORERS * C_BYTES + RED_BYTES);
    unsigned long long* empty = full + STAGES * WAYS;
    int* flags = reinterpret_cast<int*>(empty + STAGES);  // per consumer: "this unit completed its tile"

    // UNIFORM_WG = 1: the warpgroup's index read from lane 0, which the compiler then knows is the same in every
    // lane of a warp (threadIdx.x / 128 is, but it does not see it): it keeps the consumers' loop counters, stages
    // and descriptors in uniform registers, which wgmma reads its descriptors from, where otherwise each wgmma's
    // are moved there from ordinary ones (R2UR). Off unless kernel.py sets it (it does, but on the 128 x 320 tile).
    const int wg = UNIFORM_WG ? __shfl_sync(0xffffffffu, threadIdx.x / 128, 0) : threadIdx.x / 128;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
    // the block's row and column in its cluster (with one column, its rank and 0, as the compiler can see)
    const int rank_m = CLUSTER_N == 1 ? rank : rank % CLUSTER_M, rank_n = CLUSTER_N == 1 ? 0 : rank / CLUSTER_M;
    if (threadIdx.x == 0) {
        tma_prefetch_map(map_a);
        if (CLUSTER_N == 1 && EDGE_ROWS > 0 && M % BLOCK_M > 0 && M % BLOCK_M <= EDGE_MAX)
            tma_prefetch_map(map_a_edge);
        tma_prefetch_map(map_b);
        for (int s = 0; s < STAGES * WAYS; ++s) mbar_init(&full[s], 1);
        for (int s = 0; s < STAGES; ++s)
            // each consumer reading it, of every block whose loads land in it (its cluster row and column)
            mbar_init(&empty[s], CONSUMERS / WAYS * (CLUSTER_M + CLUSTER_N - 1));
        mbar_fence_init();
    }
    if constexpr (CLUSTER > 1) cluster_sync();  // the partners' barriers exist before anything reaches them
    else __syncthreads();

    // Work comes in units of CLUSTER_M x CLUSTER_N adjacent tiles, one per block of a cluster (a tile past M or N
    // is loaded as zeros and stored nowhere, so all blocks of a cluster always walk the same units).
    const int tiles_m = (M + BLOCK_M - 1) / BLOCK_M, tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
    const int rows_m = (tiles_m + CLUSTER_M - 1) / CLUSTER_M, cols_n = (tiles_n + CLUSTER_N - 1) / CLUSTER_N;
    // A unit is a whole tile, one part of a split tile (unit_work; kernel.py keeps splits <= k_steps) or a piece of
    // a stream-K run.
    const int k_steps = (K + BLOCK_K - 1) / BLOCK_K;

    // A stage's bytes on an edge row: its rows of A (edge_rows) and all of B
    const int edge_stage_bytes = STAGE_BYTES - A_BYTES + edge_rows(M) * BLOCK_K * 2;
    // A unit's tile coordinates, and whether its tile row is an edge row (EDGE_ROWS, which only loads heed).
    struct TileAt {
        int tm, tn, k_begin;
        bool edge;
    };
    auto tile_at = [&](const Unit& u) {
        int cm, cn;
        tile_coords(u.tile, rows_m, cols_n, cm, cn);
        TileAt l;
        l.tm = cm * CLUSTER_M + rank_m, l.tn = cn * CLUSTER_N + rank_n, l.k_begin = u.k_begin;
        const int left = M - l.tm * BLOCK_M;  // rows of M from the tile's first
        l.edge = EDGE_ROWS > 0 && left > 0 && left <= EDGE_MAX;
        return l;
    };
    // Step k of a unit into slot `stage`.
    auto fill = [&](const TileAt& l, int k, int stage) {
        const int tm = l.tm, tn = l.tn;
        const bool edge = l.edge;
        unsigned char* sa = smem + stage * STAGE_BYTES;
        unsigned char* sb = sa + A_BYTES;
        // the full barrier of the consumer that takes step k (WG_SPLIT_K: one per consumer and slot)
        unsigned long long* filled = &full[stage * WAYS + (k - l.k_begin) % WAYS];
        // A (edge_rows of it on an edge row), and A's and B's shares from every block
        mbar_arrive_expect_tx(filled, edge ? edge_stage_bytes : STAGE_BYTES);
        if constexpr (CLUSTER_N > 1) {  // this block's A_SHARE rows, to every block of its cluster row
            if (!edge || rank_n == 0)  // an edge row's rows are the first block's share
                tma_load_2d_multicast(sa + rank_n * A_SHARE * 128, map_a, filled, k * BLOCK_K,
                                      tm * BLOCK_M + rank_n * A_SHARE, ROW_MASK << rank_m);
        } else
            tma_load_2d(sa, edge ? map_a_edge : map_a, filled, k * BLOCK_K, tm * BLOCK_M);
#pragma unroll
        for (int i = 0; i < B_SHARE; ++i) {
            const int box = rank_m * B_SHARE + i;
            // (inner, outer) coordinates: (column, K) of a [K, N] B; (K, row) of an [N, K] one
            const int col = tn * BLOCK_N + box * B_COLS;
            const int x = B_K_MAJOR ? k * BLOCK_K : col, y = B_K_MAJOR ? col : k * BLOCK_K;
            if constexpr (CLUSTER_M > 1)  // to every block of its cluster column
                tma_load_2d_multicast(sb + box * B_BOX_BYTES, map_b, filled, x, y,
                                      ((1 << CLUSTER_M) - 1) << (rank_n * CLUSTER_M));
            else
                tma_load_2d(sb + box * B_BOX_BYTES, map_b, filled, x, y);
        }
    };
    // The first unit's first STAGES steps go out at once, into slots no one has used yet (no wait), before the
    // schedule's divisions and the registers' hand-over: with those first, a block's first load left 2,900 cycles
    // after its start, 1,500 with this (an H100's cycle counter, on this code's first version, which counted
    // `issued` in thread 0 alone; 64 x 8192 x 1024 0.894 -> 0.931x cuBLAS, BENCHMARKS.md). Not with stream-K,
    // whose first unit takes the schedule to find.
    // `issued` is worked out alike in every thread, so that the compiler keeps the producer's loop below in uniform
    // registers (from thread 0's alone, its every step cost more: 1% at 256 x 8192 x 8192).
    int issued = 0;
    if (stream == 0 && blockIdx.x / CLUSTER < unit_count(whole, splits, rows_m * cols_n)) {
        const Unit u = unit_work(blockIdx.x / CLUSTER, whole, splits, k_steps);
        issued = min(STAGES, u.k_end - u.k_begin);
        if (threadIdx.x == 0) {
            const TileAt l = tile_at(u);
            for (int s = 0; s < issued; ++s) fill(l, u.k_begin + s, s);
        }
    }
    const Schedule work(whole, splits, stream, lanes, k_steps, rows_m * cols_n, blockIdx.x / CLUSTER,
                        gridDim.x / CLUSTER);

    if (wg == 0) {
        regs_dealloc<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            int stage = issued % STAGES, phase = issued == STAGES;
            for (int i = 0; i < work.count; ++i) {
                const Unit u = work[i];
                const TileAt l = tile_at(u);
                for (int k = u.k_begin + (i == 0 ? issued : 0); k < u.k_end; ++k) {
                    mbar_wait(&empty[stage], phase ^ 1);
                    fill(l, k, stage);
                    if (++stage == STAGES) { stage = 0; phase ^= 1; }
                }
            }
            // With clusters, the block may leave only once no partner can still reach its shared memory: it waits
            // until each slot's last fill has been released by every consumer reading it, its partners' included
            // (whose releases also say the multicasts into them have landed). A final cluster barrier in its place
            // cost 4-6% at 256 x 8192 x 8192 (BENCHMARKS.md).
            if constexpr (CLUSTER > 1)
                for (int s = 0; s < STAGES; ++s) {
                    mbar_wait(&empty[stage], phase ^ 1);
                    if (++stage == STAGES) { stage = 0; phase ^= 1; }
                }
        }
    } else {
        regs_alloc<CONSUMER_REGS>();
        const int consumer = wg - 1, rows = WAYS > 1 ? 0 : consumer;  // rows: which WG_M rows of the tile are its
        float d[ACC_SETS][SUB_M][ACC];
        // DESC_OFFSETS: the descriptors of the first slot's A and B tiles, every other found from them
        const unsigned ring_a = static_cast<unsigned>(desc_a(smem, 0, 0));
        const unsigned ring_b = static_cast<unsigned>(desc_b(smem + A_BYTES, 0));
        int stage = 0, phase = 0, writes = 0;
        unsigned phases = 0;  // WG_SPLIT_K: the parity of this consumer's next wait on each slot's barrier
        for (int i = 0; i < work.count; ++i) {
            const Unit u = work[i];
            const TileAt at = tile_at(u);
            const int tm = at.tm, tn = at.tn;
            const int k_begin = u.k_begin, k_end = u.k_end;
            int released = -1;  // the stage whose slot goes back once its wgmma group is known to be done
            auto advance = [&] {
                if (++stage == STAGES) { stage = 0; phase ^= 1; }
            };
            // One stage's products (step k) into the accumulator set `acc` (`first`: its first use in this unit),
            // then past the steps the other consumers take before this one's next (WG_SPLIT_K).
            auto step = [&](float (&acc)[SUB_M][ACC], int k, bool first) {
                if constexpr (WAYS > 1) {  // this consumer's own barrier of the slot, at its own count of uses
                    mbar_wait(&full[stage * WAYS + consumer], (phases >> stage) & 1);
                    phases ^= 1u << stage;
                } else {
                    mbar_wait(&full[stage], phase);
                }
                const unsigned char* sa = smem + stage * STAGE_BYTES;
                const unsigned char* sb = sa + A_BYTES;
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BLOCK_K / 16; ++kk) {
#pragma unroll
                    for (int s = 0; s < SUB_M; ++s) {
                        const int row0 = rows * WG_M + s * 64, at = stage * (STAGE_BYTES / 16), b = at + kk * B_SLICE;
                        const unsigned long long da = DESC_OFFSETS ? desc_at(ring_a, A_HI, at + row0 * 8 + kk * A_SLICE)
                                                                   : desc_a(sa, row0, kk);
                        const unsigned long long db = DESC_OFFSETS ? desc_at(ring_b, B_HI, b) : desc_b(sb, kk);
                        const unsigned long long db_rest = DESC_OFFSETS ? desc_at(ring_b, B_HI, b + B_REST / 16)
                                                                        : desc_b(sb + B_REST, kk);
                        mma<FP16>(acc[s], da, db, db_rest, !first || kk > 0);
                    }
                }
                wgmma_commit();
                if constexpr (LAG) {
                    wgmma_wait<1>();
                    if (released >= 0 && threadIdx.x % 128 == 0) release(&empty[released], rank);
                    released = stage;
                } else {
                    wgmma_wait<0>();
                    if (threadIdx.x % 128 == 0) release(&empty[stage], rank);
                }
                advance();
#pragma unroll
                for (int j = 1; j < WAYS; ++j)
                    if (k + j < k_end) advance();
            };
            // This consumer's steps: every one, or with WG_SPLIT_K every WAYS-th from k_begin + consumer. With two
            // sets they alternate between them in pairs, the odd one out into the first.
            const int mine = k_begin + (WAYS > 1 ? consumer : 0);
#pragma unroll
            for (int j = 0; j < WAYS - 1; ++j)
                if (j < consumer && k_begin + j < k_end) advance();  // the steps before its first
            int k = mine;
            if constexpr (ACC_SETS > 1)
                for (; k + WAYS < k_end; k += 2 * WAYS) {
                    step(d[0], k, k == mine);
                    step(d[1], k + WAYS, k == mine);
                }
            for (; k < k_end; k += WAYS) step(d[0], k, k == mine);
            const int taken = k_end > mine ? (k_end - mine + WAYS - 1) / WAYS : 0;  // steps this consumer took
            if constexpr (LAG) {
                wgmma_wait<0>();
                if (released >= 0 && threadIdx.x % 128 == 0) release(&empty[released], rank);
            }
#pragma unroll
            for (int s = 0; s < SUB_M; ++s) fence_regs(d[0][s]);
            if constexpr (ACC_SETS > 1) {
                if (taken > 1) {  // the second set's sum into the first: one order, whatever the timing
#pragma unroll
                    for (int s = 0; s < SUB_M; ++s) {
                        fence_regs(d[1][s]);
#pragma unroll
                        for (int j = 0; j < ACC; ++j) d[0][s][j] += d[1][s][j];
                    }
                }
            }
            if constexpr (WAYS > 1)
                if (!hand_over(d[0], red, consumer, k_end - k_begin > 1, writes)) continue;  // the first finishes
            // The workspace holds the split tiles only: slots count from the first tile past `whole`.
            if (u.parts > 1 && !reduce_splits(d[0], partials, arrivals, flags + consumer,
                                              ((u.tile - whole) * CLUSTER + rank) * STORERS + rows, u.split,
                                              u.parts, splits, consumer))
                continue;  // another unit of this tile finishes it
            if constexpr (TMA_STORE)
                store_tile_tma<FP16>(d[0], smem + STAGES * STAGE_BYTES + rows * C_BYTES, map_c, consumer,
                                     tm * BLOCK_M + rows * WG_M, tn * BLOCK_N);
            else
                store_tile<FP16>(d[0], C, M, N, tm * BLOCK_M + rows * WG_M, tn * BLOCK_N);
        }
        if (WAYS > 1 && consumer > 0 && writes) named_barrier(RED_FREE, 256);  // matches the first's last arrival
        if (TMA_STORE && threadIdx.x % 128 == 0) tma_store_wait_read();  // the staging buffer outlives its stores
    }
}

#if CLUSTER_M * CLUSTER_N > 1
#define CLUSTER_DIMS __cluster_dims__(CLUSTER_M * CLUSTER_N, 1, 1)
#else
#define CLUSTER_DIMS
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_DIMS
gemm_bf16(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_a_edge,
          const __grid_constant__ TensorMap map_b, const __grid_constant__ TensorMap map_c, unsigned short* C, int M,
          int N, int K, float* partials, int* arrivals, int whole, int splits, int stream, int lanes) {
    gemm_body<false>(&map_a, &map_a_edge, &map_b, &map_c, C, M, N, K, partials, arrivals, whole, splits, stream,
                    lanes);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_DIMS
gemm_fp16(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_a_edge,
          const __grid_constant__ TensorMap map_b, const __grid_constant__ TensorMap map_c, unsigned short* C, int M,
          int N, int K, float* partials, int* arrivals, int whole, int splits, int stream, int lanes) {
    gemm_body<true>(&map_a, &map_a_edge, &map_b, &map_c, C, M, N, K, partials, arrivals, whole, splits, stream,
                    lanes);
}
