"""gemm/cuda_wgmma's EPILOGUE_SPLIT: the 256-, 192- and 128-wide tiles' C stored in rounds of a few 64 x 64 boxes per
consumer, so that the staging buffer leaves room for another stage (4 of the 256-wide tile where 3 fit beside the
whole C tile), and only there. On the CPU each build takes the stages and rounds asked for and compiles for Hopper
without spills; on a GPU every kind of work on them is correct and bitwise repeatable."""

from __future__ import annotations

import shutil
from pathlib import Path

import needs
import pytest
import torch
from test_gemm_splitk import arrivals_reset, check_compiles_without_spills, check_repeatable, work

from avo.agent.heuristic.knobs import render
from avo.evaluate.worker.loader import load_entry

SEED = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
DEEPER = {"EPILOGUE_SPLIT": 2, "STAGES": 4, "STAGES_192": 5}
# (M, N, K): what the wrapper plans for them with DEEPER (every kind of work on the 256- and 128-wide tiles)
SHAPES = {
    (4096, 4096, 4096): (256, "whole"),
    (1000, 4000, 1000): (256, "whole"),  # ragged M, N and K: the last tile's boxes past N are not stored
    (1024, 14336, 4096): (256, "tail"),
    (256, 4096, 16384): (128, "split"),
    (8192, 8192, 8192): (256, "stream"),
}


def seed_with(tmp_path: Path, knobs: dict, name: str = "rounds"):
    folder = tmp_path / name
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "kernel.py").write_text(render((folder / "kernel.py").read_text(), knobs))
    return folder, load_entry(folder, "gemm")


def test_rounds_leave_room_for_a_fourth_stage_of_the_256_wide_tile(tmp_path):
    shipped = load_entry(SEED, "gemm").__globals__
    assert shipped["EPILOGUE_SPLIT"] == 1
    for width in (256, 192, 128):  # staged whole, as every figure was measured
        assert "C_STAGED" not in shipped["_LARGE"][width].defines
    assert shipped["_LARGE"][256].defines["STAGES"] == 3  # asked for 4, it keeps the 3 that fit beside its C tile
    assert shipped["_Build"](128, 256, 4, 2, 1).defines["STAGES"] == 3

    _, gemm = seed_with(tmp_path, DEEPER)
    g = gemm.__globals__
    # the 128-wide tile's 6 stages fit beside its whole C tile: rounds would buy it nothing
    expected = {256: (4, 2), 192: (5, 1), 128: (6, None), 320: (g["STAGES_320"], g["STAGED_320"])}
    for width, (stages, boxes) in expected.items():
        build = g["_LARGE"][width]
        assert (build.defines["STAGES"], build.defines.get("C_STAGED")) == (stages, boxes), width
        assert build.smem <= g["SMEM_BYTES"], width
    _, quarter = seed_with(tmp_path, dict(DEEPER, EPILOGUE_SPLIT=4), "quarter")
    assert quarter.__globals__["_LARGE"][256].defines["C_STAGED"] == 1


def test_the_wrapper_plans_each_kind_of_work_on_the_deeper_builds(tmp_path):
    g = seed_with(tmp_path, DEEPER)[1].__globals__
    for (m, n, k), (width, kind) in SHAPES.items():
        plan = g["plan"](m, n, k, 132)
        assert (plan.build.block_n, work(plan)) == (width, kind), (m, n, k)


@needs.nvcc
def test_the_deeper_builds_compile_for_hopper_without_spills(tmp_path):
    from avo.cuda import declared_builds

    folder, _ = seed_with(tmp_path, DEEPER)
    builds = [b for b in declared_builds(folder) if any(f.startswith("-DC_STAGED=") for f in b.flags)]
    resources = check_compiles_without_spills(folder, builds)
    staged = [facts for facts in resources.values() if any(d.startswith("C_STAGED") for d in facts["defines"])]
    assert len(staged) >= 6  # bf16 and fp16 of the 320-, 256- and 192-wide builds


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_c_in_rounds_is_correct_and_bitwise_repeatable(shape, dtype, tmp_path):
    needs.module("cupy")
    _, gemm = seed_with(tmp_path, DEEPER)
    check_repeatable(gemm, shape, dtype, shape)
    assert arrivals_reset(gemm), f"{shape}: arrival counters left set"
