"""The launch shield's spin (avo/evaluate/worker/hold.py), compiled for Hopper on the CPU: blocks of 1024 threads that
need so few registers and no shared memory that two of them take all of an SM's 2048 thread slots, so no block of
another kernel fits beside them. That it keeps another stream's kernel waiting is tested on a GPU
(tests/evaluate/worker/test_timing.py::test_work_on_a_side_stream_cannot_hide_under_the_launch_shield)."""

from __future__ import annotations

import triton
from triton.backends.compiler import GPUTarget

from avo.evaluate.worker import hold
from avo.profile.sass import resource_usage

H100_THREADS_PER_SM, H100_REGISTERS_PER_SM = 2048, 65536


def test_two_blocks_of_the_spin_fill_a_hopper_sm(tmp_path):
    source = triton.compiler.ASTSource(fn=hold._hold, signature={"cycles": "i64"}, constexprs={})
    kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": hold.THREADS // 32})
    ptx = kernel.asm["ptx"]
    assert "nanosleep" in ptx and "%clock64" in ptx and f".reqntid {hold.THREADS}" in ptx
    cubin = tmp_path / "hold.cubin"
    cubin.write_bytes(kernel.asm["cubin"])
    [usage] = resource_usage(cubin).values()
    blocks = H100_THREADS_PER_SM // hold.THREADS
    assert blocks == 2 and blocks * hold.THREADS * usage["REG"] <= H100_REGISTERS_PER_SM, usage
    assert usage["SHARED"] == 0 and usage["LOCAL"] == 0, usage
