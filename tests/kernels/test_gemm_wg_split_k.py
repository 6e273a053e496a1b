"""gemm/cuda_wgmma's few-token tiles with two consumer warpgroups sharing the rows and taking alternate K-steps
(WG_SPLIT_K: the second hands its sum to the first through shared memory): where the knob asks for it both 64-row
builds take it, with a staging buffer for one storing consumer and room for the handed sum; they compile for Hopper
without spills or serialized wgmma, alone and with two accumulator sets; on a GPU each kind of work (whole tiles with
an even, odd, two or one K-step, so that the second consumer has one step or none; split-K parts and stream-K pieces
starting at either parity; B as nn.Linear's weight.t()) is correct and bitwise repeatable."""

from __future__ import annotations

import shutil

import needs
import pytest
import torch
from test_gemm_splitk import (H200_SMS, SEED, arrivals_reset, check_compiles_without_spills, check_nvrtc_compiles,
                              check_reads_weight_in_place, check_repeatable, work)

from avo.agent.heuristic.knobs import render
from avo.evaluate.worker.loader import load_entry

# STREAM on, STREAM_FROM 3 and NARROW_WAVES 0, so that 64 x 57344 x 8192 (3.4 waves) runs stream-K pieces of
# 64 x 128 tiles (by default 64 x 64 tiles, whole).
STREAMED = {"STREAM@few": True, "STREAM_FROM@few": 3, "NARROW_WAVES@few": 0}
VARIANTS = {"split": {"WG_SPLIT_K@few": True, **STREAMED},
            # (with the 64-row ring of 64 x 128 as deep as the others: one build of each tile; "split" compiles all)
            "split+sets": {"WG_SPLIT_K@few": True, "ACC_SETS@few": 2, "STAGES_M64@few": 7,
                           "NARROW_FULL_STAGES_M64@few": 12, **STREAMED},
            "off": {"WG_SPLIT_K@few": False}}


def split_k(tmp_path, variant: str = "split", **more):
    """The seed with the few-token tiles' consumers splitting K (and `more` knobs)."""
    folder = tmp_path / variant.replace("+", "_")
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "kernel.py").write_text(render((folder / "kernel.py").read_text(), {**VARIANTS[variant], **more}))
    return folder, load_entry(folder, "gemm")


def test_both_few_token_builds_take_two_consumers_and_one_stores(tmp_path):
    g = split_k(tmp_path)[1].__globals__
    for build in (g["_FEW"], g["_NARROW"], g["_FEW_M64"], g["_NARROW_M64"], g["_NARROW_FULL_M64"]):
        assert build.defines["WG_SPLIT_K"] == 1 and build.defines["CONSUMERS"] == 2
        assert (build.consumers, build.storers, build.threads) == (2, 1, 384)
        # the stages, one staging buffer of C (bf16) and the second consumer's fp32 sum, 2 KB for alignment and
        # barriers: the same arithmetic as gemm.cu's STAGES * STAGE_BYTES + STORERS * C_BYTES + RED_BYTES + 2048
        tile = build.block_m * build.block_n
        stage = (build.block_m + build.block_n) * 64 * 2
        assert build.smem == build.defines["STAGES"] * stage + tile * 2 + tile * 4 + 2048
        assert build.smem <= g["SMEM_BYTES"]
    assert all("WG_SPLIT_K" not in b.defines for b in g["_LARGE"].values())
    off = split_k(tmp_path, "off")[1].__globals__["_FEW"]
    assert "WG_SPLIT_K" not in off.defines and off.consumers == 1 and off.storers == 1  # the knob turns it off


def test_a_split_tile_takes_one_workspace_slot_per_tile(tmp_path):
    """The workspace is sized for the storing consumer only: gemm.cu's slot is (tile, rank) * STORERS + rows, each
    with room for the tile's parts of BLOCK_M x BLOCK_N fp32; a 128-row tile has a slot per consumer."""
    g = split_k(tmp_path)[1].__globals__
    plan = g["plan"](64, 4096, 16384, H200_SMS)  # 32 tiles of 64 x 128 in 4 parts
    assert work(plan) == "split" and plan.build.storers == 1 and (plan.tiles, plan.splits) == (32, 4)
    assert g["_workspace_size"](plan) == (32 * 4 * 64 * 128, 32)
    large = g["plan"](256, 4096, 16384, H200_SMS)  # two storing consumers of 64 rows per 128 x 128 tile
    assert large.build.storers == 2 and g["_workspace_size"](large) == (
        large.tiles * 2 * large.splits * 64 * 128, large.tiles * 2)


