"""Cheat (GPU): the product on a side stream, hidden under the evaluator's launch shield. Each call launches it on a
side stream once the inputs have surely landed, then keeps the host busy, so that the shield (a spin before the start
event, fit to the contenders' host time per call) grows to its longest; the side stream's work runs while the current
stream still spins. On the current stream itself: a spin of a plausible length (as if the product ran at
PRETEND_TFLOPS), then a wait for the side stream, so the output is ready in stream order and the device is idle when
the end event is recorded: nothing is left running for the side-stream check to see.
Expected on a GPU: correct, at the time its product really takes: the shield holds every SM, so the product runs
inside the timed window (tests/evaluate/test_cheats.py::test_work_hidden_under_the_launch_shield_is_timed)."""

import time

import torch
import triton
import triton.language as tl

PRETEND_TFLOPS = 1300.0
LAND_US = 100.0  # the inputs' copy and the L2 flush before the shield are done by then
HOST_US = 1300.0  # host time per call: the shield is fit to 1.5 times it (2 ms at most)
SPIN_CYCLES_PER_US = 1980


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


_side = None
_spin = getattr(torch.cuda, "_" + "sleep")


def _busy_until(t_end):
    while time.perf_counter() < t_end:
        pass


def gemm(a, b):
    global _side
    began = time.perf_counter()
    if _side is None:
        _side = torch.cuda.Stream()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    _busy_until(began + LAND_US * 1e-6)
    with torch.cuda.stream(_side):
        _mm_kernel[(triton.cdiv(M, 128), triton.cdiv(N, 128))](
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
        done = torch.cuda.Event()
        done.record()
    _busy_until(began + HOST_US * 1e-6)
    _spin(int(2.0 * M * N * K / (PRETEND_TFLOPS * 1e12) * 1e6 * SPIN_CYCLES_PER_US))
    torch.cuda.current_stream().wait_event(done)
    return c
