"""Compile inspection on the CPU for sm_90a: Triton kernels through their own wrapper, CUDA sources through nvcc."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import needs
import pytest

from avo.evaluate.cuda_compile import parse_ptxas_verbose
from avo.gpus import PROFILES
from avo.profile import ProfileError, sass
from avo.profile.compiler import inspect_candidate, nvcc_inspect

HERE = Path(__file__).parent
TINY = HERE / "tiny_gemm"
GEMM_SEED = HERE.parents[1] / "kernels" / "gemm" / "triton_tiled"
H200 = PROFILES["h200"]


def _load_tiny():
    spec = importlib.util.spec_from_file_location("avo_test_tiny_gemm", TINY / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_report():
    """The tiny GEMM captured in this process for sm_90a (one compile shared by the tests below)."""
    import torch

    from avo.profile.triton_capture import analyze, capture

    tiny = _load_tiny()
    a = torch.empty((300, 200), dtype=torch.bfloat16, device="meta")
    b = torch.empty((200, 130), dtype=torch.bfloat16, device="meta")
    launches, error = capture(lambda: tiny.gemm(a, b), H200)
    assert error is None and len(launches) == 1
    return analyze(launches[0], H200)


def test_tiny_gemm_compiles_with_the_wrappers_constexprs_and_options(tiny_report):
    r = tiny_report
    assert r["name"] == "_tiny_gemm_kernel" and r["target"] == "sm_90a"
    assert r["constexprs"] == {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    assert (r["num_warps"], r["num_stages"]) == (4, 2)
    assert r["grid"] == (5, 3, 1)  # cdiv(300, 64), cdiv(130, 64)


def test_tiny_gemm_uses_wgmma_and_does_not_spill(tiny_report):
    r = tiny_report
    assert r["families"]["tensor core (wgmma)"] > 0 and r["histogram"]["HGMMA"] > 0
    assert r["ptx_histogram"]["wgmma.mma_async"] > 0
    assert r["spills"] == {"store_bytes": 0, "load_bytes": 0}
    assert r["families"]["local (spills)"] == 0
    assert 0 < r["registers"] <= 255
    assert r["shared_bytes"] > 0 and r["occupancy"]["blocks_per_sm"] >= 1


def test_autotuned_kernels_compile_their_first_config():
    import torch
    import triton
    import triton.language as tl

    from avo.profile.triton_capture import capture

    @triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=2), triton.Config({"BLOCK": 256}, num_warps=4)],
                     key=["n"])
    @triton.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    x = torch.empty(1000, dtype=torch.float32, device="meta")
    launches, error = capture(lambda: scale[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, 1000), H200)
    assert error is None and len(launches) == 1
    launch = launches[0]
    assert launch.constexprs == {"BLOCK": 128} and launch.kernel.metadata.num_warps == 2
    assert launch.grid == (8, 1, 1)
    assert "autotuned over 2 configs" in launch.notes[0]


def test_a_wrapper_that_raises_before_launching_is_reported():
    from avo.profile.triton_capture import capture

    launches, error = capture(lambda: 1 / 0, H200)
    assert launches == [] and error.startswith("ZeroDivisionError")


def test_gemm_seed_shows_tensor_core_mma_and_zero_spills_through_the_agent_tool():
    from avo.agent.tools.base import ToolContext
    from avo.agent.tools.profile import InspectArgs, inspect_compile

    ctx = ToolContext(workspace=GEMM_SEED, task_spec="gemm", device="interpret", gpu=H200)
    text, data = inspect_compile(ctx, InspectArgs())
    assert data["target"] == "sm_90a" and data["case"] == "4096x4096x4096"
    assert data["spills"] == {"store_bytes": 0, "load_bytes": 0}
    assert data["histogram"]["HGMMA"] > 0 and data["histogram"].get("LDL", 0) == 0
    assert 0 < data["registers"] <= 255 and data["shared_bytes"] > 0
    kernel = data["kernels"][0]
    assert kernel["ptx_histogram"]["wgmma.mma_async"] > 0
    assert kernel["constexprs"]["EVEN_K"] is True
    assert "wgmma.mma_async" in text and "spills 0 B stored / 0 B loaded" in text


def test_the_tma_persistent_seed_compiles_to_wgmma_and_tma_for_hopper_without_a_gpu():
    from avo.agent.tools.base import ToolContext
    from avo.agent.tools.profile import InspectArgs, inspect_compile

    seed = HERE.parents[1] / "kernels" / "gemm" / "triton_tma_persistent"
    ctx = ToolContext(workspace=seed, task_spec="gemm", device="interpret", gpu=H200)
    _, data = inspect_compile(ctx, InspectArgs())
    [kernel] = [k for k in data["kernels"] if k["name"] == "_gemm_tma_persistent"]
    assert data["spills"] == {"store_bytes": 0, "load_bytes": 0}
    assert data["histogram"]["HGMMA"] > 0 and data["histogram"]["UTMALDG"] > 0 and data["histogram"]["UTMASTG"] > 0
    assert kernel["ptx_histogram"]["cp.async.bulk.tensor"] > 0


def test_inspect_needs_a_kernel_py(tmp_path):
    with pytest.raises(ProfileError, match="no kernel.py"):
        inspect_candidate(tmp_path, "gemm", gpu=H200)


def test_inspect_reports_a_candidate_that_does_not_import(tmp_path):
    (tmp_path / "kernel.py").write_text("import triton\nraise RuntimeError('tile sizes must be powers of two')\n")
    with pytest.raises(ProfileError, match="tile sizes must be powers of two"):
        inspect_candidate(tmp_path, "gemm", gpu=H200)


@needs.nvcc
def test_nvcc_reports_registers_shared_memory_and_sass_of_a_cuda_source():
    [kernel] = nvcc_inspect(HERE / "fixtures", H200)
    assert kernel["name"] == "reverse_blocks" and kernel["target"] == "sm_90a"
    assert kernel["shared_bytes"] == 4096
    assert kernel["spills"] == {"store_bytes": 0, "load_bytes": 0}
    assert 0 < kernel["registers"] < 64
    assert kernel["histogram"]["LDS"] >= 1 and kernel["histogram"]["STS"] >= 1 and kernel["histogram"]["BAR"] >= 1


@needs.nvcc
def test_nvcc_compile_error_is_one_line(tmp_path):
    (tmp_path / "broken.cu").write_text("__global__ void k(float* x) { x[0] = undefined_name; }\n")
    with pytest.raises(ProfileError, match=r"nvcc could not compile broken.cu: .*undefined_name"):
        nvcc_inspect(tmp_path, H200)


def test_ptxas_verbose_parser_reads_spills_per_function():
    text = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'heavy' for 'sm_90a'
ptxas info    : Function properties for heavy
    64 bytes stack frame, 48 bytes spill stores, 40 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'light' for 'sm_90a'
ptxas info    : Function properties for light
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compiling entry function 'attention_bf16_d64' for 'sm_90a'
ptxas info    : Function properties for attention_bf16_d64
ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient \
register resources for the wgmma pipeline in the function 'attention_bf16_d64'
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers, 368 bytes cmem[0]
"""
    found = parse_ptxas_verbose(text)
    assert found["heavy"] == {"registers": 255, "spill_store_bytes": 48, "spill_load_bytes": 40, "stack_bytes": 64,
                              "static_shared_bytes": 8192, "wgmma_serialized": None}
    assert found["light"]["registers"] == 16 and found["light"]["static_shared_bytes"] == 0
    assert found["light"]["wgmma_serialized"] is None
    assert found["attention_bf16_d64"]["registers"] == 168
    assert found["attention_bf16_d64"]["wgmma_serialized"] == ("wgmma.mma_async instructions are serialized due to "
                                                               "insufficient register resources for the wgmma pipeline")


