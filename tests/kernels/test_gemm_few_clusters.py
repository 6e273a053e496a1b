"""gemm/cuda_wgmma's few-token tiles in thread-block clusters (FEW CLUSTER_M x CLUSTER_N: each block loads a share
of A's rows and multicasts it along its cluster row, and a share of B down its column, whole 64-column boxes or, on
a 64-wide tile, half of each box's rows): where the knobs ask for them both 64-row builds take them, the plan counts
clusters, and the builds compile for Hopper without spills; on a GPU each kind of work (whole tiles, split-K,
stream-K, a cluster's tiles past M or N, B as nn.Linear's weight.t()) is correct and bitwise repeatable."""

from __future__ import annotations

import shutil

import needs
import pytest
import torch
from test_gemm_splitk import H200_SMS, SEED, arrivals_reset, check_repeatable, work

from avo.agent.heuristic.knobs import render
from avo.evaluate.worker.loader import load_entry

# 2 x 4 as cuBLAS runs 64 x 64 tiles at 128 x 3584 x 3584; pairs along N with split consumers; pairs along M alone,
# which share B by rows of each box on the 64-wide tile and by whole boxes on the 128-wide one.
VARIANTS = {
    "2x4": {"CLUSTER_M@few": 2, "CLUSTER_N@few": 4},
    "1x2-split": {"CLUSTER_N@few": 2, "WG_SPLIT_K@few": True},
    "2x1": {"CLUSTER_M@few": 2},
}


def clustered(tmp_path, variant: str, **more):
    folder = tmp_path / variant
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    knobs = {**VARIANTS[variant], "FEW_ROWS": 128, **more}
    (folder / "kernel.py").write_text(render((folder / "kernel.py").read_text(), knobs))
    return folder, load_entry(folder, "gemm")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_both_few_token_builds_take_the_cluster(variant, tmp_path):
    g = clustered(tmp_path, variant)[1].__globals__
    m, n = VARIANTS[variant].get("CLUSTER_M@few", 1), VARIANTS[variant].get("CLUSTER_N@few", 1)
    for build in (g["_FEW"], g["_NARROW"]):
        assert (build.cluster_m, build.cluster_n, build.cluster) == (m, n, m * n)
        assert build.defines["CLUSTER_M"] == m and build.defines.get("CLUSTER_N", 1) == n
    assert all(b.cluster == 1 for b in g["_LARGE"].values())
    default = load_entry(SEED, "gemm").__globals__["_FEW"]
    assert default.cluster == 1 and "CLUSTER_N" not in default.defines  # off by default


# (M, N, K) -> (rows, width, work, clusters) with 2 x 4 clusters, FEW_ROWS 128.
SHAPES = {
    (128, 3584, 3584): (64, 64, "whole", 14),   # cuBLAS's grid: 14 clusters of 8 tiles
    (64, 8192, 8192): (64, 128, "whole", 16),   # 64 rows: each cluster's second row is past M
    (40, 8200, 1000): (64, 128, "stream", 17),  # 17 clusters on 16: stream-K; ragged M, N (one real column of 4), K
    (33, 2048, 20000): (64, 128, "split", 4),   # ragged M and K, split
    (128, 2048, 16384): (64, 128, "split", 4),
    (100, 1000, 3000): (64, 128, "whole", 2),   # ragged M and N inside a cluster
    (64, 4096, 64): (64, 64, "whole", 16),      # one K-step
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_plan_counts_clusters(shape, tmp_path):
    g = clustered(tmp_path, "2x4")[1].__globals__
    plan = g["plan"](*shape, H200_SMS)
    rows, width, kind, units = SHAPES[shape]
    assert (plan.build.block_m, plan.build.block_n, work(plan)) == (rows, width, kind), (shape, plan)
    assert plan.tiles == units and min(plan.units, H200_SMS // 8) * 8 <= H200_SMS, (shape, plan)


@needs.nvcc
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_clustered_builds_compile_for_hopper_without_spills(variant, tmp_path):
    from avo.cuda import declared_builds
    from avo.evaluate.cuda_compile import compile_check

    folder, _ = clustered(tmp_path, variant)
    m = VARIANTS[variant].get("CLUSTER_M@few", 1)
    builds = [b for b in declared_builds(folder) if f"-DCLUSTER_M={m}" in b.flags and "-DBLOCK_M=64" in b.flags]
    assert len(builds) == 2, [b.flags for b in declared_builds(folder)]
    check = compile_check(folder, "sm_90a", builds=builds)
    assert check.ok, check.log
    for name, facts in check.resources.items():
        assert facts["spill_store_bytes"] == facts["spill_load_bytes"] == 0, f"{name} spills: {facts}"
        assert facts["wgmma_serialized"] is None, f"{name}: {facts['wgmma_serialized']}"


@needs.nvrtc
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_nvrtc_compiles_the_clustered_builds(variant, tmp_path):
    """The wrapper compiles with NVRTC at run time (nvcc above only for ptxas's resource report)."""
    from avo.cuda import CudaModule, declared_builds

    folder, _ = clustered(tmp_path, variant)
    builds = [b for b in declared_builds(folder) if "-DBLOCK_M=64" in b.flags]
    assert len(builds) == 2
    for build in builds:
        assert CudaModule(build).compile("sm_90a")[:4] == b"\x7fELF", build.flags


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_clusters_are_correct_and_bitwise_repeatable(variant, tmp_path):
    needs.module("cupy")
    gemm = clustered(tmp_path, variant)[1]
    for dtype in (torch.bfloat16, torch.float16):
        for shape in SHAPES:
            check_repeatable(gemm, shape, dtype, (variant, str(dtype), shape), repeats=3)
    assert arrivals_reset(gemm), "arrival counters left set"


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_clusters_read_a_transposed_weight_in_place(variant, tmp_path):
    """B as nn.Linear's weight.t(): each block's share of an [N, K] B's rows gives the row-major B's bits."""
    needs.module("cupy")
    gemm = clustered(tmp_path, variant)[1]
    for m, n, k in ((128, 3584, 3584), (40, 8200, 1000), (33, 2048, 20000), (100, 1000, 3000)):
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn((m, k), generator=gen, device="cuda", dtype=torch.bfloat16)
        weight = torch.randn((n, k), generator=gen, device="cuda", dtype=torch.bfloat16)
        assert torch.equal(gemm(a, weight.t()), gemm(a, weight.t().contiguous())), (variant, m, n, k)
