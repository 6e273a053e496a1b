"""gemm/cuda_wgmma's 128 x 160 tile (WIDTH_160): one wgmma of 160 columns over five 32-column boxes of B in the
64-byte swizzle, C stored from the registers. On a GPU every kind of work on it (whole tiles, a split tail,
split-K, stream-K) is correct and bitwise repeatable, with B in rows and as nn.Linear's weight.t(), with one
accumulator set and two; on the CPU each build compiles for Hopper without spills, and the plan takes it only where
its knob is on."""

from __future__ import annotations

import needs
import pytest
import torch
from test_gemm_splitk import H200_SMS, SEED, check_compiles_without_spills, work
from test_gemm_epilogue_rounds import seed_with
from test_gemm_wide_tiles import check_forced_work, check_reads_transposed_weight, force

from avo.evaluate.worker.loader import load_entry

# (M, N, K, work, parts, accumulator sets): work as test_gemm_wide_tiles.py names it
FORCED = [
    (256, 10240, 8192, "whole", 1, 1),   # 128 tiles: one wave
    (200, 9992, 1032, "whole", 1, 2),    # ragged M (an edge row), N (the last tile 72 of 160 columns) and K
    (256, 4096, 16384, "split", 4, 1),   # 52 tiles in 4 parts
    (1024, 10240, 8192, "tail", 2, 2),   # 512 tiles: 396 whole, 116 in 2 parts
    (1000, 10240, 4096, "stream", 1, 1),  # 512 tiles: 396 whole, the rest dealt out
]


def build_160(g, acc_sets: int):
    """The 160-wide build as the rows256 entry declares it, with `acc_sets` accumulator sets."""
    g["ACC_SETS_160"] = acc_sets
    rows256 = g["ROWS256"]
    return g["_large"](160, rows256["STAGES"], rows256["EPILOGUE_SPLIT"], rows256["MMA_LAG"], lag_from=4)


def forced(case):
    """The seed's wrapper running the 160-wide build and `case`'s work on every shape."""
    m, n, k, kind, parts, acc_sets = case
    gemm = load_entry(SEED, "gemm")
    return force(gemm, build_160(gemm.__globals__, acc_sets), kind, parts)


def test_the_160_wide_build_stores_from_registers_and_takes_its_stages():
    g = load_entry(SEED, "gemm").__globals__
    for sets in (1, 2):
        build = build_160(g, sets)
        assert (build.block_m, build.block_n, build.b_cols) == (128, 160, 32)
        assert build.defines["TMA_STORE"] is False and "C_STAGED" not in build.defines
        assert build.defines["STAGES"] == g["STAGES_160"] and build.smem <= g["SMEM_BYTES"]
        assert build.defines.get("ACC_SETS", 1) == sets
    assert g["_LARGE"][256].b_cols == 64


def test_the_plan_weighs_the_160_wide_tile_only_with_its_knob_on(tmp_path):
    off = load_entry(SEED, "gemm").__globals__
    assert 160 not in off["_WIDTHS"] and off["plan"](256, 10240, 8192, H200_SMS).build.block_n == 320
    on = seed_with(tmp_path, {"WIDTH_160": True}, "width_160")[1].__globals__
    assert 160 in on["_WIDTHS"]
    chosen = on["plan"](256, 10240, 8192, H200_SMS)  # 128 tiles of 128 x 160, one wave, whole
    assert (chosen.build.block_n, chosen.tiles, chosen.whole, chosen.splits) == (160, 128, 128, 1)
    # where 160 does not divide the waves better, the widths chosen without it
    for shape in ((1024, 10240, 8192), (256, 8192, 8192), (4096, 8192, 8192)):
        assert on["plan"](*shape, H200_SMS).build.block_n == off["plan"](*shape, H200_SMS).build.block_n, shape


def test_a_forced_plan_takes_the_work_asked_for():
    for case in FORCED:
        m, n, k, kind = case[:4]
        plan = forced(case).__globals__["plan"](m, n, k, H200_SMS)
        assert plan.build.block_n == 160 and work(plan) == kind, case


@needs.nvcc
def test_the_160_wide_builds_compile_for_hopper_without_spills():
    from avo.cuda import declared_builds

    g = load_entry(SEED, "gemm").__globals__
    for sets in (1, 2):
        build_160(g, sets).k_major()  # declares both, and the twin reading an [N, K] B
    builds = [b for b in declared_builds(SEED) if "-DBLOCK_N=160" in b.flags]
    resources = check_compiles_without_spills(SEED, builds)
    compiled = {(name.split()[0], "B_K_MAJOR=1" in facts["defines"], "ACC_SETS=2" in facts["defines"])
                for name, facts in resources.items() if "BLOCK_N=160" in facts["defines"]}
    assert len(compiled) == 8, compiled  # bf16 and fp16, B in rows and K-major, one set and two


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", FORCED, ids=lambda c: "x".join(map(str, c[:3])) + f"-{c[3]}{c[4]}-sets{c[5]}")
def test_each_kind_of_work_on_the_160_wide_tile_is_correct_and_bitwise_repeatable(case, dtype):
    needs.module("cupy")
    check_forced_work(forced(case), case[:3], dtype, case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", FORCED[:4], ids=lambda c: "x".join(map(str, c[:3])) + f"-{c[3]}")
def test_the_160_wide_tile_reads_a_transposed_weight_in_place(case):
    needs.module("cupy")
    check_reads_transposed_weight(forced(case), case[:3], case)
