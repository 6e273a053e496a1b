"""CUDA C++ in a candidate: compile a `.cu` file of the candidate's folder with NVRTC and launch it on torch tensors.

    from avo.cuda import load_module

    BLOCK_M = 128  # avo: tune 64 128 256
    _module = load_module("gemm.cu", defines={"BLOCK_M": BLOCK_M})

    def gemm(a, b):
        c = torch.empty(...)
        _module.launch("gemm_bf16", grid, block, (a, b, c, M, N, K), shared_mem=smem_bytes)
        return c

Nothing is compiled at import, so kernel.py imports without a GPU; the first launch compiles for the GPU the tensors
live on, with its architecture-specific features (sm_90a on Hopper, sm_100a on Blackwell), and the cubin is cached
in the process by source, headers, options and target. Kernels run on torch's current stream. Arguments: a CUDA
tensor passes its data pointer, a Python int an `int` (32-bit), a float a `float`, a bool a `bool`; a numpy scalar
passes as it is (numpy.int64 for a `long long`); a `tensor_map(...)` passes a TMA tensor map by value (declare it
`const __grid_constant__` in the kernel; see cuda_tensor_map.py). Compile errors raise CudaCompileError with
NVRTC's log.

This module is the one part of avo a candidate may import: the compile path and the stream stay the evaluator's.
Includes must stay inside the candidate's folder (or be plain system headers), so a compile log cannot show files
from elsewhere.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avo.cuda_source import (HEADER_SUFFIXES, LOG_LIMIT, CudaCompileError, check_includes, headers,
                             performance_notices, trim_log, whole_elf)
from avo.cuda_tensor_map import TensorMap, tensor_map

__all__ = ["HEADER_SUFFIXES", "LOG_LIMIT", "Build", "CudaCompileError", "CudaModule", "TensorMap", "check_includes",
           "declared_builds", "load_module", "prepare", "target_arch", "tensor_map", "trim_log"]

BASE_OPTIONS = ("-std=c++17", "--generate-line-info")
_DEFAULT_SMEM_LIMIT = 48 * 1024
_NAME = re.compile(r"[A-Za-z_]\w*$")
_FILE_OPTIONS = ("-I", "--include-path", "-include", "--pre-include", "-isystem", "--dependency", "-M")


class CupyUnavailable(ImportError):
    """CuPy is not installed: CUDA C++ compiles and launches through it (the machine's set-up, not the candidate)."""


def _from_cupy(module: str) -> Any:
    """A CuPy module (`cupy`, `cupy_backends.cuda.libs.nvrtc`, ...), or CupyUnavailable saying what to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("cupy", "cupy_backends"):
            raise
        from avo import extras

        extra, why = extras.suggested_extra()
        raise CupyUnavailable(f"CuPy is not installed, and CUDA C++ kernels compile and launch through it: "
                              f"{extras.install_command(extra)} (avo's {extra} extra; {why})") from None


@dataclass(frozen=True)
class Build:
    """One compile of one source as a candidate declared it: what the CPU compile check repeats with nvcc."""

    source: Path
    folder: Path
    flags: tuple[str, ...]
    """Options after the base ones: -D defines, then the candidate's own."""


# Candidate folder -> (source path, flags) of each build load_module declared there. Kept as strings, so a Build
# object altered after the fact (it is reachable from candidate code) matches nothing here and is refused.
_declared: dict[Path, dict[tuple[str, tuple[str, ...]], None]] = {}
_cubins: dict[str, tuple[bytes, dict[str, str]]] = {}
_notices: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}
"""notice_key(build) -> ptxas's performance notices from its last compile (performance_notices)."""


def notice_key(build: Build) -> tuple[str, tuple[str, ...]]:
    """What `_notices` files a build's notices under: its source path and flags."""
    return str(build.source), tuple(build.flags)


def compile_notices(folder: Path) -> list[str]:
    """The performance notices of every build kernel.py declared in `folder`, from their compiles in this process."""
    return [n for b in declared_builds(folder) for n in _notices.get(notice_key(b), ())]


def declared_builds(folder: Path) -> list[Build]:
    """The builds kernel.py declared (through load_module) when it was imported in this process."""
    folder = Path(folder).resolve()
    return [Build(Path(source), folder, flags) for source, flags in _declared.get(folder, {})]


def _check_declared(build: Build) -> None:
    if (str(build.source), tuple(build.flags)) not in _declared.get(Path(build.folder), {}):
        raise CudaCompileError("this module was not made by load_module (or was altered since): build modules "
                               "with avo.cuda.load_module")


