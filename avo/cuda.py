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
in the process by source, headers, options and target. Kernels run on torch's current stream; `module.launcher(...)`
does a launch's work up to the driver call once, for a wrapper to keep by its arguments' layout (cuda_launch.py).
Arguments: a CUDA tensor passes its data pointer, a Python int an `int` (32-bit), a float a `float`, a bool a
`bool`; a numpy scalar passes as it is (numpy.int64 for a `long long`); a `tensor_map(...)` passes a TMA tensor
map by value (declare it `const __grid_constant__` in the kernel; see cuda_tensor_map.py). Compile errors raise
CudaCompileError with NVRTC's log.

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
from avo.cuda_launch import (KeptLaunches, Launch, _arg_bytes, _arg_key, _device_of, _dims, capturing,
                             current_stream)
from avo.cuda_tensor_map import TensorMap, tensor_map

__all__ = ["HEADER_SUFFIXES", "LOG_LIMIT", "Build", "CudaCompileError", "CudaModule", "KeptLaunches", "Launch",
           "TensorMap", "capturing", "check_includes", "current_stream", "declared_builds", "kept_zeros", "load_module",
           "prepare", "target_arch", "tensor_map", "trim_log"]

BASE_OPTIONS = ("-std=c++17", "--generate-line-info")
_DEFAULT_SMEM_LIMIT = 48 * 1024
_KEPT_LAUNCHES = 256
"""Prepared launches a module keeps (launch's cache): enough for the buffers an evaluation rotates through."""
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


def kept_zeros(numel: int, dtype, device):
    """A torch tensor of `numel` zeros for a kernel to keep from call to call (a counter, a split's workspace), in
    memory that torch's caching allocator does not manage: whatever pool the caller's allocations are routed to when
    it is made (torch.compile's reduce-overhead routes its warm-up calls' into a CUDA graph's pool, and a graph's pool
    must hold nothing but what the graph owns), CuPy's pool holds it until the tensor is dropped. A CPU device gets
    torch.zeros."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return torch.zeros(numel, dtype=dtype, device=device)
    cupy = _from_cupy("cupy")
    with cupy.cuda.Device(device.index if device.index is not None else torch.cuda.current_device()):
        array = cupy.zeros(numel, dtype=str(dtype).removeprefix("torch."))
        cupy.cuda.runtime.deviceSynchronize()  # zeroed on CuPy's stream before any of torch's reads it
    return torch.as_tensor(array, device=device)


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
        self._launches = KeptLaunches(_KEPT_LAUNCHES)

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
        """Launch kernel `name` on torch's current stream of the tensors' device. The launch is prepared once per
        kernel, grid, block, shared memory and arguments (tensors by address, tensor maps by identity, numbers by
        type and value) and kept, since a wrapper's calls repeat them."""
        key = (name, grid, block, shared_mem, *map(_arg_key, args))
        self._launches.get(key, lambda: self.launcher(name, grid, block, args, shared_mem=shared_mem))()

    def launcher(self, name: str, grid: int | tuple[int, ...], block: int | tuple[int, ...], args: tuple,
                 *, shared_mem: int = 0) -> Launch:
        """`launch`'s work up to the driver call, done once: a Launch that queues the kernel with these arguments
        each time it is called (on torch's current stream then). Keep one per argument layout (tensor addresses and
        shapes) to take the argument conversion off a wrapper's hot path."""
        device = _device_of(args)
        function = self._function(name, device)  # a missing CuPy is reported here, on the first launch
        pieces = [_arg_bytes(a) for a in args]
        if shared_mem > self._smem_limits.get((device, name), _DEFAULT_SMEM_LIMIT):
            cupy = _from_cupy("cupy")
            from cupy_backends.cuda.api import driver

            with cupy.cuda.Device(device):
                # Above 48 KiB a kernel must opt in to dynamic shared memory, once per function and size.
                driver.funcSetAttribute(function.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        shared_mem)
            self._smem_limits[(device, name)] = shared_mem
        return Launch(function.ptr, device, _dims(grid), _dims(block), shared_mem, pieces, name)

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
