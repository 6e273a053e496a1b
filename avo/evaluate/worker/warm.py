"""A tiny Triton kernel the worker compiles and launches before loading any candidate (see worker._warm_toolchain),
and the launch shield's spin (worker/hold.py), so that both are among the set-up's trusted builds."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


def warm_triton() -> None:
    import torch

    x = torch.zeros(64, device="cuda", dtype=torch.float32)
    _add_one[(1,)](x, 64, BLOCK=64)
    from avo.evaluate.worker import hold

    hold.spin(1)
    torch.cuda.synchronize()
    if int(x.sum().item()) != 64:
        raise RuntimeError("Triton warm-up kernel computed a wrong result")
