"""avo.cuda: how a candidate declares, compiles and launches CUDA C++ (no GPU needed, NVRTC tests skip without it)."""

from __future__ import annotations

import sys
import textwrap

import needs
import numpy
import pytest
import torch

from avo import cuda, cuda_launch
from avo.evaluate.worker.loader import load_entry

KERNEL_PY = """
from avo.cuda import load_module

WIDTH = 3  # avo: tune 1 3
module = load_module("k.cu", defines={{"WIDTH": WIDTH, "FAST": True}}, options={options})


def entry(x):
    module.launch("scale", 1, 32, (x, x.numel(), 2.0))
    return x
"""
GOOD_CU = """
extern "C" __global__ void scale(float* x, int n, float factor) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor * WIDTH;
}
"""


def candidate(tmp_path, cu: str = GOOD_CU, options: str = "()", name: str = "k.cu"):
    (tmp_path / "kernel.py").write_text(KERNEL_PY.format(options=options))
    (tmp_path / name).write_text(textwrap.dedent(cu))
    return tmp_path


def test_target_arch_enables_architecture_specific_features_from_hopper_on():
    assert cuda.target_arch((9, 0)) == "sm_90a"
    assert cuda.target_arch((10, 0)) == "sm_100a"
    assert cuda.target_arch((8, 0)) == "sm_80"


def test_defines_become_compiler_flags_and_bad_ones_are_refused():
    assert cuda.define_flags({"BLOCK_M": 128, "EVEN": True, "SCALE": 0.5}) == ("-DBLOCK_M=128", "-DEVEN=1",
                                                                             "-DSCALE=0.5")
    with pytest.raises(ValueError, match="not a C identifier"):
        cuda.define_flags({"1X": 1})
    with pytest.raises(ValueError, match="one-line"):
        cuda.define_flags({"X": "1\n#include </etc/passwd>"})


def test_import_declares_the_build_without_compiling(tmp_path):
    folder = candidate(tmp_path)
    load_entry(folder, "entry")  # no GPU, no NVRTC: nothing is compiled at import
    (build,) = cuda.declared_builds(folder)
    assert build.source == folder / "k.cu"
    assert build.flags == ("-DWIDTH=3", "-DFAST=1")


def test_launch_refuses_cpu_tensors_before_compiling(tmp_path):
    entry = load_entry(candidate(tmp_path, cu="this does not compile"), "entry")
    with pytest.raises(ValueError, match="CUDA kernels need CUDA tensors"):
        entry(torch.ones(4))


@pytest.mark.parametrize("source,error", [("../k.cu", ValueError), ("missing.cu", cuda.CudaCompileError)])
def test_source_must_be_a_file_in_the_folder(tmp_path, source, error):
    (tmp_path / "c").mkdir()
    folder = candidate(tmp_path / "c")
    (folder / "kernel.py").write_text(f"from avo.cuda import load_module\nm = load_module({source!r})\n")
    with pytest.raises(Exception) as info:
        load_entry(folder, "entry")
    assert error.__name__ in str(info.value)


@pytest.mark.parametrize("options", ['("-arch=sm_80",)', '("-I/usr/include",)', '("-include=/etc/hostname",)'])
def test_target_and_include_options_are_the_helpers(tmp_path, options):
    with pytest.raises(Exception, match="ValueError"):
        load_entry(candidate(tmp_path, options=options), "entry")


@pytest.mark.parametrize("line", ['#include "../outside.h"', "#include </etc/hostname>", "#include HEADER",
                                  '#include "/etc/hostname"'])
def test_includes_leaving_the_folder_are_refused(tmp_path, line):
    folder = candidate(tmp_path, cu=f"{line}\n{GOOD_CU}")
    with pytest.raises(cuda.CudaCompileError, match="k.cu:1: .*an include must name a header in the candidate"):
        cuda.check_includes(folder)


def test_includes_of_local_and_system_headers_are_allowed(tmp_path):
    folder = candidate(tmp_path, cu=f'#include "sub/util.cuh"\n#include <cuda_fp16.h>\n{GOOD_CU}')
    (folder / "sub").mkdir()
    (folder / "sub" / "util.cuh").write_text("#pragma once\n")
    cuda.check_includes(folder)


