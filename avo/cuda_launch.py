"""A kernel launch packed once and sent straight to the driver.

    launch = module.launcher("gemm_bf16", grid, block, (map_a, map_b, c, M, N, K), shared_mem=smem)
    launch()                 # on torch's current stream of the arguments' device; again and again

The arguments are converted once, each to its C bytes at its natural alignment (a tensor map at 64), into one
buffer that `launch()` hands to cuLaunchKernel through ctypes: a call costs the host one driver call, where CuPy's
call converted each argument through numpy every time (about 13 µs of a GEMM call's 51 on the H200; more for
attention's four tensor maps). A wrapper that keeps launchers by its arguments' addresses and shapes (the same buffers
come back call after call, as with tensor maps) pays the conversion once per layout. The driver copies the arguments
when the launch is queued, so one launcher may be called from several threads.

Here too: what a launch makes of its arguments (`_kernel_arg`: the C type each passes as; `_arg_bytes`: its bytes),
what a kept launch knows them by (`_arg_key`), and the device they are on (`_device_of`).
"""

from __future__ import annotations

import ctypes
import functools
import struct
from typing import Any

from avo.cuda_tensor_map import TensorMap

__all__ = ["KeptLaunches", "Launch", "capturing", "current_stream", "pack"]

_INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT
_MAP_ALIGN = 64
"""A CUtensorMap parameter is declared 64-byte aligned."""


def pack(pieces: list[tuple[bytes, int]]) -> tuple[Any, int]:
    """(buffer, params): each argument's C bytes, given with its alignment, laid out in one ctypes buffer at a
    multiple of that alignment, followed by the table of pointers to them that cuLaunchKernel's kernelParams takes;
    `params` is the table's address. The buffer must outlive every launch through `params`."""
    offsets, parts, size = [], [], 0
    for raw, align in pieces:
        pad = -size % align
        parts.append(bytes(pad))
        offsets.append(size + pad)
        parts.append(raw)
        size += pad + len(raw)
    parts.append(bytes(-size % 8))
    table_at = size + (-size % 8)
    buffer = ctypes.create_string_buffer(table_at + 8 * len(pieces) + _MAP_ALIGN)
    base = -(-ctypes.addressof(buffer) // _MAP_ALIGN) * _MAP_ALIGN  # aligned as the kernel's own parameters are
    parts.append(struct.pack(f"<{len(offsets)}Q", *[base + at for at in offsets]))
    blob = b"".join(parts)
    ctypes.memmove(base, blob, len(blob))
    return buffer, base + table_at


class Launch:
    """One kernel with its grid, block, dynamic shared memory and packed arguments; calling it queues the kernel on
    torch's current stream of `device`."""

    def __init__(self, function: int, device: int, grid: tuple[int, ...], block: tuple[int, ...], shared_mem: int,
                 pieces: list[tuple[bytes, int]], name: str):
        self.function, self.device, self.shared_mem, self.name = function, device, shared_mem, name
        self.dims = (*grid, *(1,) * (3 - len(grid)), *block, *(1,) * (3 - len(block)))
        self._buffer, self.params = pack(pieces)

    def __call__(self) -> None:
        import torch

        if torch.cuda.current_device() == self.device:
            self._queue()
        else:
            with torch.cuda.device(self.device):
                self._queue()

    def _queue(self) -> None:
        stream = current_stream(self.device)
        status = _driver().cuLaunchKernel(self.function, *self.dims, self.shared_mem, stream, self.params, None)
        if status == _INVALID_CONTEXT:  # a thread that never touched the runtime has no current context yet
            _make_current(self.device)
            status = _driver().cuLaunchKernel(self.function, *self.dims, self.shared_mem, stream, self.params, None)
        if status:
            raise RuntimeError(f"cuLaunchKernel refused {self.name}: {_error_name(status)}")


class KeptLaunches:
    """Prepared launches by a key the caller chooses (everything a launch depends on), the oldest dropped past
    `limit`: the same buffers come back call after call, so a call is a dictionary lookup and the driver's launch.

        _LAUNCHES = KeptLaunches(64)
        _LAUNCHES.get((a.data_ptr(), c.data_ptr(), M, N, K), lambda: module.launcher(...))()
    """

    def __init__(self, limit: int):
        self.limit = limit
        self._kept: dict = {}

    def get(self, key, prepare) -> Launch:
        """The launch kept under `key`, or `prepare()`'s, kept from now on (an unhashable key's is not kept: `prepare`
        says what is wrong with the arguments)."""
        try:
            ready = self._kept.get(key)
        except TypeError:
            return prepare()
        if ready is None:
            ready = self._kept[key] = prepare()
            while len(self._kept) > self.limit:
                try:
                    del self._kept[next(iter(self._kept))]  # the oldest
                except (RuntimeError, KeyError, StopIteration):  # another thread's launch changed it meanwhile
                    break
        return ready

    def clear(self) -> None:
        self._kept.clear()

    def keys(self):
        return self._kept.keys()

    def __len__(self) -> int:
        return len(self._kept)


def current_stream(device: int) -> int:
    """The raw handle of torch's current stream on device `device` (an index), for a wrapper that keeps state per
    stream. torch's own C accessor (inductor's launchers use it) skips building a Stream object on every call.
    A CPU tensor's `get_device()`, -1, is refused as launch refuses CPU tensors."""
    import torch

    if device < 0:
        raise ValueError("CUDA kernels need CUDA tensors; got a tensor on the CPU")
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def capturing() -> bool:
    """Whether a CUDA graph is being captured on torch's current stream: a wrapper then keeps nothing it makes for
    the call (the graph's memory, replayed with it) and no launch. Never where CUDA was not initialized (no capture
    can be under way, and a CPU-only process asks no driver)."""
    import torch

    return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()


@functools.lru_cache(maxsize=1)
def _driver() -> Any:
    """libcuda's cuLaunchKernel, typed (the library torch and CuPy already loaded in this process)."""
    lib = ctypes.CDLL("libcuda.so.1")
    uint, pointer = ctypes.c_uint, ctypes.c_void_p
    lib.cuLaunchKernel.argtypes = [pointer, uint, uint, uint, uint, uint, uint, uint, pointer, pointer, pointer]
    lib.cuLaunchKernel.restype = ctypes.c_int
    return lib


def _make_current(device: int) -> None:
    """The device's primary context (the one torch and CuPy use) made current on this thread."""
    lib, handle, context = _driver(), ctypes.c_int(), ctypes.c_void_p()
    if lib.cuDeviceGet(ctypes.byref(handle), device) or lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle) \
            or lib.cuCtxSetCurrent(context):
        raise RuntimeError(f"no CUDA context could be made current for device {device}")


