"""TMA tensor maps for CUDA candidates: a tensor's layout, encoded on the host, passed to a kernel by value.

    from avo.cuda import load_module, tensor_map

    map_a = tensor_map(a, box=(128, 64))            # a [M, K]: boxes of 128 rows x 64 columns, 128-byte swizzle
    _module.launch("gemm_bf16", grid, block, (map_a, map_b, c, M, N, K), shared_mem=...)

On the device side the parameter is a 64-byte-aligned 128-byte struct declared `const __grid_constant__`, whose
address `cp.async.bulk.tensor` takes. The map is encoded with the driver's cuTensorMapEncodeTiled (NVIDIA's
cuda-bindings, the `cuda13`/`cuda12` extra): the tensor's dimensions innermost first, its strides in bytes, the box
in elements. Encoding is host-only work of a few microseconds; maps are kept for the last few layouts and
addresses seen, since the same buffers come back call after call (a map describes where data lives, never what
it holds).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any

__all__ = ["TensorMap", "tensor_map"]

_SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
_CACHE_SIZE = 256
"""Maps kept: enough for the inputs and outputs of several shapes over an evaluation's rotating addresses."""
_cache: OrderedDict[tuple, TensorMap] = OrderedDict()


@functools.lru_cache(maxsize=1)
def _element_types() -> dict:
    import torch

    return {torch.bfloat16: "BFLOAT16", torch.float16: "FLOAT16", torch.float32: "FLOAT32", torch.uint8: "UINT8",
            torch.int32: "INT32"}


class TensorMap:
    """An encoded CUtensorMap; `raw` is what the launch passes by value (`arg`: the same 128 bytes as a one-element
    numpy array)."""

    def __init__(self, raw: bytes, layout: tuple = ()):
        import numpy

        if len(raw) != 128:
            raise ValueError(f"a tensor map is 128 bytes; got {len(raw)}")
        self.raw = bytes(raw)
        self.arg = numpy.frombuffer(self.raw, dtype=numpy.dtype((numpy.void, 128))).copy()
        self.layout = layout
        """(dims, dtype, box, swizzle), for reading; formatted only when shown."""

    def __repr__(self) -> str:
        return f"TensorMap{self.layout}"


def tensor_map(tensor: Any, box: tuple[int, ...], *, swizzle: int = 128) -> TensorMap:
    """The TMA map of a CUDA tensor of 1 to 5 dimensions whose last dimension is contiguous, read in boxes of `box`
    elements (outermost first, like tensor.shape), with a 0, 32, 64 or 128-byte swizzle. Boxes reaching past the
    tensor are zero-filled on load."""
    # The lookup comes first and stays cheap (a few torch attribute reads): it runs on every launch, inside the
    # host time of the call. A map holds an address and a layout, nothing of the device: addresses are unique
    # across a process's devices (unified addressing), so the device is not part of the key.
    try:
        key = (tensor.data_ptr(), tensor.shape, tensor.stride(), tensor.dtype, tuple(box), swizzle)
    except AttributeError:
        raise ValueError("tensor_map needs a CUDA tensor") from None
    found = _cache.get(key)
    if found is not None:
        _cache.move_to_end(key)
        return found
    found = _encode(tensor, tuple(int(b) for b in box), swizzle)
    _cache[key] = found
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return found


def _encode(tensor: Any, box: tuple[int, ...], swizzle: int) -> TensorMap:
    import numpy
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise ValueError("tensor_map needs a CUDA tensor")
    if tensor.device.type != "cuda":  # worded like avo.cuda's launch check: the same mistake, the same message
        raise ValueError(f"tensor_map needs a CUDA tensor: CUDA kernels need CUDA tensors; got a tensor on "
                         f"{tensor.device}")
    dims, element = tuple(tensor.shape), tensor.element_size()
    if not 1 <= len(dims) <= 5 or len(box) != len(dims):
        raise ValueError(f"tensor of {len(dims)} dimensions with a box of {len(box)}: both 1 to 5 and equal")
    if tensor.stride(-1) != 1:
        raise ValueError("the tensor's last dimension must be contiguous")
    strides = tuple(s * element for s in tensor.stride()[:-1])
    if tensor.data_ptr() % 16 or any(s % 16 for s in strides):
        raise ValueError("TMA needs a 16-byte-aligned base address and row strides that are multiples of 16 bytes")
    if any(not 1 <= b <= 256 for b in box):
        raise ValueError(f"box {box}: every box edge must be 1 to 256 elements")
    if swizzle not in _SWIZZLES or (swizzle and box[-1] * element > swizzle):
        raise ValueError(f"swizzle {swizzle}: use 0, 32, 64 or 128 bytes, at least the box's inner edge "
                         f"({box[-1] * element} bytes)")
    types = _element_types()
    if tensor.dtype not in types:
        raise ValueError(f"tensor_map: no TMA element type for {tensor.dtype}")
    from cuda.bindings import driver  # after the checks: they need no driver (nor the cuda13/cuda12 extra)

    rank = len(dims)
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    err, encoded = driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{types[tensor.dtype]}"),
        rank,
        tensor.data_ptr(),
        [u64(d) for d in reversed(dims)],
        [u64(s) for s in reversed(strides)],
        [u32(b) for b in reversed(box)],
        [u32(1)] * rank,
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLES[swizzle]}"),
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        raise ValueError(f"cuTensorMapEncodeTiled refused dims {dims}, strides {strides}, box {box}, "
                         f"swizzle {swizzle}: {err.name}")
    raw = numpy.array(encoded.opaque, dtype=numpy.uint64).tobytes()
    return TensorMap(raw, (dims, tensor.dtype, box, swizzle))
