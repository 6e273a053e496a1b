"""Cheat (attention): call cuDNN/flash SDPA under an innocent-looking alias.
Expected: rejected, static.library_call.
"""

from torch.nn.functional import scaled_dot_product_attention as tiled_online_softmax


def attention(q, k, v, causal, sm_scale):
    return tiled_online_softmax(q, k, v, is_causal=causal, scale=sm_scale,
                                enable_gqa=q.shape[1] != k.shape[1])
