// C = A B for the shapes TMA cannot address (K or N not a multiple of 8: rows not 16-byte aligned), row-major bf16
// or fp16: one thread per output element, fp32 accumulation. Only the small odd shapes of the check suite come here;
// a file of its own, so that it compiles once rather than in every build of gemm.cu.
#include "hopper.cuh"

template <bool FP16>
__device__ __forceinline__ float to_float(unsigned short v) {
    if constexpr (FP16) {
        float f;
        asm("{ .reg .f16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(v));
        return f;
    } else {
        return __uint_as_float(static_cast<unsigned>(v) << 16);
    }
}

template <bool FP16>
__device__ __forceinline__ void simple_body(const unsigned short* A, const unsigned short* B, unsigned short* C,
                                            int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N) return;
    for (int row = blockIdx.y; row < M; row += gridDim.y) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k)
            acc += to_float<FP16>(A[static_cast<long long>(row) * K + k]) *
                   to_float<FP16>(B[static_cast<long long>(k) * N + col]);
        const unsigned packed = FP16 ? pack_f16(acc, 0.f) : pack_bf16(acc, 0.f);
        C[static_cast<long long>(row) * N + col] = static_cast<unsigned short>(packed & 0xFFFF);
    }
}

extern "C" __global__ void gemm_simple_bf16(const unsigned short* A, const unsigned short* B, unsigned short* C,
                                            int M, int N, int K) {
    simple_body<false>(A, B, C, M, N, K);
}

extern "C" __global__ void gemm_simple_fp16(const unsigned short* A, const unsigned short* B, unsigned short* C,
                                            int M, int N, int K) {
    simple_body<true>(A, B, C, M, N, K);
}
