"""gemm/cuda_wgmma's per-shape choice: which configuration and K split each kind of shape takes (CPU), and on a
GPU every configuration it can choose is correct and gives bitwise-identical outputs call after call. The few-token
tile and split-K ship switched off (FEW_ROWS = 0, MAX_SPLITS = 1) until measured on a GPU; these tests switch them
on."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch

from avo.evaluate.worker.loader import load_entry
from avo.tasks import load, relative_error

SEED = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
H200_SMS = 132
# One shape per configuration the wrapper can choose, ragged edges included: (M, N, K) -> (block_m, splits > 1).
SHAPES = {
    (64, 33792, 1024): (64, False),    # few tokens, a full wave of tiles: unsplit
    (64, 8192, 8192): (64, True),      # few tokens, 32 tiles: split along K
    (33, 2048, 5000): (64, True),      # ragged M and K, split
    (4096, 4096, 4096): (128, False),  # the large tile, unsplit (the bench suite)
    (256, 8192, 8192): (128, True),    # 64 large tiles: split
    (300, 1000, 3000): (128, True),    # ragged M, N and K, split
}


def seed():
    """The seed with its per-shape choices switched on (FEW_ROWS and MAX_SPLITS as built for them)."""
    gemm = load_entry(SEED, "gemm")
    gemm.__globals__.update(FEW_ROWS=64, MAX_SPLITS=8)
    return gemm


def test_as_shipped_every_shape_takes_the_large_tile_unsplit():
    plan = load_entry(SEED, "gemm").__globals__["plan"]
    for shape in SHAPES:
        build, _, splits = plan(*shape, H200_SMS)
        assert build.block_m == 128 and splits == 1, shape


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_kind_of_shape_takes_its_configuration(shape):
    build, units, splits = seed().__globals__["plan"](*shape, H200_SMS)
    block_m, split = SHAPES[shape]
    assert build.block_m == block_m and (splits > 1) == split, (shape, build.block_m, splits)
    assert splits <= -(-shape[2] // 64)


def test_the_bench_suite_is_never_split_and_few_tokens_always_are():
    plan = seed().__globals__["plan"]
    for case in load("gemm").cases("bench"):
        p = case.params
        assert plan(p["M"], p["N"], p["K"], H200_SMS)[2] == 1, case.name
    for case in load("gemm").cases("wide"):
        p = case.params
        if p["M"] <= 256 and p["N"] <= 10240:
            assert plan(p["M"], p["N"], p["K"], H200_SMS)[2] > 1, case.name


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
