"""gemm/cuda_wgmma's few-token tiles 80, 96 and 112 wide (FEW["WAVE_N"]): one wgmma each, B in 16- or 32-column
boxes in the 32- or 64-byte swizzle, C stored from the registers. The plan weighs one of them where the 64 x 128
tiles run one unsplit wave with SMs idle and the 64 x 64 ones would run past it. On a GPU every kind of work on them
is correct and bitwise repeatable, with B in rows and as nn.Linear's weight.t(); on the CPU each compiles for Hopper
without spills."""

from __future__ import annotations

import needs
import pytest
import torch
from test_gemm_epilogue_rounds import seed_with
from test_gemm_splitk import H200_SMS, SEED, check_compiles_without_spills, work
from test_gemm_wide_tiles import check_forced_work, check_reads_transposed_weight, force

from avo.evaluate.worker.loader import load_entry

WIDTHS = (80, 96, 112)
# (M, N, K, width, work, parts), work as test_gemm_splitk.py names it
FORCED = [
    (64, 10240, 8192, 80, "whole", 1),    # 128 tiles: one wave
    (64, 10240, 8192, 96, "whole", 1),    # 107 tiles, the last 64 of its 96 columns
    (64, 14336, 4096, 112, "whole", 1),   # 128 tiles
    (50, 9992, 2056, 80, "whole", 1),     # ragged M, N and K
    (33, 10000, 3000, 96, "whole", 1),    # an edge row of 33 rows (EDGE_ANY's 40-row box)
    (16, 7000, 1000, 112, "whole", 1),    # 16 rows: the 32-row edge box
    (64, 4096, 8192, 80, "split", 4),     # 52 tiles in 4 parts
    (64, 57344, 4096, 112, "stream", 1),  # 512 tiles: 396 whole, 116 dealt out
]


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """A copy of the seed to declare these tiles' builds in: declared in the seed's own folder, they would join the
    builds that test_cuda_seeds.py checks for TMA stores, which these tiles do not make (C leaves from registers)."""
    return seed_with(tmp_path_factory.mktemp("wave"), {}, "copy")[0]


def forced(folder, case):
    """The wrapper of the seed copied to `folder` running `case`'s tile and work on every shape."""
    m, n, k, width, kind, parts = case
    gemm = load_entry(folder, "gemm")
    g = gemm.__globals__
    return force(gemm, g["_few_build"](width, g["FEW"]["WAVE_STAGES"]), kind, parts)


def case_id(case) -> str:
    return "x".join(map(str, case[:3])) + f"-{case[3]}-{case[4]}{case[5]}"


def test_each_width_loads_b_in_boxes_that_divide_it_and_fits_its_stages(copy):
    g = load_entry(copy, "gemm").__globals__
    for width, cols in ((80, 16), (96, 32), (112, 16)):
        build = g["_few_build"](width, g["FEW"]["WAVE_STAGES"])
        assert (build.block_m, build.block_n, build.b_cols) == (64, width, cols)
        assert "TMA_STORE" in build.defines and not build.defines["TMA_STORE"], "C leaves from the registers"
        assert build.defines["STAGES"] == g["FEW"]["WAVE_STAGES"] and build.smem <= g["SMEM_BYTES"]


def test_a_forced_plan_takes_the_work_asked_for(copy):
    for case in FORCED:
        m, n, k, width, kind, parts = case
        plan = forced(copy, case).__globals__["plan"](m, n, k, H200_SMS)
        assert (plan.build.block_m, plan.build.block_n) == (64, width) and work(plan) == kind, case


def test_a_wave_width_is_weighed_only_where_the_64_x_128_tiles_leave_sms_idle_in_one_unsplit_wave(tmp_path):
    """Off by default (on an H100 they lost, BENCHMARKS.md); on, the plan takes the narrower tile where its tiles
    fill more of one wave than the 64 x 128 tiles, which then run unsplit, and the 64 x 64 ones would run past it;
    elsewhere the plan it has without the knob."""
    shipped = load_entry(SEED, "gemm").__globals__
    assert shipped["FEW"]["WAVE_N"] == 0 and shipped["_WAVE"] is None
    others = ((64, 8192, 8192), (64, 57344, 8192), (64, 4096, 8192), (64, 8192, 28672), (256, 10240, 8192),
              (1024, 10240, 8192), (128, 10240, 8192), (64, 16384, 8192))
    seeds = {width: seed_with(tmp_path, {"WAVE_N@few": width}, f"w{width}")[1].__globals__ for width in WIDTHS}
    for width, shape, tiles in ((80, (64, 10240, 8192), 128), (96, (64, 10240, 8192), 107),
                                (112, (64, 14336, 4096), 128), (80, (1, 10240, 8192), 128),
                                (96, (48, 12288, 4096), 128)):
        g = seeds[width]
        plan = g["plan"](*shape, H200_SMS)
        assert (plan.build.block_n, plan.tiles, plan.whole, plan.splits) == (width, tiles, tiles, 1), (width, plan)
        assert shipped["plan"](*shape, H200_SMS).build.block_n == 128  # where the 64 x 128 tiles ran
        for other in others:  # the 64 x 64 tiles fit one wave, past a wave, a split, past 64 rows
            mine, before = g["plan"](*other, H200_SMS), shipped["plan"](*other, H200_SMS)
            assert (mine.build.block_n, mine.tiles, mine.whole, mine.splits) == \
                (before.build.block_n, before.tiles, before.whole, before.splits), (width, other)


@needs.nvcc
def test_the_wave_widths_compile_for_hopper_without_spills(copy):
    from avo.cuda import declared_builds

    folder, g = copy, load_entry(copy, "gemm").__globals__
    for width in WIDTHS:
        g["_few_build"](width, g["FEW"]["WAVE_STAGES"]).k_major()  # and its twin reading an [N, K] B
    builds = [b for b in declared_builds(folder) if any(f"-DBLOCK_N={w}" in b.flags for w in WIDTHS)]
    resources = check_compiles_without_spills(folder, builds)
    compiled = {(name.split()[0], d, "B_K_MAJOR=1" in facts["defines"]) for name, facts in resources.items()
                for d in facts["defines"] if d.startswith("BLOCK_N=")}  # (simple.cu, which no build names, has none)
    assert {(kernel, f"BLOCK_N={w}", twin) for kernel in ("gemm_bf16", "gemm_fp16") for w in WIDTHS
            for twin in (False, True)} <= compiled


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", FORCED, ids=case_id)
def test_each_kind_of_work_on_the_wave_tiles_is_correct_and_bitwise_repeatable(copy, case, dtype):
    needs.module("cupy")
    check_forced_work(forced(copy, case), case[:3], dtype, case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", FORCED[:6], ids=case_id)
def test_the_wave_tiles_read_a_transposed_weight_in_place(copy, case):
    needs.module("cupy")
    check_reads_transposed_weight(forced(copy, case), case[:3], case)
