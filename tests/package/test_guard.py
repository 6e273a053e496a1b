"""The guard's "library_faster" section: the timed shapes at which the library beat the kernel, or at which the kernel
saved less GPU time than it added host time, stay the library's (exactly those shapes, in that dtype), unless the
package was built with --keep-slower. On CPU, with the guard opened
to CPU tensors and a stand-in kernel that records its calls."""

from __future__ import annotations

import json

import pytest
import torch
from package_runs import ATTENTION_LLAMA, GEMM_LLAMA, GEMM_TRITON, example_run, package_with_kernel

from avo.cli import main

STAND_IN = '''
import torch

seen = []


def gemm(a, b):
    seen.append((a.shape[0], b.shape[1], a.shape[1]))
    return (a.float() @ b.float()).to(a.dtype)
'''
SLOWER = {"dims": ["M", "N", "K", "dtype"], "shapes": [[8, 24, 40, "bfloat16"]], "speedups": [0.91], "reasons": ["gpu"],
          "host_us": [None], "timed": 2}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


def _calls(pkg, *shapes, dtype=torch.bfloat16):
    with torch.no_grad():
        for m, n, k in shapes:
            a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
            assert torch.allclose(pkg.gemm(a, b).float(), a.float() @ b.float(), atol=0.1, rtol=0.02)
    return pkg._loader.entry("gemm").__globals__["seen"]


def test_a_shape_the_library_was_faster_at_goes_to_the_library(runs, tmp_path):
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "slower_left", STAND_IN, device="cpu", device_names=[],
                              library_faster={**SLOWER, "enforced": True})
    seen = _calls(pkg, (8, 24, 40), (9, 24, 40), (8, 24, 48))
    assert seen == [(9, 24, 40), (8, 24, 48)]  # the neighbours of the slower shape are still the kernel's
    assert pkg.fallbacks == {"measured slower than the library at this shape (0.910x)": 1}
    _calls(pkg, (8, 24, 40), dtype=torch.float16)  # timed in bf16 only: in fp16 it is the kernel's
    assert seen[-1] == (8, 24, 40) and pkg.calls["kernel"] == 3


def test_keep_slower_sends_those_shapes_to_the_kernel(runs, tmp_path):
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "slower_kept", STAND_IN, device="cpu", device_names=[],
                              library_faster={**SLOWER, "enforced": False})
    assert _calls(pkg, (8, 24, 40)) == [(8, 24, 40)] and not pkg.fallbacks


def test_the_manifest_lists_each_timed_shape_the_library_won(runs, tmp_path, capsys):
    run_id = example_run(runs, ATTENTION_LLAMA)
    s1024, s4096 = [1, 32, 8, 1024, 64, True, "bfloat16"], [1, 32, 8, 4096, 64, True, "bfloat16"]
    for flag, out in (((), "left"), (("--keep-slower",), "kept"), (("--ignore-host-time",), "gpu")):
        assert main(["package", run_id, "--out", str(tmp_path / out), "--name", f"llama_{out}",
                     "--runs-dir", str(runs), *flag]) == 0
        guard = json.loads((tmp_path / out / f"llama_{out}" / "MANIFEST.json").read_text())["guard"]
        faster = guard["library_faster"]
        # The run's best timed three causal D 64 shapes at batch 1: 0.980x at S 1024, 1.022x at 4096, 1.138x at 16384.
        # At 4096 it saved 4.0 µs of GPU time per call and added 14.1 µs of host time (the run's own figures).
        assert faster["dims"] == ["B", "Hq", "Hkv", "S", "D", "causal", "dtype"] and faster["timed"] == 3
        assert faster["timed_shapes"] == [s1024, s4096, [1, 32, 8, 16384, 64, True, "bfloat16"]]  # the rest: timed
        # by their first call (test_first_call.py)
        if out == "gpu":
            assert faster["shapes"] == [s1024] and faster["reasons"] == ["gpu"] and faster["host_us"] == [None]
            assert [round(s, 3) for s in faster["speedups"]] == [0.980]
        else:
            assert faster["shapes"] == [s1024, s4096] and faster["reasons"] == ["gpu", "host"]
            assert [round(s, 3) for s in faster["speedups"]] == [0.980, 1.022]
            assert faster["host_us"] == [None, [4.0, 14.1]]
        assert faster["enforced"] is (out != "kept")
    printed = capsys.readouterr().out
    assert "left to the library: 2 of 3" in printed and "kept on the kernel (--keep-slower): 2 of 3" in printed
    assert "left to the library: 1 of 3" in printed  # --ignore-host-time
    assert "1.022x (saves 4 µs of GPU time, adds 14 µs of host time)" in printed
    # The shapes between the timed ones: checked and timed by their first call, except with --keep-slower.
    assert printed.count("other shapes inside the guard's ranges: checked and timed by their first call") == 2
    assert printed.count("on a GPU other than NVIDIA H200 of compute capability 9.0: every covered shape judged so; "
                         "on any other GPU every call goes to the library") == 2


def test_a_run_without_the_library_host_times_is_judged_by_gpu_time_alone(runs, tmp_path):
    run_id = example_run(runs, GEMM_LLAMA)  # timed before the library's host time per call was recorded
    assert main(["package", run_id, "--out", str(tmp_path / "g"), "--name", "llama_g", "--runs-dir", str(runs)]) == 0
    faster = json.loads((tmp_path / "g" / "llama_g" / "MANIFEST.json").read_text())["guard"]["library_faster"]
    assert faster["shapes"] and set(faster["reasons"]) == {"gpu"} and all(s < 1 for s in faster["speedups"])


def test_a_shape_whose_gpu_saving_is_under_its_added_host_time_goes_to_the_library(runs, tmp_path):
    host = {"dims": ["M", "N", "K", "dtype"], "shapes": [[8, 24, 40, "bfloat16"]], "speedups": [1.02],
            "reasons": ["host"], "host_us": [[4.0, 14.0]], "timed": 2}
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "host_left", STAND_IN, device="cpu", device_names=[],
                              library_faster={**host, "enforced": True})
    assert _calls(pkg, (8, 24, 40), (9, 24, 40)) == [(9, 24, 40)]
    assert pkg.fallbacks == {"saves less GPU time than it adds host time at this shape (4 µs against 14; 1.020x on "
                             "the GPU)": 1}


def test_each_input_the_run_did_not_cover_is_refused_with_its_reason(runs, tmp_path):
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "reasons", STAND_IN, device="cpu", device_names=[],
                              library_faster={**SLOWER, "enforced": True})
    guard, (low, high) = pkg._guard, pkg.MANIFEST["guard"]["ranges"]["K"]
    a, b = torch.randn(8, 40, dtype=torch.bfloat16), torch.randn(40, 24, dtype=torch.bfloat16)
    dims = {"M": 8, "N": 24, "K": 40}
    assert guard.refusal((a, b), {**dims, "M": 9}) is None
    assert guard.refusal((a, b.float()), dims) == "dtype float32"
    assert guard.refusal((a.float(), b.float()), dims) == "dtype float32"  # alike, but not a dtype the run timed
    assert guard.refusal((a, b.t().contiguous().t()), dims) == "layout (not contiguous)"
    assert guard.refusal((a, b), {**dims, "K": high + 1}) == f"K={high + 1} outside {low}..{high}"
    assert guard.refusal((a, b), dims) == "measured slower than the library at this shape (0.910x)"
    if torch.cuda.is_available():
        assert guard.refusal((a, b.cuda()), dims) == "device cpu"
