"""`avo evolve --gpu b200` refuses, before any run exists, what cannot run there: a seed issuing Hopper-only PTX
(wgmma, setmaxnreg), and a b200 named on a machine whose GPU is another."""

from __future__ import annotations

from pathlib import Path

import pytest

import avo.gpus as gpus
from avo.cli import main
from avo.errors import UserError
from avo.gpus import PROFILES
from avo.run.directory import list_runs
from avo.seed_target import check_seed_for_gpu, hopper_only_instructions

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def evolve(tmp_path: Path, capsys, *args: str) -> tuple[int, str]:
    code = main(["evolve", "--hours", "1", "--max-candidates", "5", "--runs-dir", str(tmp_path / "runs"), "--quiet",
                 "--agent", "heuristic", *args])
    return code, capsys.readouterr().err


def test_the_wgmma_seed_on_a_b200_is_refused_with_the_seeds_to_use(tmp_path, capsys):
    code, err = evolve(tmp_path, capsys, "--kernel", "gemm", "--gpu", "b200", "--device", "interpret",
                       "--seed-kernel", "cuda_wgmma")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"the seed {KERNELS / 'gemm' / 'cuda_wgmma'} issues wgmma (hopper.cuh) and setmaxnreg (hopper.cuh)" in err
    assert "Hopper (sm_90a) instructions that the b200 (sm_100a) does not have" in err
    assert ("use a Triton seed (--seed-kernel triton_naive, triton_tiled or triton_tma_persistent), or run it on "
            "an h100 or h200") in err
    assert not list_runs(tmp_path / "runs")  # refused before any run, so before any evaluation


def test_avo_bench_refuses_the_wgmma_seed_on_a_b200(capsys):
    code = main(["bench", str(KERNELS / "gemm" / "cuda_wgmma"), "--kernel", "gemm", "--gpu", "b200", "--device",
                 "interpret"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "the candidate" in err and "issues wgmma (hopper.cuh)" in err
    assert "use a Triton seed (triton_naive, triton_tiled or triton_tma_persistent)" in err


def test_b200_named_on_a_machine_with_an_h200_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(gpus, "nvml_device_name", lambda index=0: "NVIDIA H200")
    code, err = evolve(tmp_path, capsys, "--kernel", "attention", "--gpu", "b200", "--device", "cuda")
    assert code == 2 and err.count("\n") == 1
    assert "--gpu b200 was asked for but this machine has 'NVIDIA H200': use --gpu auto or --gpu h200" in err
    assert not list_runs(tmp_path / "runs")  # refused before any run, so before any evaluation


def test_b200_named_on_a_machine_without_a_gpu_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(gpus, "nvml_device_name", lambda index=0: None)
    code, err = evolve(tmp_path, capsys, "--kernel", "attention", "--gpu", "b200", "--device", "cuda")
    assert code == 2 and "no NVIDIA GPU found" in err and "--device interpret" in err
    assert not list_runs(tmp_path / "runs")


HOPPER_ONLY = {"cuda_wgmma", "cuda_fa3"}
"""The seeds built on wgmma and setmaxnreg."""


def test_the_wgmma_seeds_are_accepted_on_hopper_and_the_other_seeds_on_b200():
    seeds = sorted(KERNELS.glob("*/*"))
    assert HOPPER_ONLY <= {s.name for s in seeds}, "a wgmma seed was renamed: the Hopper branch would check nothing"
    for seed in seeds:
        if seed.name in HOPPER_ONLY:
            check_seed_for_gpu(seed, PROFILES["h200"])
            with pytest.raises(UserError, match="sm_100a"):
                check_seed_for_gpu(seed, PROFILES["b200"])
        else:
            check_seed_for_gpu(seed, PROFILES["b200"])  # mma.sync, cp.async and TMA run on sm_100a too


def test_only_issued_instructions_count_not_their_names_in_comments(tmp_path):
    (tmp_path / "kernel.py").write_text("")
    (tmp_path / "k.cu").write_text("// unlike wgmma, mma.sync runs everywhere\n__global__ void k() {}\n")
    assert hopper_only_instructions(tmp_path) == {}
    (tmp_path / "k.cuh").write_text('asm volatile("wgmma.fence.sync.aligned;");\n')
    assert hopper_only_instructions(tmp_path) == {"wgmma": "k.cuh"}


def test_the_default_seed_is_the_hopper_cuda_seed_where_it_can_run(monkeypatch):
    """No --seed-kernel: on an H200 with CuPy and cuda-bindings the CUDA seeds that beat the library there; under
    the interpreter, on a B200, or without CuPy, the portable Triton seeds."""
    import importlib.util

    from avo.seed_target import machine_default_seed
    from avo.tasks import load

    for name, hopper, triton in (("attention", "cuda_fa3", "triton_fa2"), ("gemm", "cuda_wgmma", "triton_tiled")):
        task = load(name)
        assert machine_default_seed(task, PROFILES["h200"], "interpret").name == triton
        assert machine_default_seed(task, PROFILES["b200"], "cuda").name == triton
        with monkeypatch.context() as m:
            m.setattr(importlib.util, "find_spec", lambda module: object())
            assert machine_default_seed(task, PROFILES["h200"], "cuda").name == hopper
            m.setattr(importlib.util, "find_spec", lambda module: None if module == "cupy" else object())
            assert machine_default_seed(task, PROFILES["h200"], "cuda").name == triton


@pytest.mark.parametrize("kernel,words", [("conv", "unknown kernel 'conv'"), ("missing.py", "task file not found")])
def test_a_bad_kernel_is_named_before_a_missing_gpu(tmp_path, capsys, monkeypatch, kernel, words):
    monkeypatch.setattr(gpus, "nvml_device_name", lambda index=0: None)
    code, err = evolve(tmp_path, capsys, "--kernel", str(tmp_path / kernel) if kernel.endswith(".py") else kernel,
                       "--device", "cuda")
    assert code == 2 and err.count("\n") == 1 and words in err, err
    assert not list_runs(tmp_path / "runs")
