"""The launch shield's spin: a kernel that holds every thread slot of every SM for a number of cycles, so that no
kernel of another stream runs while it spins.

The shield (timing.LaunchShield) keeps the device busy between the L2 flush and a timed call's start event, so that
the host's launch work is not timed as the kernel's. A spin of one thread (torch.cuda._sleep) leaves the SMs free: a
candidate could launch its work on a side stream at the start of its call, have it run and finish under the spin,
and show on the current stream only what it chose to (tests/evaluate/cheats/side_stream_shielded: a plausible spin
and a wait on the side stream's event). This kernel runs blocks of 1024 threads, as many as every SM's thread slots
hold (2 per SM on Hopper: 12 registers a thread, no shared memory), each thread asleep between reads of the cycle
counter (nanosleep: little issue work or power). A kernel of another stream finds no free slot until the spin ends:
what it does then runs after the start event, inside the timed window or past its end, where the side-stream check
(worker/bench.py) sees it. The caller waits until the flush before the spin has finished before it lets the call
launch anything (timing.py), so the spin's blocks hold the SMs by then.
"""

from __future__ import annotations

import functools

import triton
import triton.language as tl

THREADS = 1024
"""Threads per block (num_warps 32): the most a block may have, so the fewest blocks fill an SM."""


@triton.jit(do_not_specialize=["cycles"])  # one build for every length (Triton would make three: 1, 16k, other)
def _hold(cycles):
    start = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
    now = start
    while now - start < cycles:
        now = tl.inline_asm_elementwise("{ nanosleep.u32 500; mov.u64 $0, %clock64; }", "=l", [], dtype=tl.int64,
                                        is_pure=False, pack=1)


@functools.lru_cache(maxsize=8)
def blocks(device: int) -> int:
    """Blocks of THREADS that take every thread slot of every SM of `device`."""
    import torch

    props = torch.cuda.get_device_properties(device)
    return props.multi_processor_count * max(1, props.max_threads_per_multi_processor // THREADS)


def spin(cycles: int) -> None:
    """Queue the spin on torch's current stream of the current device: every thread slot held for `cycles` SM
    cycles."""
    import torch

    _hold[(blocks(torch.cuda.current_device()),)](cycles, num_warps=THREADS // 32)