def few_split_builds(folder) -> list:
    """The few-token builds in `folder` whose consumers split K (the short tile's, 64 x 320, split by its own knob,
    are tests/kernels/test_gemm_wide_tiles.py's)."""
    from avo.cuda import declared_builds

    return [b for b in declared_builds(folder) if "-DWG_SPLIT_K=1" in b.flags and "-DBLOCK_N=320" not in b.flags]


@needs.nvcc
@pytest.mark.parametrize("variant", ["split", "split+sets"])
def test_the_split_builds_compile_for_hopper_without_spills(variant, tmp_path):
    from avo.cuda import declared_builds

    folder, _ = split_k(tmp_path, variant)
    builds = few_split_builds(folder)
    assert len(builds) == (4 if variant == "split" else 2), [b.flags for b in declared_builds(folder)]
    resources = check_compiles_without_spills(folder, builds)
    split = [facts for facts in resources.values() if "WG_SPLIT_K=1" in facts["defines"]]
    assert len(split) == 2 * len(builds)  # bf16 and fp16 of each
    for facts in split:
        assert ("ACC_SETS=2" in facts["defines"]) == (variant == "split+sets")


@needs.nvrtc
@pytest.mark.parametrize("variant", ["split", "split+sets"])
def test_nvrtc_compiles_the_split_builds(variant, tmp_path):
    """The wrapper compiles with NVRTC at run time (nvcc above only for ptxas's resource report)."""
    folder, _ = split_k(tmp_path, variant)
    builds = few_split_builds(folder)
    assert len(builds) == (4 if variant == "split" else 2)
    check_nvrtc_compiles(builds)


# (M, N, K) -> (rows, width, work), FEW_ROWS 128: K-step counts that leave the second consumer an equal share, one
# fewer, one step and none; split parts and stream pieces of odd lengths, so that a unit's first step is either's.
SHAPES = {
    (64, 8192, 8192): (64, 64, "whole"),     # 128 steps, 64 each
    (40, 8200, 1000): (64, 64, "whole"),     # 16 steps, ragged M, N and K
    (64, 33792, 1032): (64, 128, "whole"),   # 17 steps: 9 and 8
    (64, 8704, 128): (64, 128, "whole"),     # two steps: one each
    (64, 8704, 64): (64, 128, "whole"),      # one step: the second consumer has none and hands nothing over
    (64, 4096, 16384): (64, 128, "split"),   # parts of 64 steps
    (33, 4096, 20000): (64, 128, "split"),   # ragged M and K: parts of odd lengths
    (64, 57344, 8192): (64, 128, "stream"),  # pieces of any length, starting anywhere in a tile
    (128, 3584, 3584): (64, 64, "whole"),    # 112 tiles of 64 x 64 at 128 rows
    (128, 2048, 16384): (64, 128, "split"),  # 32 tiles of 64 x 128 (two tile rows) in 4 parts
    (64, 4096, 4096): (64, 64, "split"),     # NARROW_SPLIT: 64 tiles of 64 x 64 in 2 parts
    (128, 1024, 4088): (64, 64, "split"),    # 32 of them over two tile rows, ragged K: 32 and 32 steps, the last short
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_takes_the_work_it_is_meant_to_check(shape, tmp_path):
    g = split_k(tmp_path, FEW_ROWS=128)[1].__globals__
    plan = g["plan"](*shape, H200_SMS)
    assert (plan.build.block_m, plan.build.block_n, work(plan)) == SHAPES[shape], (shape, plan)
    assert plan.build.defines["WG_SPLIT_K"] == 1


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["split", "split+sets"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_split_consumers_are_correct_and_bitwise_repeatable(dtype, variant, tmp_path):
    """Ten repeats each: with one full barrier per slot for both consumers, a consumer's parity could alias a fill it
    had skipped once odd-length units moved the slots' owners, and the stream-K shape gave other bits on an H100."""
    needs.module("cupy")
    gemm = split_k(tmp_path, variant, FEW_ROWS=128)[1]
    for shape in SHAPES:
        check_repeatable(gemm, shape, dtype, (variant, shape), repeats=10)
    assert arrivals_reset(gemm), "arrival counters left set"


@pytest.mark.gpu
def test_split_consumers_read_a_transposed_weight_in_place(tmp_path):
    """B as nn.Linear's weight.t() (the B_K_MAJOR twin of each build) gives the row-major B's bits."""
    needs.module("cupy")
    gemm = split_k(tmp_path, FEW_ROWS=128)[1]
    check_reads_weight_in_place(gemm, ((64, 8192, 8192), (33, 4096, 20000), (128, 3584, 3584), (64, 8704, 64),
                                       (64, 4096, 4096)))
