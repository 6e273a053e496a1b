"""CUDA C++ compile-ahead: the builds a candidate declared are compiled by NVRTC in forked children into the
process's cubin cache, so their first launch compiles nothing; a build that fails is left to its first compile,
which reports NVRTC's error as before."""

from __future__ import annotations

import os
import textwrap

import needs
import pytest

from avo import cuda
from avo.evaluate.worker.cuda_ahead import compile_builds_ahead
from avo.evaluate.worker.loader import load_entry

KERNEL_PY = """
from avo.cuda import load_module

modules = [load_module("k.cu", defines={"WIDTH": width}) for width in (1, 2, 3)]


def entry(x):
    return x
"""
K_CU = """
static_assert(WIDTH != 3, "WIDTH 3 does not compile");
extern "C" __global__ void scale(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= WIDTH;
}
"""


@pytest.fixture
def candidate(tmp_path, monkeypatch):
    folder = tmp_path / "cand"
    folder.mkdir()
    (folder / "kernel.py").write_text(KERNEL_PY)
    (folder / "k.cu").write_text(textwrap.dedent(K_CU))
    monkeypatch.chdir(tmp_path)  # the evaluation's own folder, where the children leave their cubins
    return folder


@needs.nvrtc
def test_declared_builds_compile_in_children_and_their_first_compile_is_a_cache_hit(candidate, monkeypatch):
    modules = load_entry(candidate, "entry").__globals__["modules"]
    outcome = compile_builds_ahead(candidate, "sm_90a", workers=3)
    assert (outcome.builds, outcome.compiled) == (3, 2)  # WIDTH 3 fails: left to its first compile

    def no_compile_here(*args, **kwargs):
        raise AssertionError("compiled in the worker: compile-ahead missed this build")

    compile_here = cuda._nvrtc_compile
    monkeypatch.setattr(cuda, "_nvrtc_compile", no_compile_here)
    for module in modules[:2]:
        assert module.compile("sm_90a")[:4] == b"\x7fELF"
    monkeypatch.setattr(cuda, "_nvrtc_compile", compile_here)
    with pytest.raises(cuda.CudaCompileError, match="WIDTH 3 does not compile"):
        modules[2].compile("sm_90a")


@needs.nvrtc
def test_builds_already_in_the_cache_are_not_compiled_again(candidate):
    modules = load_entry(candidate, "entry").__globals__["modules"]
    modules[0].compile("sm_90a")
    outcome = compile_builds_ahead(candidate, "sm_90a", workers=2)
    assert (outcome.builds, outcome.compiled) == (2, 1)


@needs.nvrtc
def test_a_child_past_its_limit_is_killed_and_its_build_left_to_the_first_launch(candidate, monkeypatch):
    from avo.evaluate.worker import cuda_ahead

    load_entry(candidate, "entry")
    read, _ = os.pipe()
    monkeypatch.setattr(cuda_ahead, "_compile_into", lambda *args: os.read(read, 1))  # never returns
    outcome = compile_builds_ahead(candidate, "sm_90a", workers=2, limit_s=0.5)
    assert (outcome.builds, outcome.compiled) == (3, 0)


NOTICE = ("ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
          "insufficient register resources for the wgmma pipeline in the function 'scale' in line 12")


@needs.nvrtc
@pytest.mark.parametrize("ahead", [True, False], ids=["in children", "on first compile"])
def test_ptxas_performance_notices_are_kept_per_build_however_it_compiled(candidate, monkeypatch, ahead):
    """NVRTC's log after a success carries ptxas's notice that it serialized a kernel's wgmma (C7511), which slowed
    an attention candidate to 0.59x with no error or warning. It is kept per build, from the children too."""
    compile_here = cuda._nvrtc_compile

    def with_notice(nvrtc, text, build, options, names):
        cubin, mapping, log = compile_here(nvrtc, text, build, options, names)
        return cubin, mapping, log + ("\n" + NOTICE if "-DWIDTH=2" in build.flags else "")

    monkeypatch.setattr(cuda, "_nvrtc_compile", with_notice)
    modules = load_entry(candidate, "entry").__globals__["modules"]
    if ahead:
        assert compile_builds_ahead(candidate, "sm_90a", workers=2).compiled == 2
    else:
        modules[0].compile("sm_90a")
        modules[1].compile("sm_90a")
    assert cuda.compile_notices(candidate) == [
        "scale: wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma "
        "pipeline (C7511)"]


def test_performance_notices_are_read_from_a_log_once_each():
    log = "\n".join(["ptxas info    : Used 168 registers", NOTICE, NOTICE.replace("'scale'", "'other'"), NOTICE])
    assert [n.split(":")[0] for n in cuda.performance_notices(log)] == ["scale", "other"]
    assert cuda.performance_notices("ptxas info    : Used 40 registers") == ()
