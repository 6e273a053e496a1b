"""avo.cuda.tensor_map's cache, on CPU with the driver's encoder stood in for: a map is a pure function of the tensor's
address, shape, strides, dtype and device and of the box and swizzle, so the same key gives the same map and a key
differing in any part encodes a new one; the cache holds a bounded number of maps."""

from __future__ import annotations

import pytest
import torch

from avo import cuda_tensor_map


@pytest.fixture
def encoded(monkeypatch):
    """Each call of the (stand-in) encoder, recorded; the cache starts empty and is emptied after."""
    calls = []

    def encode(tensor, box, swizzle):
        calls.append((tensor.data_ptr(), tuple(tensor.shape), box, swizzle))
        return cuda_tensor_map.TensorMap(bytes([len(calls) % 256]) * 128, (tuple(tensor.shape), tensor.dtype, box))

    monkeypatch.setattr(cuda_tensor_map, "_encode", encode)
    cuda_tensor_map._cache.clear()
    yield calls
    cuda_tensor_map._cache.clear()


def test_the_same_key_gives_the_same_map_without_encoding_again(encoded):
    x = torch.zeros(256, 128, dtype=torch.bfloat16)
    first = cuda_tensor_map.tensor_map(x, box=(64, 64))
    assert cuda_tensor_map.tensor_map(x, box=(64, 64)) is first
    assert cuda_tensor_map.tensor_map(x.view(256, 128), box=[64, 64]) is first  # another view of the same layout
    assert len(encoded) == 1


def test_a_key_differing_in_any_part_encodes_a_new_map(encoded):
    x = torch.zeros(256, 128, dtype=torch.bfloat16)
    first = cuda_tensor_map.tensor_map(x, box=(64, 64))
    others = [
        (x[64:], (64, 64), 128),                                  # address (and shape)
        (x[:, :64], (64, 64), 128),                               # shape, same address and strides
        (x.view(128, 256), (64, 64), 128),                        # shape and strides
        (x.as_strided((256, 128), (1, 256)), (64, 64), 128),      # strides only (a transposed view's)
        (x.view(torch.float16), (64, 64), 128),                   # dtype, same bytes
        (x, (128, 64), 128),                                      # box
        (x, (64, 64), 64),                                        # swizzle
    ]
    maps = [cuda_tensor_map.tensor_map(t, box=box, swizzle=swizzle) for t, box, swizzle in others]
    assert len(encoded) == 1 + len(others)
    assert all(m is not first for m in maps) and len({id(m) for m in maps}) == len(others)


def test_the_cache_keeps_a_bounded_number_of_maps_the_least_recently_used_leaving_first(encoded, monkeypatch):
    monkeypatch.setattr(cuda_tensor_map, "_CACHE_SIZE", 4)
    x = torch.zeros(8, 64, dtype=torch.bfloat16)
    rows = [x[i:] for i in range(6)]
    first = cuda_tensor_map.tensor_map(rows[0], box=(1, 64))
    for row in rows[1:4]:
        cuda_tensor_map.tensor_map(row, box=(1, 64))
    assert cuda_tensor_map.tensor_map(rows[0], box=(1, 64)) is first  # used again: now the most recent
    for row in rows[4:]:
        cuda_tensor_map.tensor_map(row, box=(1, 64))
    assert len(cuda_tensor_map._cache) == 4
    assert cuda_tensor_map.tensor_map(rows[0], box=(1, 64)) is first and len(encoded) == 6
    cuda_tensor_map.tensor_map(rows[1], box=(1, 64))  # the least recently used was dropped: encoded again
    assert len(encoded) == 7