def _error_name(status: int) -> str:
    name = ctypes.c_char_p()
    if _driver().cuGetErrorName(status, ctypes.byref(name)) == 0 and name.value:
        return f"{name.value.decode()} ({status})"
    return f"CUresult {status}"


def _device_of(args: tuple) -> int:
    import torch

    index = None
    for a in args:  # the common case, every tensor on one GPU, without building device objects
        if isinstance(a, torch.Tensor):
            if not a.is_cuda or (index is not None and a.get_device() != index):
                break
            index = a.get_device()
    else:
        if index is not None:
            return index
    devices = {a.device for a in args if isinstance(a, torch.Tensor)}
    if not devices:
        raise ValueError("launch needs at least one CUDA tensor among the arguments (it picks the device)")
    if any(d.type != "cuda" for d in devices):
        raise ValueError(f"CUDA kernels need CUDA tensors; got tensors on {', '.join(sorted(map(str, devices)))}")
    if len(devices) > 1:
        raise ValueError(f"the tensors are on several devices: {', '.join(sorted(map(str, devices)))}")
    return devices.pop().index or 0


def _dims(value: int | tuple[int, ...]) -> tuple[int, ...]:
    if type(value) is int and value >= 1:  # the common case first: launch runs on the caller's critical path
        return (value,)
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(not isinstance(d, int) or d < 1 for d in dims):
        raise ValueError(f"grid and block are 1 to 3 positive ints; got {value!r}")
    return dims


def _int32(value: int) -> Any:
    if not -2**31 <= value < 2**31:
        raise ValueError(f"{value} does not fit a 32-bit int parameter: pass numpy.int64(...) for a long long")
    return _converters()[1](value)


@functools.lru_cache(maxsize=1)
def _converters() -> tuple[dict, Any]:
    """Conversions by exact type, for each argument of each new launch, and numpy's int32."""
    import numpy
    import torch

    return {torch.Tensor: lambda t: numpy.uint64(t.data_ptr()), TensorMap: lambda m: m.arg, int: _int32,
            bool: numpy.bool_, float: numpy.float32}, numpy.int32


@functools.lru_cache(maxsize=1)
def _tensor() -> type:
    import torch

    return torch.Tensor


_C_INT, _C_POINTER = struct.Struct("<i").pack, struct.Struct("<Q").pack


def _arg_key(value: Any) -> Any:
    """What a launch's kept preparation knows an argument by: a tensor by its address (all the kernel receives), a
    tensor map by identity (the key keeps it alive, so its id is not reused), anything else by type and value."""
    kind = type(value)
    if kind is TensorMap:
        return value
    if kind in (int, float, bool):
        return kind, value
    return value.data_ptr() if isinstance(value, _tensor()) else (kind, value)


def _arg_bytes(value: Any) -> tuple[bytes, int]:
    """An argument's C bytes and their alignment (as _kernel_arg converts it; a tensor map's at 64 bytes)."""
    kind = type(value)
    if kind is TensorMap:
        return value.raw, 64
    if kind is int and -2**31 <= value < 2**31:
        return _C_INT(value), 4
    if kind is _tensor():
        return _C_POINTER(value.data_ptr()), 8
    raw = _kernel_arg(value).tobytes()
    return raw, 64 if len(raw) == 128 else min(len(raw), 8)


def _kernel_arg(value: Any) -> Any:
    convert = _converters()[0].get(type(value))
    if convert is not None:
        return convert(value)
    import numpy
    import torch

    if isinstance(value, torch.Tensor):
        return numpy.uint64(value.data_ptr())
    if isinstance(value, TensorMap):
        return value.arg
    if isinstance(value, bool | numpy.bool_):
        return numpy.bool_(value)
    if isinstance(value, numpy.generic):
        return value
    if isinstance(value, int):
        return _int32(value)
    if isinstance(value, float):
        return numpy.float32(value)
    raise TypeError(f"cannot pass a {type(value).__name__} to a kernel: use tensors, ints, floats, bools, numpy "
                    "scalars or tensor maps")