def target_arch(capability: tuple[int, int]) -> str:
    """Compile target for a compute capability: architecture-specific (`a`) from Hopper on, where wgmma, TMA and
    tcgen05 live."""
    major, minor = capability
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def define_flags(defines: dict[str, Any] | None) -> tuple[str, ...]:
    flags = []
    for name, value in (defines or {}).items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"define name {name!r} is not a C identifier")
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int | float | str) or (isinstance(value, str) and not value.strip()) or \
                any(c in str(value) for c in "\n\r"):
            raise ValueError(f"define {name}={value!r}: use an int, float, bool or a one-line string")
        flags.append(f"-D{name}={value}")
    return tuple(flags)


def load_module(source: str, *, defines: dict[str, Any] | None = None, options: tuple[str, ...] = (),
                name_expressions: tuple[str, ...] = ()) -> CudaModule:
    """A lazily compiled module of `source`, a .cu file named relative to the calling file's folder.

    `defines` become -D options (the way to pass `# avo: tune` knobs); `options` are further NVRTC options (the
    target is chosen here: no -arch); `name_expressions` name template kernels to instantiate, e.g. "tile<128>".
    """
    # The caller's code object names the file it was loaded from (a module's __file__ could be reassigned).
    caller = sys._getframe(1).f_code.co_filename
    if not caller or caller.startswith("<"):
        raise ValueError("load_module must be called from a module file (kernel.py), which locates the source")
    folder = Path(caller).resolve().parent
    path = (folder / source).resolve()
    if not path.is_relative_to(folder):
        raise ValueError(f"{source}: the source must be inside the candidate's folder")
    if not path.is_file():
        raise CudaCompileError(f"{source}: no such file next to {Path(caller).name}")
    if any(str(o).startswith(("-arch", "--gpu-architecture", "-code", "--gpu-code")) for o in options):
        raise ValueError("the compile target is chosen from the GPU present: leave -arch out of `options`")
    if any(str(o).startswith(_FILE_OPTIONS) for o in options):
        raise ValueError("include paths and forced includes are set here (the candidate's folder and the CUDA "
                         "headers): leave -I and -include out of `options`")
    flags = define_flags(defines) + tuple(str(o) for o in options)
    _declared.setdefault(folder, {})[(str(path), flags)] = None
    return CudaModule(Build(path, folder, flags), tuple(str(e) for e in name_expressions))


class CudaModule:
    """Kernels of one build; compiled on first use, loaded once per device."""

    def __init__(self, build: Build, name_expressions: tuple[str, ...] = ()):
        self.build = build
        self.name_expressions = name_expressions
        self._modules: dict[int, Any] = {}
        self._mapping: dict[str, str] = {}
        self._functions: dict[tuple[int, str], Any] = {}
        self._smem_limits: dict[tuple[int, str], int] = {}
        self._streams: dict[tuple[int, int], Any] = {}

    def options(self, arch: str) -> tuple[str, ...]:
        system = cuda_include_dir()
        return (*BASE_OPTIONS, f"-arch={arch}", f"-I{self.build.folder}", *((f"-I{system}",) if system else ()),
                *self.build.flags)

    def cache_key(self, arch: str) -> str:
        """What the process's cubin cache knows this build by: its source and headers as they are now, the
        options for `arch`, and the NVRTC version."""
        nvrtc = _from_cupy("cupy_backends.cuda.libs.nvrtc")
        digest = hashlib.sha256()
        for part in (self.build.source.read_text(), *headers(self.build.folder), *self.options(arch),
                     *self.name_expressions, str(nvrtc.getVersion())):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()

    def compile(self, arch: str) -> bytes:
        """The cubin for `arch` (cached by content, options and NVRTC version); CudaCompileError with NVRTC's log."""
        build = self.build
        _check_declared(build)
        check_includes(build.folder)
        key = self.cache_key(arch)
        if key not in _cubins:
            nvrtc = _from_cupy("cupy_backends.cuda.libs.nvrtc")
            cubin, mapping, log = _nvrtc_compile(nvrtc, build.source.read_text(), build, self.options(arch),
                                                 self.name_expressions)
            _cubins[key] = (cubin, mapping)
            _notices[notice_key(build)] = performance_notices(log)
        cubin, self._mapping = _cubins[key]
        return cubin

    def launch(self, name: str, grid: int | tuple[int, ...], block: int | tuple[int, ...], args: tuple,
               *, shared_mem: int = 0) -> None:
        """Launch kernel `name` on torch's current stream of the tensors' device."""
        import torch

        device = _device_of(args)
        function = self._function(name, device)  # a missing CuPy is reported here, on the first launch
        stream = self._stream(device, _current_stream(torch, device))
        import cupy

        with cupy.cuda.Device(device):
            if shared_mem > self._smem_limits.get((device, name), _DEFAULT_SMEM_LIMIT):
                from cupy_backends.cuda.api import driver

                # Above 48 KiB a kernel must opt in to dynamic shared memory, once per function and size.
                driver.funcSetAttribute(function.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        shared_mem)
                self._smem_limits[(device, name)] = shared_mem
            function(_dims(grid), _dims(block), tuple(_kernel_arg(a) for a in args), shared_mem=shared_mem,
                     stream=stream)

    def _function(self, name: str, device: int) -> Any:
        function = self._functions.get((device, name))
        if function is None:
            import torch

            cupy = _from_cupy("cupy")
            from cupy.cuda import function as cupy_function

            with cupy.cuda.Device(device):
                module = self._modules.get(device)
                if module is None:
                    cubin = self.compile(target_arch(torch.cuda.get_device_capability(device)))
                    module = cupy_function.Module()
                    module.load(cubin)
                    self._modules[device] = module
                try:
                    function = module.get_function(self._mapping.get(name, name))
                except Exception:
                    raise ValueError(f"{self.build.source.name} has no kernel named {name!r} (an extern \"C\" "
                                     "__global__ function, or a name expression given to load_module)") from None
            self._functions[(device, name)] = function
        return function

    def _stream(self, device: int, pointer: int) -> Any:
        stream = self._streams.get((device, pointer))
        if stream is None:
            stream = self._streams[(device, pointer)] = _external_stream(_from_cupy("cupy"), pointer, device)
        return stream