def test_kernel_arguments_are_converted_to_c_types():
    assert cuda_launch._kernel_arg(7).dtype == numpy.int32
    assert cuda_launch._kernel_arg(0.5).dtype == numpy.float32
    assert cuda_launch._kernel_arg(True).dtype == numpy.bool_
    assert cuda_launch._kernel_arg(numpy.int64(2**40)) == 2**40
    with pytest.raises(ValueError, match="numpy.int64"):
        cuda_launch._kernel_arg(2**40)
    with pytest.raises(TypeError, match="cannot pass a str"):
        cuda_launch._kernel_arg("x")
    with pytest.raises(ValueError, match="positive ints"):
        cuda_launch._dims((0, 1))
    for bad in (0, -1):
        with pytest.raises(ValueError, match="positive ints"):
            cuda_launch._dims(bad)
    assert cuda_launch._dims(132) == (132,) and cuda_launch._dims((2, 3)) == (2, 3)


def test_subclasses_convert_as_their_base_types():
    """Arguments are converted by exact type first (the launch's hot path); a subclass takes the general path."""
    import torch

    class Count(int):
        pass

    weight = torch.nn.Parameter(torch.zeros(4))
    convert = cuda_launch._kernel_arg
    assert convert(weight) == weight.data_ptr() and convert(weight).dtype == numpy.uint64
    assert convert(Count(3)).dtype == numpy.int32 and convert(numpy.bool_(True)).dtype == numpy.bool_
    with pytest.raises(ValueError, match="numpy.int64"):
        cuda_launch._kernel_arg(Count(2**31))


def test_trim_log_drops_the_folder_and_keeps_the_first_lines(tmp_path):
    log = "\n".join(f"{tmp_path}/k.cu({i}): error: bad" for i in range(1000))
    trimmed = cuda.trim_log(log, tmp_path, limit=200)
    assert trimmed.startswith("k.cu(0): error: bad")
    assert str(tmp_path) not in trimmed and trimmed.endswith("more lines)") and len(trimmed) < 260


@needs.nvrtc
def test_nvrtc_compiles_for_hopper_and_caches_by_content(tmp_path):
    folder = candidate(tmp_path)
    module = load_entry(folder, "entry").__globals__["module"]
    cubin = module.compile("sm_90a")
    assert cubin[:4] == b"\x7fELF"
    assert module.compile("sm_90a") is cubin  # cached: same source, headers, options and target
    (folder / "k.cu").write_text(GOOD_CU.replace("factor * WIDTH", "factor + WIDTH"))
    assert module.compile("sm_90a") is not cubin


@needs.nvrtc
def test_nvrtc_cubin_is_a_whole_elf_file_the_disassembler_reads(tmp_path):
    from avo.profile.sass import sass_text

    cubin = load_entry(candidate(tmp_path), "entry").__globals__["module"].compile("sm_90a")
    assert cuda.whole_elf(cubin) is cubin and cuda.whole_elf(cubin[:-1]) == cubin  # the cut byte comes back
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    assert "Function : scale" in sass_text(path)


def test_tensor_maps_pass_by_value_and_refuse_what_tma_cannot_read():
    raw = bytes(range(128))
    arg = cuda_launch._kernel_arg(cuda.TensorMap(raw, "test"))
    assert arg.shape == (1,) and arg.dtype.itemsize == 128 and arg.tobytes() == raw  # one 128-byte value
    with pytest.raises(ValueError, match="128 bytes"):
        cuda.TensorMap(raw[:64], "short")
    with pytest.raises(ValueError, match="needs a CUDA tensor"):
        cuda.tensor_map(torch.zeros(64, 64), box=(64, 64))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,box,error", [
    ((64, 66), (64, 64), "multiples of 16 bytes"),      # rows of 132 bytes
    ((64, 64), (64, 128), "swizzle"),                    # a 256-byte box edge is wider than the swizzle
    ((64, 64), (64,), "dimensions"),
    ((64, 64), (512, 64), "1 to 256"),
])
def test_tensor_map_refuses_layouts_tma_cannot_read_on_gpu(shape, box, error):
    with pytest.raises(ValueError, match=error):
        cuda.tensor_map(torch.zeros(shape, dtype=torch.bfloat16, device="cuda"), box=box)


@pytest.mark.gpu
def test_tensor_map_is_encoded_once_per_layout_and_address():
    x = torch.randn(256, 128, dtype=torch.bfloat16, device="cuda")
    first = cuda.tensor_map(x, box=(64, 64))
    assert first.arg.tobytes() != bytes(128) and cuda.tensor_map(x, box=(64, 64)) is first
    assert cuda.tensor_map(x, box=(128, 64)).arg.tobytes() != first.arg.tobytes()
    assert cuda.tensor_map(x[64:], box=(64, 64)).arg.tobytes() != first.arg.tobytes()  # another base address


