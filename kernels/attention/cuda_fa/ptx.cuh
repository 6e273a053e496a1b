// Thin wrappers over the PTX instructions the kernels use, written as inline assembly so the sources need no CUDA
// header: NVRTC searches no include path of its own, and nvcc compiles them the same way.
#pragma once

// 32-bit shared-memory address of a generic pointer into shared memory (what ldmatrix and cp.async take).
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned addr;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(addr) : "l"(p));
    return addr;
}

// 16-byte global -> shared copy that bypasses registers; bytes past `src_bytes` (0 or 16) are zero-filled, so a
// row past the matrix edge lands as zeros without reading out of bounds.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes));
}
// The "memory" clobbers keep the compiler from moving shared-memory accesses across these points.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(PENDING) : "memory"); }

// Four 8x8 b16 matrices from shared memory; lanes 8i..8i+7 give the row addresses of matrix i, and register i
// receives matrix i (this lane holds row lane/4, columns 2*(lane%4) and +1). `_trans` delivers each transposed.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// D = A B + D on one warp: A 16x16 (row-major fragments a[4]), B 16x8 (column fragments b0, b1), D 16x8 in fp32.
template <bool BF16>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    if constexpr (BF16) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// Two floats rounded to the 16-bit type and packed: `lo` in bits 0-15, `hi` in bits 16-31 (memory order lo, hi).
template <bool BF16>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    unsigned r;
    if constexpr (BF16) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    }
    return r;
}

template <bool BF16>
__device__ __forceinline__ unsigned short round16(float x) {
    unsigned short r;
    if constexpr (BF16) {
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
    } else {
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    }
    return r;
}
