"""gemm/cuda_wgmma reads a b given as the transpose of a contiguous [N, K] tensor (nn.Linear's weight.t()) where it
lies: each configuration's B_K_MAJOR twin compiles for Hopper without spills (CPU, nvcc), and on a GPU it gives
torch.matmul's answer for every kind of shape, the row-major path's answer, and allocates no copy of the weight."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch
from test_gemm_splitk import check_compiles_without_spills

from avo.evaluate.worker.loader import load_entry
from avo.tasks import load, relative_error

SEED = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
# (M, N, K): one per configuration plan() can choose, ragged edges and split-K included, and an odd K for the
# simple kernel (which TMA cannot address: it copies b into rows).
SHAPES = [
    (4096, 4096, 4096),    # the widest tile, unsplit
    (4096, 1024, 4096),    # a GQA key/value projection
    (77, 1000, 520),       # odd M, N past the last 64-row box of B
    (64, 4096, 1024),      # few tokens: 64 tiles of 64 x 64 (NARROW_SPLIT, too short to split)
    (64, 8704, 1024),      # few tokens: 68 tiles of 64 x 128
    (33, 2048, 20000),     # few tokens, ragged K, split-K (64 x 64)
    (33, 4096, 20000),     # the same on 64 x 128 tiles
    (256, 10240, 1024),    # 192 wide
    (300, 1000, 20000),    # 128 wide, ragged, split-K
    (17, 40, 36),          # K not a multiple of 8: the simple kernel
]


def _builds(g) -> list:
    return [g["_FEW"], *g["_LARGE"].values()]


@needs.nvcc
def test_every_configuration_has_a_k_major_twin_that_compiles_for_hopper_without_spills(tmp_path):
    from avo.profile.sass import sass_text, split_sass_functions

    g = load_entry(SEED, "gemm").__globals__
    builds = [build.k_major().build for build in _builds(g)]
    twins = {build.flags for build in builds}
    assert all("-DB_K_MAJOR=1" in flags for flags in twins) and len(twins) == len(_builds(g))
    # The twins, and one row-major build to show the difference (all of them compile in test_cuda_seeds.py).
    resources = check_compiles_without_spills(SEED, [*builds, _builds(g)[0].module.build], cubin_dir=tmp_path)
    # The twins' wgmma reads B K-major (no transpose bit); the row-major builds' reads it transposed.
    transposed = []
    for facts in (f for name, f in resources.items() if name.startswith("gemm_bf16")):
        hgmma = [line for line in split_sass_functions(sass_text(Path(facts["cubin"])))["gemm_bf16"].splitlines()
                 if "HGMMA" in line]
        assert hgmma and len({".tnspB" in line for line in hgmma}) == 1, facts["cubin"]
        transposed.append(".tnspB" in hgmma[0])
    assert transposed.count(False) == len(twins) and transposed.count(True) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_a_transposed_weight_is_read_in_place_and_gives_the_library_answer(shape, dtype):
    needs.module("cupy")
    gemm = load_entry(SEED, "gemm")
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(sum(shape))
    a = torch.randn((m, k), generator=gen, device="cuda", dtype=getattr(torch, dtype))
    weight = torch.randn((n, k), generator=gen, device="cuda", dtype=getattr(torch, dtype))  # nn.Linear's [N, K]
    b = weight.t()
    assert b.stride() == (1, k) and not b.is_contiguous()
    rows = gemm(a, b.contiguous())  # the layout the evaluator checks
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = gemm(a, b)
    torch.cuda.synchronize()
    grown = torch.cuda.max_memory_allocated() - before
    task = load("gemm")
    err = relative_error(out, task.reference(a, b))
    assert err <= task.tolerance(dtype), f"{shape} {dtype}: relative error {err:.3g}"
    assert relative_error(out, rows) <= task.tolerance(dtype), f"{shape} {dtype}: differs from the row-major path"
    if k % 8 == 0:
        # Only c was allocated (split-K's workspace was grown by the first call and kept); a copy of the weight,
        # alive beside c until the call returns, would have raised the peak by the weight's size too.
        assert grown < (out.numel() + weight.numel()) * out.element_size(), (shape, grown)
        planned = gemm.__globals__["_PLANS"]
        build = next(p[0] for key, p in planned.items() if key[:3] == shape)
        assert build._k_major is not None, "the B_K_MAJOR twin did not run"


@pytest.mark.gpu
def test_a_strided_b_that_is_not_a_transpose_is_copied_into_rows():
    needs.module("cupy")
    gemm = load_entry(SEED, "gemm")
    a = torch.randn((128, 256), device="cuda", dtype=torch.bfloat16)
    wide = torch.randn((256, 1024), device="cuda", dtype=torch.bfloat16)
    b = wide[:, ::2]  # neither rows nor the transpose of rows
    task = load("gemm")
    assert relative_error(gemm(a, b), task.reference(a, b)) <= task.tolerance("bfloat16")