@needs.nvrtc
def test_nvrtc_error_is_the_compilers_message(tmp_path):
    folder = candidate(tmp_path, cu=GOOD_CU + "\nint broken = ;\n")
    module = load_entry(folder, "entry").__globals__["module"]
    with pytest.raises(cuda.CudaCompileError) as info:
        module.compile("sm_90a")
    message = info.value.message
    assert message.startswith("k.cu: NVRTC could not compile it for sm_90a:")
    assert "k.cu(7): error: expected an expression" in message
    assert "int broken = ;" in message and str(folder) not in message


@needs.nvrtc
def test_name_expressions_instantiate_template_kernels(tmp_path):
    cu = "template <int N> __global__ void fill(float* x) { x[threadIdx.x] = N; }\n"
    folder = candidate(tmp_path, cu=cu)
    (folder / "kernel.py").write_text(
        "from avo.cuda import load_module\nm = load_module('k.cu', name_expressions=('fill<3>',))\n"
        "def entry():\n    pass\n")
    module = load_entry(folder, "entry").__globals__["m"]
    module.compile("sm_90a")
    assert module._mapping["fill<3>"].startswith("_Z")


def test_the_folder_comes_from_the_loaded_file_not_from_a_reassigned_file_name(tmp_path):
    folder = candidate(tmp_path)
    (folder / "kernel.py").write_text(
        "__file__ = '/etc/hostname'\nfrom avo.cuda import load_module\nm = load_module('hostname')\n")
    with pytest.raises(Exception, match="CudaCompileError: hostname: no such file"):
        load_entry(folder, "entry")


def test_a_module_not_made_by_load_module_is_refused(tmp_path):
    forged = cuda.CudaModule(cuda.Build(tmp_path / "k.cu", tmp_path, ()))
    with pytest.raises(cuda.CudaCompileError, match="not made by load_module"):
        forged.compile("sm_90a")
    (tmp_path / "c").mkdir()
    module = load_entry(candidate(tmp_path / "c"), "entry").__globals__["module"]
    object.__setattr__(module.build, "flags", ("-include=/etc/hostname",))
    with pytest.raises(cuda.CudaCompileError, match="altered"):
        module.compile("sm_90a")


def test_without_cupy_compiling_says_what_to_install(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m.split(".")[0] in ("cupy", "cupy_backends")] + ["cupy", "cupy_backends"]:
        monkeypatch.setitem(sys.modules, name, None)  # what the import system does for a package that is not there
    module = load_entry(candidate(tmp_path), "entry").__globals__["module"]
    with pytest.raises(cuda.CupyUnavailable, match=r"^CuPy is not installed, .*: pip install 'cupy-cuda1[23]x.* "
                                                   r"\(avo's cuda1[23] extra; torch is"):
        module.compile("sm_90a")


def test_the_cupy_api_avo_uses_is_there():
    """On the CPU too, so a CuPy release that moves what avo.cuda calls is caught without a GPU."""
    cupy = needs.module("cupy")
    from cupy.cuda import function
    from cupy_backends.cuda.api import driver
    from cupy_backends.cuda.libs import nvrtc

    for name in ("createProgram", "addNameExpression", "compileProgram", "getLoweredName", "getProgramLog",
                 "getCUBIN", "destroyProgram", "getVersion", "NVRTCError"):
        assert hasattr(nvrtc, name), f"cupy_backends.cuda.libs.nvrtc.{name}"
    assert hasattr(function.Module, "load") and hasattr(function.Module, "get_function")
    assert callable(driver.funcSetAttribute) and isinstance(driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int)
    assert callable(cupy.cuda.Device)
    assert callable(cupy.cuda.runtime.deviceSynchronize)


def test_kept_zeros_on_a_cpu_device_are_torch_zeros():
    """(On a GPU they are CuPy's memory, outside torch's pools: tests/kernels/test_cuda_graphs.py runs the seeds that
    keep them under torch.compile's reduce-overhead.)"""
    kept = cuda.kept_zeros(5, torch.int32, "cpu")
    assert kept.dtype == torch.int32 and kept.device.type == "cpu" and kept.tolist() == [0] * 5
    assert "kept_zeros" in cuda.__all__


def test_asking_whether_a_capture_is_under_way_initializes_nothing():
    """The seeds ask on every call; outside a capture the answer is no, and a process that never initialized CUDA
    (a CPU-only one) still has not."""
    initialized = torch.cuda.is_initialized()
    assert cuda.capturing() is False and torch.cuda.is_initialized() == initialized
