"""gemm/cuda_wgmma's tiles wider than one wgmma: 128 x 320 (two consumers, two instructions per K-slice: 256 and 64
columns) and the short 64 x 320 tile (two consumers taking alternate K-steps, the second's sum handed over in
rounds), each with its C tile staged a few boxes at a time. On a GPU
every kind of work on them (whole tiles, a split tail, split-K, stream-K) is correct and bitwise repeatable, with B
in rows and as nn.Linear's weight.t(); on the CPU each build compiles for Hopper without spills."""

from __future__ import annotations

import needs
import pytest
import torch
from test_gemm_epilogue_rounds import seed_with
from test_gemm_plan import work as facts
from test_gemm_splitk import H200_SMS, SEED, arrivals_reset, check_compiles_without_spills, check_repeatable, work

from avo.evaluate.worker.loader import load_entry
from avo.tasks import load, relative_error

# (M, N, K, build, work, parts): build "320" is the 128 x 320 tile, "short" the 64 x 320 one; work as
# test_gemm_splitk.py names it, "tail" and "split" in `parts`, "stream" past the last full wave.
FORCED = [
    (1024, 10240, 8192, "320", "whole", 1),   # 256 tiles: under two waves
    (1000, 10200, 1032, "320", "whole", 1),   # ragged M, N (the last tile 280 of 320 columns) and K
    (1024, 57344, 8192, "320", "tail", 2),    # 1440 tiles: 1320 whole, 120 in 2 parts
    (256, 4096, 16384, "320", "split", 4),    # 26 tiles in 4 parts
    (1000, 10240, 8192, "320", "stream", 1),  # ragged rows; 132 whole, 124 dealt out
    (256, 10240, 8192, "short", "whole", 1),  # 128 tiles of 64 x 320: one wave
    (200, 9992, 8200, "short", "whole", 1),   # ragged M, N and K
    (256, 4096, 16384, "short", "split", 2),  # 52 tiles in 2 parts
    (256, 57344, 8192, "short", "stream", 1),  # 720 tiles: 660 whole, 60 dealt out
]


