"""gemm/cuda_wgmma's two accumulator sets (ACC_SETS 2: a consumer's K-steps alternate between two register tiles,
added at the end): where the knobs ask for them the builds that have room take them and compile for Hopper without
spills or serialized wgmma; on a GPU each kind of work on them (whole tiles with an even, odd or single K-step count,
split-K, stream-K, B as nn.Linear's weight.t()) is correct and bitwise repeatable."""

from __future__ import annotations

import shutil

import needs
import pytest
import torch
from test_gemm_splitk import (H200_SMS, SEED, arrivals_reset, check_compiles_without_spills,
                              check_reads_weight_in_place, check_repeatable, work)

from avo.agent.heuristic.knobs import render
from avo.evaluate.worker.loader import load_entry

# STREAM on, STREAM_FROM 3 and NARROW_WAVES 0: 64 x 57344 x 8192 (3.4 waves) deals out stream-K pieces of 64 x 128
# tiles (by default 64 x 64 tiles, whole). STAGES_M64 7: one build of each few-token tile at every row count.
KNOBS = {"ACC_SETS@few": 2, "ACC_SETS_128": 2, "STREAM@few": True, "STREAM_FROM@few": 3, "NARROW_WAVES@few": 0,
         "STAGES_M64@few": 7, "NARROW_FULL_STAGES_M64@few": 12}


def two_sets(tmp_path, **more):
    """The seed with two accumulator sets on the few-token tiles and the 128-wide one (and `more` knobs)."""
    folder = tmp_path / "two_sets"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "kernel.py").write_text(render((folder / "kernel.py").read_text(), {**KNOBS, **more}))
    return folder, load_entry(folder, "gemm")


def test_only_the_tiles_with_room_for_two_sets_take_them(tmp_path):
    g = two_sets(tmp_path)[1].__globals__
    assert g["_FEW"].defines["ACC_SETS"] == 2 and g["_NARROW"].defines["ACC_SETS"] == 2
    assert g["_LARGE"][128].defines["ACC_SETS"] == 2
    assert all("ACC_SETS" not in build.defines for n, build in g["_LARGE"].items() if n != 128)
    # 64 x 256 holds 128 accumulators per thread: two sets would pass the 160 that fit beside the rest
    wide = g["_Build"](64, 256, 4, 1, 1, acc_sets=2)
    assert "ACC_SETS" not in wide.defines
    assert "ACC_SETS" not in load_entry(SEED, "gemm").__globals__["_FEW"].defines  # off by default


@needs.nvcc
def test_the_builds_with_two_sets_compile_for_hopper_without_spills(tmp_path):
    from avo.cuda import declared_builds

    folder, gemm = two_sets(tmp_path)
    builds = [b for b in declared_builds(folder) if "-DACC_SETS=2" in b.flags]
    # the few-token tiles' two, the 128-wide tile's, and its twin of the rows256 entry (MMA_LAG, C in rounds)
    assert len(builds) == 4, [b.flags for b in declared_builds(folder)]
    resources = check_compiles_without_spills(folder, builds)
    # bf16 and fp16 of each (beside simple.cu's kernels, which no build names)
    assert sum("ACC_SETS=2" in facts["defines"] for facts in resources.values()) == 2 * len(builds)


# (M, N, K) -> (rows, width, work) with two sets: K-step counts even, odd and one; 128 rows on the 64-row tiles
# (FEW_ROWS 128) and on the 128-wide tile.
SHAPES = {
    (64, 8192, 8192): (64, 64, "whole"),     # 128 step pairs
    (40, 8200, 1000): (64, 64, "whole"),     # 16 steps, ragged M, N and K
    (64, 33792, 1032): (64, 128, "whole"),   # 17 steps: the odd one into the first set
    (64, 8704, 64): (64, 128, "whole"),      # one step: the second set never used
    (64, 4096, 16384): (64, 128, "split"),   # parts of 64 steps
    (33, 4096, 20000): (64, 128, "split"),   # ragged M and K: parts of odd lengths
    (64, 57344, 8192): (64, 128, "stream"),  # pieces of any length, starting anywhere in a tile
    (128, 3584, 3584): (64, 64, "whole"),    # 112 tiles of 64 x 64 at 128 rows
    (256, 4096, 16384): (128, 128, "split"),
    (300, 1000, 20000): (128, 128, "split"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_takes_the_work_it_is_meant_to_check(shape, tmp_path):
    g = two_sets(tmp_path, FEW_ROWS=128)[1].__globals__
    plan = g["plan"](*shape, H200_SMS)
    assert (plan.build.block_m, plan.build.block_n, work(plan)) == SHAPES[shape], (shape, plan)
    assert plan.build.defines["ACC_SETS"] == 2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_two_sets_are_correct_and_bitwise_repeatable(dtype, tmp_path):
    needs.module("cupy")
    gemm = two_sets(tmp_path, FEW_ROWS=128)[1]
    for shape in SHAPES:
        check_repeatable(gemm, shape, dtype, shape, repeats=3)
    assert arrivals_reset(gemm), "arrival counters left set"


@pytest.mark.gpu
def test_two_sets_read_a_transposed_weight_in_place(tmp_path):
    """B as nn.Linear's weight.t() (the B_K_MAJOR twin of each build) gives the row-major B's bits."""
    needs.module("cupy")
    gemm = two_sets(tmp_path, FEW_ROWS=128)[1]
    check_reads_weight_in_place(gemm, ((64, 8192, 8192), (33, 2048, 20000), (128, 3584, 3584), (256, 4096, 16384)))
