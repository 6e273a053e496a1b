// Thin wrappers over the Hopper (sm_90a) PTX the Hopper seeds use: mbarriers, TMA tensor copies, wgmma fences and
// shared-memory matrix descriptors, setmaxnreg. Inline assembly, so the sources need no CUDA header (NVRTC searches
// no include path of its own, and nvcc compiles them the same way). kernels/gemm/cuda_wgmma and
// kernels/attention/cuda_fa3 carry the same file, since a seed is one self-contained folder.
#pragma once

// A CUtensorMap as the driver encodes it (avo.cuda.tensor_map builds it on the host); passed by value as a
// __grid_constant__ kernel parameter, so its address is a parameter-space address TMA can read.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---- mbarrier: a transaction-counting barrier in shared memory.
__device__ __forceinline__ void mbar_init(unsigned long long* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(bar)), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) before anyone uses them.
__device__ __forceinline__ void mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also announces `bytes` of TMA transactions the phase must see before it completes.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_u32(bar)) : "memory");
}
// Waits until the phase of parity `phase` has completed. A fresh barrier counts its phase of parity 1 as complete,
// so a producer's first wait on an "empty" barrier (parity 1) passes at once.
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, int phase) {
    const unsigned addr = smem_u32(bar);
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(addr), "r"(phase) : "memory");
    }
}

// ---- TMA: one box of a 2-D tensor into shared memory; completion is counted on `bar`. x is the inner (contiguous)
// coordinate, y the outer one, both in elements; a box reaching past the tensor is zero-filled.
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, unsigned long long* bar, int x, int y) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
        :: "r"(smem_u32(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(bar)), "r"(x), "r"(y)
        : "memory");
}
// The same for a 3-D tensor: x innermost, z outermost (attention's [batch x heads, rows, head dim]).
__device__ __forceinline__ void tma_load_3d(void* dst, const TensorMap* map, unsigned long long* bar, int x, int y,
                                            int z) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];"
        :: "r"(smem_u32(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(bar)), "r"(x), "r"(y),
        "r"(z) : "memory");
}
// One box from shared memory to a 2-D tensor (the part past the tensor's edge is not written); completion is tracked
// per issuing thread in bulk groups.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, const void* src, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(src)), "r"(x), "r"(y) : "memory");
}
// The same for a 3-D tensor: x innermost, z outermost.
__device__ __forceinline__ void tma_store_3d(const TensorMap* map, const void* src, int x, int y, int z) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
                 :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(src)), "r"(x), "r"(y), "r"(z)
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until this thread's stores have finished reading their shared-memory source (it may be written again).
__device__ __forceinline__ void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// Orders this thread's ordinary shared-memory writes before later reads by the async proxy (TMA, wgmma).
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// A barrier for `threads` threads (a multiple of 32) under hardware barrier `id` (1-15; 0 is __syncthreads).
__device__ __forceinline__ void named_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
// An arrival on hardware barrier `id` that does not wait: the other `threads` minus 32 x warps sync on it.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
// The same box into the same shared-memory offset of every CTA of the cluster in `cta_mask`; each destination's
// barrier at `bar`'s offset counts the bytes that land there.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TensorMap* map, unsigned long long* bar, int x,
                                                      int y, unsigned short cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;"
        :: "r"(smem_u32(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(bar)), "r"(x), "r"(y),
        "h"(cta_mask) : "memory");
}

// ---- Clusters: this CTA's rank, an arrival on the barrier at the same offset in CTA `rank`, and a cluster-wide
// barrier of all threads (which also orders barrier initialisation before remote use, and keeps a CTA alive until
// its partner no longer touches its shared memory). The arrival keeps the default .release.cta semantics: with
// .release.cluster ptxas puts a GPU-wide MEMBAR before it, which a consumer handing back a stage (its reads already
// retired by wgmma's wait) does not need, and which made every K-step of gemm.cu's clusters wait on memory.
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(remote) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ void tma_prefetch_map(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// ---- wgmma bookkeeping: fence before the first wgmma that reads registers written since, commit a group, wait until
// at most N groups are still in flight.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// Keeps the compiler from touching accumulator registers while wgmma owns them.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

template <int R>
__device__ __forceinline__ void fence_regs(unsigned (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i]) :: "memory");
}

// ---- Shared-memory matrix descriptor for a tile that TMA wrote with the SWIZZLE-byte swizzle (128, 64 or 32):
// start address, leading and stride byte offsets (all in 16-byte units), swizzle mode in bits 62-63 (1: 128 B,
// 2: 64 B, 3: 32 B). The tile's base must be aligned to one swizzle atom: 8 rows of SWIZZLE bytes (1024 to 256).
// Its upper half (the stride and the swizzle mode) depends on the layout alone, not on the address.
template <int SWIZZLE = 128>
__host__ __device__ constexpr unsigned smem_desc_hi(unsigned stride_bytes) {
    static_assert(SWIZZLE == 128 || SWIZZLE == 64 || SWIZZLE == 32, "a 128-, 64- or 32-byte swizzle");
    return ((stride_bytes >> 4) & 0x3FFF) | (SWIZZLE == 128 ? 1u : SWIZZLE == 64 ? 2u : 3u) << 30;
}
template <int SWIZZLE = 128>
__device__ __forceinline__ unsigned long long smem_desc(const void* p, unsigned lead_bytes, unsigned stride_bytes) {
    unsigned long long desc = (smem_u32(p) & 0x3FFFF) >> 4;
    desc |= static_cast<unsigned long long>((lead_bytes >> 4) & 0x3FFF) << 16;
    desc |= static_cast<unsigned long long>(smem_desc_hi<SWIZZLE>(stride_bytes)) << 32;
    return desc;
}

// ---- Register budgets per warpgroup (needs a register cap at entry: __launch_bounds__(threads, 1)).
template <int REGS>
__device__ __forceinline__ void regs_dealloc() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(REGS)); }
template <int REGS>
__device__ __forceinline__ void regs_alloc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(REGS)); }

// 2^x on the special-function unit (about 2 ulp; -inf gives +0).
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Two floats rounded to nearest into one bf16x2 / f16x2 word (lo in the low half).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ unsigned pack_f16(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
