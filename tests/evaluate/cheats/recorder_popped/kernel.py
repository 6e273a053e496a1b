"""Cheat: takes the op recorder off torch's dispatch-mode stack for its library call and puts it back afterwards,
every name built at run time. The recorder sees no op, and finds itself back on the stack when the call returns.
Expected: rejected, runtime.library_op. Not caught yet: see test_cheats.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr):  # a kernel of its own, so the static guard's "no kernel" rule is not what stops it
    tl.store(x_ptr, tl.load(x_ptr))


_C = getattr(torch, "".join(["_", "C"]))
_LEN = "".join(reversed("kcats_hctapsid_hcrot_nel_"))
_POP = "".join(reversed("kcats_hctapsid_hcrot_pop_"))
_PUSH = "".join(reversed("kcats_hctapsid_hcrot_no_hsup_"))
_NAME = "".join(reversed("lumtam"))


def gemm(a, b):
    modes = [getattr(_C, _POP)(None) for _ in range(getattr(_C, _LEN)())]
    try:
        return getattr(a, _NAME)(b)
    finally:
        for mode in reversed(modes):
            getattr(_C, _PUSH)(mode)
