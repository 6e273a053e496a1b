"""gemm/cuda_wgmma's KEEP_OWN: the unit that finishes a split tile as its part 0 or 1 keeps its own part in
registers and reads only the others' back, writing none of its own where every other part is already in. It must
add the parts in the same order as without it: on a GPU every kind of split work (parts of 2, 3 and 4, split tails,
stream-K pieces) gives the bits the seed gives without it, call after call; on the CPU the widest builds, whose
accumulators leave the fewest registers, compile for Hopper without spills."""

from __future__ import annotations

import needs
import pytest
import torch
from test_gemm_splitk import H200_SMS, SEED, check_compiles_without_spills, check_same_bits, work
from test_gemm_epilogue_rounds import seed_with

from avo.evaluate.worker.loader import load_entry

# (M, N, K) -> (rows, width, work, parts): the finishing unit may be part 0, 1 or a later one.
SHAPES = {
    (256, 10240, 28672): (128, 320, "split", 2),
    (64, 4096, 16384): (64, 128, "split", 4),
    (33, 4096, 20000): (64, 128, "split", 4),     # ragged M and K
    (300, 1000, 20000): (128, 128, "split", 2),   # ragged M, N and K
    (256, 7168, 28672): (128, 256, "split", 2),
    (256, 2048, 8192): (128, 128, "split", 4),
    (1024, 14336, 4096): (128, 256, "tail", 2),
    (384, 18688, 8192): (128, 128, "tail", 3),    # ragged N
    (8192, 8192, 8192): (128, 256, "stream", 2),  # pieces of two or more blocks' runs
}


def keeping(tmp_path):
    """The seed with KEEP_OWN on, in a folder of its own: (folder, its gemm)."""
    return seed_with(tmp_path, {"KEEP_OWN": True}, "keep_own")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_takes_the_split_work_it_is_meant_to_check(shape, tmp_path):
    plan = keeping(tmp_path)[1].__globals__["plan"](*shape, H200_SMS)
    rows, width, kind, parts = SHAPES[shape]
    assert (plan.build.block_m, plan.build.block_n, work(plan), plan.splits) == (rows, width, kind, parts), plan
    assert plan.build.defines["KEEP_OWN"] == 1
    assert "KEEP_OWN" not in load_entry(SEED, "gemm").__globals__["plan"](*shape, H200_SMS).build.defines


@needs.nvcc
def test_the_widest_builds_keeping_their_own_part_compile_without_spills(tmp_path):
    from avo.cuda import declared_builds

    folder, _ = keeping(tmp_path)
    builds = [b for b in declared_builds(folder) if "-DKEEP_OWN=1" in b.flags and "-DBLOCK_M=128" in b.flags and
              any(f"-DBLOCK_N={n}" in b.flags for n in (256, 320))]
    assert len(builds) >= 3, [b.flags for b in declared_builds(folder)]  # 256 and 320 wide, and rows256's 256
    check_compiles_without_spills(folder, builds)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_keeping_its_own_part_gives_the_same_bits_call_after_call(dtype, tmp_path):
    needs.module("cupy")
    check_same_bits(keeping(tmp_path)[1], load_entry(SEED, "gemm"), SHAPES, dtype, "without KEEP_OWN")