class _StreamHandle:
    """A raw `cudaStream_t` offered through the CUDA stream protocol, whichever torch release made it."""

    def __init__(self, pointer: int):
        self.pointer = pointer

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.pointer)


def _external_stream(cupy: Any, pointer: int, device: int) -> Any:
    """CuPy's view of a stream it did not create. CuPy 14 deprecates `ExternalStream` for `Stream.from_external`;
    the extras allow CuPy 13, so a CuPy without the latter keeps the former. A stream from `from_external` belongs
    to whichever device is current when it is used, and `launch` makes `device` current."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is None:
        return cupy.cuda.ExternalStream(pointer, device)
    return from_external(_StreamHandle(pointer))


def _nvrtc_compile(nvrtc: Any, text: str, build: Build, options: tuple[str, ...],
                   name_expressions: tuple[str, ...]) -> tuple[bytes, dict[str, str], str]:
    """(cubin, lowered names, NVRTC's log: ptxas's notices are in it even after a success)."""
    name = build.source.relative_to(build.folder).as_posix()
    program = nvrtc.createProgram(text, name, [], [])
    try:
        try:
            for expression in name_expressions:
                nvrtc.addNameExpression(program, expression)
            nvrtc.compileProgram(program, list(options))
            mapping = {e: nvrtc.getLoweredName(program, e) for e in name_expressions}
        except nvrtc.NVRTCError as exc:
            log = trim_log(nvrtc.getProgramLog(program), build.folder) or str(exc)
            arch = next(o.split("=", 1)[1] for o in options if o.startswith("-arch="))
            raise CudaCompileError(f"{name}: NVRTC could not compile it for {arch}:\n{log}") from None
        return whole_elf(nvrtc.getCUBIN(program)), mapping, nvrtc.getProgramLog(program) or ""
    finally:
        nvrtc.destroyProgram(program)


def prepare(device: int = 0) -> None:
    """Load CuPy and NVRTC, find the CUDA headers and load one trivial module on `device` now. The evaluator calls
    this before it starts watching a CUDA candidate for new threads and processes, so whatever these libraries
    start on first use belongs to its baseline rather than to the candidate."""
    import torch

    cupy = _from_cupy("cupy")
    from cupy.cuda import function as cupy_function
    from cupy_backends.cuda.libs import nvrtc

    cuda_include_dir()
    arch = target_arch(torch.cuda.get_device_capability(device))
    with cupy.cuda.Device(device):
        program = nvrtc.createProgram('extern "C" __global__ void avo_noop() {}', "noop.cu", [], [])
        try:
            nvrtc.compileProgram(program, [f"-arch={arch}"])
            module = cupy_function.Module()
            module.load(nvrtc.getCUBIN(program))
            module.get_function("avo_noop")((1,), (1,), ())
        finally:
            nvrtc.destroyProgram(program)
        cupy.cuda.runtime.deviceSynchronize()


@functools.lru_cache(maxsize=1)
def cuda_include_dir() -> str | None:
    """The CUDA toolkit's headers (cuda_fp16.h, cuda/barrier, ...), for NVRTC, which searches no path of its own."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        return find_nvidia_header_directory("cudart")
    except Exception:
        return None


def _current_stream(torch: Any, device: int) -> int:
    """The raw handle of torch's current stream on `device`. torch's own C accessor (inductor's launchers use it) skips
    building a Stream object on every launch."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


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
    """Conversions by exact type, for the launch's hot path (each argument of each call), and numpy's int32."""
    import numpy
    import torch

    return {torch.Tensor: lambda t: numpy.uint64(t.data_ptr()), TensorMap: lambda m: m.arg, int: _int32,
            bool: numpy.bool_, float: numpy.float32}, numpy.int32


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
