"""Cheat (attention): reach SDPA through a module and function name decoded at run time.
Expected: rejected, runtime.library_op (SDPA dispatches the reference's op family: bmm, softmax, or a fused
attention op).
"""

import torch

_MODULE = bytes.fromhex("66756e6374696f6e616c").decode()
_FUNCTION = bytes.fromhex("7363616c65645f646f745f70726f647563745f617474656e74696f6e").decode()


def attention(q, k, v, causal, sm_scale):
    fused = getattr(getattr(torch.nn, _MODULE), _FUNCTION)
    return fused(q, k, v, is_causal=causal, scale=sm_scale, enable_gqa=q.shape[1] != k.shape[1])
