"""gemm/cuda_wgmma's per-shape choice: which configuration and K split each kind of shape takes (CPU), and on a
GPU every configuration it can choose is correct and gives bitwise-identical outputs call after call."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch

from avo.evaluate.worker.loader import load_entry
from avo.tasks import load, relative_error

SEED = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
H200_SMS = 132
# One shape per configuration the wrapper can choose, ragged edges included: (M, N, K) -> (rows, width, split).
SHAPES = {
    (64, 33792, 1024): (64, 128, False),     # few tokens: the 64-row tile, unsplit
    (64, 4096, 16384): (64, 128, True),      # few tokens, 32 tiles, long K: split
    (33, 2048, 20000): (64, 128, True),      # ragged M and K, split
    (4096, 4096, 4096): (128, 256, False),   # the widest tile, unsplit (the bench suite)
    (256, 10240, 1024): (128, 192, False),   # 192 wide fills the SMs better than 256 or 128
    (256, 4096, 16384): (128, 128, True),    # 128 wide, 64 tiles, long K: split
    (300, 1000, 20000): (128, 128, True),    # ragged M, N and K, split
}


def seed():
    return load_entry(SEED, "gemm")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_kind_of_shape_takes_its_configuration(shape):
    build, units, splits = seed().__globals__["plan"](*shape, H200_SMS)
    assert (build.block_m, build.block_n, splits > 1) == SHAPES[shape], (shape, build.block_n, splits)
    assert splits == 1 or splits <= -(-shape[2] // 64) // 128  # each part walks 128 steps of K or more


def test_the_bench_suite_takes_the_widest_tile_unsplit_and_the_knobs_turn_each_rule_off():
    g = seed().__globals__
    for case in load("gemm").cases("bench"):
        p = case.params
        build, _, splits = g["plan"](p["M"], p["N"], p["K"], H200_SMS)
        assert (build.block_m, build.block_n, splits) == (128, 256, 1), case.name
    g.update(FEW_ROWS=0, MAX_SPLITS=1)
    for shape in SHAPES:
        build, _, splits = g["plan"](*shape, H200_SMS)
        assert build.block_m == 128 and splits == 1, shape


@pytest.mark.gpu
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_configuration_is_correct_and_bitwise_repeatable(shape):
    needs.module("cupy")
    gemm = seed()
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(sum(shape))
    a = torch.randn((m, k), generator=gen, device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), generator=gen, device="cuda", dtype=torch.bfloat16)
    first = gemm(a, b)
    task = load("gemm")
    assert relative_error(first, task.reference(a, b)) <= task.tolerance("bfloat16"), shape
    for _ in range(5):
        torch.empty_like(first).fill_(float("nan"))  # the next output may land where this garbage was
        assert torch.equal(gemm(a, b), first), f"{shape}: a repeated call gave other bits"