def test_sass_histogram_counts_base_opcodes_and_ignores_predicates():
    listing = """
        /*0090*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;
        /*00a0*/              @!P0 LDL.64 R2, [R1+0x8] ;
        /*00b0*/               @P1 STL [R1+0x10], R4 ;
        /*00c0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00d0*/                   NOP ;
        /*00e0*/              @!PT UTMALDG.2D [UR8], [UR4] ;
    """
    hist = sass.sass_histogram(listing)
    assert hist == {"HGMMA": 1, "LDL": 1, "STL": 1, "BAR": 1, "UTMALDG": 1}
    fam = sass.families(hist)
    assert fam["tensor core (wgmma)"] == 1 and fam["local (spills)"] == 2 and fam["TMA"] == 1


WIDTHS_CU = """
#ifndef WIDTH
#error "kernel.py names WIDTH"
#endif
extern "C" __global__ void widths(float* x) {
    float acc[WIDTH];
    for (int i = 0; i < WIDTH; ++i) acc[i] = x[threadIdx.x * WIDTH + i] * 2.0f;
    for (int i = 0; i < WIDTH; ++i) x[threadIdx.x * WIDTH + i] = acc[i];
}
"""
WIDTHS_PY = """
from avo.cuda import load_module

NARROW = load_module("widths.cu", defines={"WIDTH": 2})
WIDE = load_module("widths.cu", defines={"WIDTH": 16})


def gemm(a, b):
    return a @ b
"""


@needs.nvcc
def test_a_cuda_candidate_is_inspected_as_each_build_its_kernel_py_declares(tmp_path):
    """A source built under several defines (a per-shape table) is compiled as each build kernel.py declares, read
    by importing kernel.py in a confined child (this process never imports it); none compiles without its defines."""
    (tmp_path / "widths.cu").write_text(WIDTHS_CU)
    (tmp_path / "kernel.py").write_text(WIDTHS_PY)
    report = inspect_candidate(tmp_path, "gemm", gpu=H200)
    kernels = report.data["kernels"]
    assert [(k["name"], k["defines"]) for k in kernels] == [("widths", ["WIDTH=2"]), ("widths #2", ["WIDTH=16"])]
    assert "widths (widths.cu with WIDTH=2)" in report.text and "widths #2 (widths.cu with WIDTH=16)" in report.text
    assert not report.data["problems"]
    from avo.cuda import declared_builds

    assert declared_builds(tmp_path) == [], "kernel.py was imported in this process"


@needs.nvcc
def test_a_kernel_py_that_does_not_import_leaves_the_sources_compiled_with_no_defines_and_says_so(tmp_path):
    (tmp_path / "widths.cu").write_text(WIDTHS_CU.replace('#error "kernel.py names WIDTH"', "#define WIDTH 4"))
    (tmp_path / "kernel.py").write_text(WIDTHS_PY + "\nraise RuntimeError('broken on import')\n")
    report = inspect_candidate(tmp_path, "gemm", gpu=H200)
    assert [(k["name"], k["defines"]) for k in report.data["kernels"]] == [("widths", [])]
    [problem] = report.data["problems"]
    assert problem.startswith("kernel.py could not be imported to read its CUDA builds")
    assert "broken on import" in problem