def force(gemm, build, kind: str, parts: int):
    """`gemm`, the seed's wrapper, made to run `build` and `kind` of work (in `parts`) on every shape."""
    g = gemm.__globals__

    def plan(M, N, K, sms):
        count = -(-M // build.block_m) * -(-N // build.block_n)
        if kind == "stream":
            return g["stream_plan"](build, count, 1, -(-K // 64), sms, -(-M // build.block_m))[1]
        whole = {"whole": count, "split": 0, "tail": count // sms * sms}[kind]
        return g["Plan"](build, count, whole, parts)

    g["plan"] = plan
    g["_PLANS"].clear()
    return gemm


def forced(case):
    """The seed's wrapper running `case`'s build and work on every shape."""
    m, n, k, which, kind, parts = case
    gemm = load_entry(SEED, "gemm")
    g = gemm.__globals__
    return force(gemm, g["_LARGE"][320] if which == "320" else g["short_build"](320), kind, parts)


def check_forced_work(gemm, shape, dtype, case) -> None:
    """On a GPU: `gemm`'s forced work at `shape` correct and bitwise repeatable, its arrival counters back at zero."""
    check_repeatable(gemm, shape, dtype, case, repeats=3)
    assert arrivals_reset(gemm), f"{case}: arrival counters left set"


def check_reads_transposed_weight(gemm, shape, case) -> None:
    """On a GPU: `gemm` reads an [N, K] weight's transpose in place (its K-major twin), correct and repeatable."""
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn((m, k), generator=gen, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn((n, k), generator=gen, device="cuda", dtype=torch.bfloat16)
    out = gemm(a, weight.t())
    task = load("gemm")
    assert relative_error(out, task.reference(a, weight.t())) <= task.tolerance("bfloat16"), case
    assert torch.equal(out, gemm(a, weight.t())), f"{case}: a repeated call gave other bits"
    assert next(iter(gemm.__globals__["_PLANS"].values())).build._k_major is not None, "the twin did not run"


def test_the_wide_builds_stage_their_c_tile_in_part_and_take_the_stages_that_fit():
    g = load_entry(SEED, "gemm").__globals__
    wide, short = g["_LARGE"][320], g["short_build"](320)
    assert (wide.block_m, wide.block_n, wide.consumers) == (128, 320, 2)
    assert (short.block_m, short.block_n, short.consumers, short.storers) == (64, 320, 2, 1)
    for build, stages, staged in ((wide, g["STAGES_320"], g["STAGED_320"]),
                                  (short, g["SHORT_STAGES"], g["SHORT_STAGED"])):
        assert build.defines["C_STAGED"] == staged and build.defines["STAGES"] == stages
        assert build.smem <= g["SMEM_BYTES"]
    # the short tile's second consumer hands its sum over in rounds: whole, its 80 KB would leave room for 2 stages
    assert short.defines["RED_ROUNDS"] == g["SHORT_RED_ROUNDS"] > 1
    g["SHORT_RED_ROUNDS"] = 1
    assert g["short_build"](320).defines["STAGES"] == 2
    # staged whole, the 128 x 320 tile's C (80 KB) would leave room for two stages only
    assert g["_Build"](128, 320, 3, 2, 1).defines["STAGES"] == 2


def test_a_forced_plan_takes_the_work_asked_for():
    for case in FORCED:
        m, n, k, which, kind, parts = case
        plan = forced(case).__globals__["plan"](m, n, k, H200_SMS)
        assert plan.build.block_n == 320 and plan.build.block_m == (128 if which == "320" else 64)
        assert work(plan) == kind, case


def test_the_short_tile_is_weighed_only_where_it_fills_one_wave_whole_on_a_long_enough_k(tmp_path):
    """SHORT_N's tile was timed in one kind of work: one near-full wave of whole tiles. There it won from K = 2048
    and lost below, so the plan takes it there and nowhere it would split, run past a wave or walk a short K;
    SHORT_FILL 0 and SHORT_MIN_K 0 let it go anywhere."""
    def short(plan):
        return plan.build.block_m == 64 and plan.build.block_n == 320

    g = load_entry(SEED, "gemm").__globals__
    assert g["SHORT_N"] == 320
    for m, n, k in ((256, 10240, 8192), (200, 10240, 8192), (256, 10240, 2048), (160, 13824, 4096)):
        plan = g["plan"](m, n, k, H200_SMS)
        assert short(plan) and plan.whole == plan.tiles >= 0.9 * H200_SMS, (m, n, k, plan)
    # a wave under 90% full (96 tiles), split in K (64 tiles in 2), past a wave (720 tiles), K under 2048: the plans
    # they have without the tile
    off = seed_with(tmp_path, {"SHORT_N": 0}, "off")[1].__globals__
    for m, n, k in ((160, 10240, 8192), (256, 5120, 8192), (256, 57344, 8192), (256, 8192, 28672),
                    (256, 10240, 1024), (256, 10240, 2047)):
        plan = g["plan"](m, n, k, H200_SMS)
        assert not short(plan) and facts(plan) == facts(off["plan"](m, n, k, H200_SMS)), (m, n, k, plan)
    anywhere = seed_with(tmp_path, {"SHORT_FILL": 0.0, "SHORT_MIN_K": 0}, "anywhere")[1].__globals__
    plan = anywhere["plan"](256, 5120, 8192, H200_SMS)
    assert short(plan) and plan.splits > 1, plan
    assert short(anywhere["plan"](256, 10240, 1024, H200_SMS))


@needs.nvcc
def test_the_wide_builds_compile_for_hopper_without_spills():
    from avo.cuda import declared_builds

    load_entry(SEED, "gemm")  # declares its builds in this process: 128 x 320 and the short 64 x 320 among them
    builds = [b for b in declared_builds(SEED) if "-DBLOCK_N=320" in b.flags]  # the others: test_cuda_seeds.py
    resources = check_compiles_without_spills(SEED, builds)  # and simple.cu, which no build names
    wide = {name: facts for name, facts in resources.items() if "BLOCK_N=320" in facts["defines"]}
    tiles = {(name.split()[0], next(d for d in facts["defines"] if d.startswith("BLOCK_M="))) for name, facts
             in wide.items()}
    assert {(kernel, rows) for kernel in ("gemm_bf16", "gemm_fp16") for rows in ("BLOCK_M=128", "BLOCK_M=64")} <= tiles


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", FORCED, ids=lambda c: "x".join(map(str, c[:3])) + f"-{c[3]}-{c[4]}{c[5]}")
def test_each_kind_of_work_on_the_wide_tiles_is_correct_and_bitwise_repeatable(case, dtype):
    needs.module("cupy")
    check_forced_work(forced(case), case[:3], dtype, case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", FORCED[:3] + FORCED[5:7], ids=lambda c: "x".join(map(str, c[:3])) + f"-{c[3]}")
def test_the_wide_tiles_read_a_transposed_weight_in_place(case):
    needs.module("cupy")
    check_reads_transposed_weight(forced(case), case[:3], case)
