"""The CPU compile check of CUDA candidates: nvcc's errors verbatim, per-kernel resources, kernel.py's defines."""

from __future__ import annotations

import textwrap

import needs
import pytest

from avo.evaluate.cuda_compile import CompilerUnavailable, compile_check
from avo.evaluate.worker.loader import load_entry

RESOURCES_CU = """
extern "C" __global__ void with_shared(float* out) {
    __shared__ float tile[256];
    tile[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = tile[255 - threadIdx.x];
}

extern "C" __global__ void with_stack(float* out, int i) {
    float local[64] = {};  // written and read at runtime indices: lives in local memory (a stack frame)
    for (int j = 0; j < 64; ++j) local[(j * i) & 63] += out[j];
    out[0] = local[i & 63];
}
"""


def write(folder, name, text):
    (folder / name).write_text(textwrap.dedent(text))
    return folder


@needs.nvcc
def test_syntax_error_gives_the_compilers_message(tmp_path):
    write(tmp_path, "bad.cu", 'extern "C" __global__ void k(float* x) {\n    x[0] = 1.0f\n}\n')
    check = compile_check(tmp_path, "sm_90a")
    assert not check.ok and check.resources == {}
    assert check.log.startswith("bad.cu: nvcc could not compile it for sm_90a:")
    assert "bad.cu(3): error: expected a \";\"" in check.log
    assert str(tmp_path) not in check.log and "ptxas info" not in check.log


@needs.nvcc
def test_resources_per_kernel(tmp_path):
    check = compile_check(write(tmp_path, "r.cu", RESOURCES_CU), "sm_90a")
    assert check.ok, check.log
    shared, stack = check.resources["with_shared"], check.resources["with_stack"]
    assert shared["source"] == "r.cu" and shared["static_shared_bytes"] == 1024 and shared["registers"] > 0
    assert shared["spill_store_bytes"] == shared["spill_load_bytes"] == 0
    assert stack["stack_bytes"] >= 256 and stack["static_shared_bytes"] == 0


@needs.nvcc
def test_defines_declared_by_kernel_py_are_used(tmp_path):
    write(tmp_path, "k.cu", """
        #ifndef WIDTH
        #define WIDTH 1
        #endif
        static_assert(WIDTH == 3, "WIDTH must be 3");
        extern "C" __global__ void k(float* x) { x[0] = WIDTH; }
        """)
    check = compile_check(tmp_path, "sm_90a")  # kernel.py not imported: the source's own default
    assert not check.ok and "WIDTH must be 3" in check.log
    write(tmp_path, "kernel.py", """
        from avo.cuda import load_module
        module = load_module("k.cu", defines={"WIDTH": 3}, options=("--generate-line-info",))
        def entry():
            pass
        """)
    load_entry(tmp_path, "entry")
    check = compile_check(tmp_path, "sm_90a")
    assert check.ok, check.log
    assert list(check.resources) == ["k"]


@needs.nvcc
def test_includes_outside_the_folder_are_refused(tmp_path):
    write(tmp_path, "k.cu", '#include "../secret.h"\n__global__ void k() {}\n')
    check = compile_check(tmp_path, "sm_90a")
    assert not check.ok and "k.cu:1:" in check.log and "candidate's folder" in check.log


def test_folder_without_sources_has_nothing_to_check(tmp_path):
    assert compile_check(write(tmp_path, "kernel.py", "x = 1\n"), "sm_90a") == (True, "", {})


def test_missing_nvcc_is_the_machines_problem(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    with pytest.raises(CompilerUnavailable, match="nvcc was not found"):
        compile_check(write(tmp_path, "k.cu", "__global__ void k() {}\n"), "sm_90a")


@needs.nvcc
def test_outcome_without_a_gpu(tmp_path):
    from avo.evaluate.cuda_compile import has_cuda_sources, no_gpu_outcome

    assert not has_cuda_sources(tmp_path)
    write(tmp_path, "r.cu", RESOURCES_CU)
    assert has_cuda_sources(tmp_path)
    status, rule, message = no_gpu_outcome(tmp_path, "sm_90a")
    assert (status, rule) == ("not_run", "device.no_gpu")
    assert message.startswith("compiled for sm_90a with nvcc (") and "with_shared: " in message
    assert "1024 B static shared memory" in message and "none was checked or timed" in message
    write(tmp_path, "r.cu", RESOURCES_CU + "\nint x = ;\n")
    status, rule, message = no_gpu_outcome(tmp_path, "sm_90a")
    assert (status, rule) == ("compile_error", "compile") and "expected an expression" in message


@needs.nvcc
def test_the_evaluator_compiles_cuda_candidates_without_a_gpu_and_says_it_ran_nothing(tmp_path):
    import shutil
    from pathlib import Path

    from avo.evaluate.harness import Evaluator
    from avo.gpus import PROFILES

    evaluator = Evaluator("gemm", device="interpret", gpu=PROFILES["h200"])
    seed = Path(__file__).resolve().parents[1] / "kernels" / "gemm" / "cuda_mma"
    good = evaluator.evaluate(seed)
    assert (good.status, good.rule) == ("not_run", "device.no_gpu")
    assert "compiled for sm_90a" in good.message and good.fitness == 0.0

    broken = tmp_path / "broken"
    shutil.copytree(seed, broken)
    source = next(broken.glob("*.cu"))
    source.write_text(source.read_text() + "\nint broken( {\n")
    bad = evaluator.evaluate(broken)
    assert (bad.status, bad.rule) == ("compile_error", "compile")
    assert "error" in bad.message and "gemm.cu" in bad.message
