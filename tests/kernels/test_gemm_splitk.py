"""gemm/cuda_wgmma's per-shape choice: which configuration, K split and split tail each kind of shape takes (CPU),
and on a GPU every configuration it can choose is correct and gives bitwise-identical outputs call after call, with
its arrival counters back at zero."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch

from avo.evaluate.worker.loader import load_entry
from avo.tasks import load, relative_error

SEED = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
H200_SMS = 132
# One shape per configuration the wrapper can choose, ragged edges included: (M, N, K) -> (rows, width, work), the
# work "whole" (unsplit), "split" (split-K: every tile cut along K) or "tail" (the last wave's tiles cut).
SHAPES = {
    (64, 33792, 1024): (64, 128, "whole"),     # few tokens: the 64-row tile, unsplit
    (64, 4096, 16384): (64, 128, "split"),     # few tokens, 32 tiles, long K: split
    (33, 2048, 20000): (64, 128, "split"),     # ragged M and K, split
    (4096, 4096, 4096): (128, 256, "whole"),   # the widest tile, unsplit (the bench suite)
    (256, 10240, 1024): (128, 192, "whole"),   # 192 wide fills the SMs better than 256 or 128
    (256, 4096, 16384): (128, 128, "split"),   # 128 wide, 64 tiles, long K: split
    (300, 1000, 20000): (128, 128, "split"),   # ragged M, N and K, split
    (1024, 10240, 8192): (128, 256, "tail"),   # 264 tiles whole, 56 in 2 parts
    (1000, 10240, 8192): (128, 256, "tail"),   # the same with a ragged last tile row
    (256, 10240, 8192): (128, 128, "tail"),    # 132 tiles whole, 28 in 4 parts
    (896, 2368, 8192): (128, 128, "tail"),     # 132 tiles whole, one in 4 parts (ragged N)
}


def seed():
    return load_entry(SEED, "gemm")


def work(plan) -> str:
    return "whole" if plan.splits == 1 else "split" if plan.whole == 0 else "tail"


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_kind_of_shape_takes_its_configuration(shape):
    plan = seed().__globals__["plan"](*shape, H200_SMS)
    assert (plan.build.block_m, plan.build.block_n, work(plan)) == SHAPES[shape], (shape, plan)
    if work(plan) == "split":
        assert plan.splits <= -(-shape[2] // 64) // 128  # each part walks 128 steps of K or more


def test_the_bench_suite_takes_the_widest_tile_unsplit_and_the_knobs_turn_each_rule_off():
    g = seed().__globals__
    for case in load("gemm").cases("bench"):
        p = case.params
        plan = g["plan"](p["M"], p["N"], p["K"], H200_SMS)
        assert (plan.build.block_m, plan.build.block_n, plan.splits) == (128, 256, 1), case.name
    g.update(FEW_ROWS=0, MAX_SPLITS=1, TAIL_SPLITS=1)
    for shape in SHAPES:
        plan = g["plan"](*shape, H200_SMS)
        assert plan.build.block_m == 128 and plan.splits == 1, shape


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_configuration_is_correct_and_bitwise_repeatable(shape, dtype):
    needs.module("cupy")
    gemm = seed()
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(sum(shape))
    a = torch.randn((m, k), generator=gen, device="cuda", dtype=dtype)
    b = torch.randn((k, n), generator=gen, device="cuda", dtype=dtype)
    first = gemm(a, b)
    task = load("gemm")
    name = str(dtype).removeprefix("torch.")
    assert relative_error(first, task.reference(a, b)) <= task.tolerance(name), shape  # fp32 torch.matmul
    for _ in range(5):
        torch.empty_like(first).fill_(float("nan"))  # the next output may land where this garbage was
        assert torch.equal(gemm(a, b), first), f"{shape}: a repeated call gave other bits"
    for _, arrivals in gemm.__globals__["_WORKSPACE"].values():  # each tile's last unit reset its counter
        assert not arrivals.any(), f"{shape}: arrival counters left set"
