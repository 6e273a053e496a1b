"""gemm/cuda_wgmma's few-token tiles in pairs along N (FEW CLUSTER_N 2: each block of a pair loads half of the tile's
rows of A and multicasts them to both, as cuBLAS's 64 x 64 tiles run in pairs at 64 x 8192 x 8192): where the knob
asks for them every 64-row build takes them, the plan counts pairs, and the builds compile for Hopper without
spills; on a GPU each kind of work (whole tiles, split-K, stream-K, a pair's second tile past N, rows past M, one
K-step, B as nn.Linear's weight.t()) is correct and bitwise repeatable, with one consumer or two splitting K."""

from __future__ import annotations

import shutil

import needs
import pytest
import torch
from test_gemm_splitk import H200_SMS, SEED, arrivals_reset, check_reads_weight_in_place, check_repeatable, work

from avo.agent.heuristic.knobs import render
from avo.evaluate.worker.loader import load_entry

VARIANTS = {
    "pairs": {"CLUSTER_N@few": 2},  # two consumers splitting K (WG_SPLIT_K, the default)
    "pairs-one": {"CLUSTER_N@few": 2, "WG_SPLIT_K@few": False},
    "pairs-stream": {"CLUSTER_N@few": 2, "STREAM@few": True, "STREAM_FROM@few": 1, "NARROW_WAVES@few": 0},
}


def clustered(tmp_path, variant: str):
    folder = tmp_path / variant
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "kernel.py").write_text(render((folder / "kernel.py").read_text(), VARIANTS[variant]))
    return folder, load_entry(folder, "gemm")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_few_token_build_takes_the_pairs(variant, tmp_path):
    g = clustered(tmp_path, variant)[1].__globals__
    for build in (g["_FEW"], g["_NARROW"], g["_FEW_M64"], g["_NARROW_M64"]):
        assert (build.cluster_m, build.cluster_n, build.cluster) == (1, 2, 2)
        assert build.defines["CLUSTER_N"] == 2
    assert all(b.cluster == 1 for b in (*g["_LARGE"].values(), *g["_ROWS256"].values()))
    default = load_entry(SEED, "gemm").__globals__["_NARROW"]
    assert default.cluster == 1 and "CLUSTER_N" not in default.defines  # off by default


# (M, N, K) -> (width, work, units of two tiles): the shapes the GPU tests below run, under "pairs"
SHAPES = {
    (64, 8192, 8192): (64, "whole", 64),     # the 128 blocks of cuBLAS's grid, in pairs
    (40, 8200, 1000): (64, "whole", 65),     # ragged M, N and K: the last pair's second tile lies past N
    (33, 2048, 20000): (64, "split", 16),    # ragged M and K, split
    (128, 2048, 16384): (128, "split", 16),  # two tile rows, each its own pair
    (100, 1000, 3000): (64, "whole", 16),    # ragged M and N inside a pair
    (64, 4096, 64): (64, "whole", 32),       # one K-step: the second consumer takes none
}
STREAMED = (64, 20000, 1000)  # "pairs-stream": 79 pairs of 64 x 128 tiles on 66 pairs of SMs


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_plan_counts_pairs(shape, tmp_path):
    g = clustered(tmp_path, "pairs")[1].__globals__
    plan = g["plan"](*shape, H200_SMS)
    width, kind, units = SHAPES[shape]
    assert (plan.build.block_m, plan.build.block_n, work(plan), plan.tiles) == (64, width, kind, units), plan
    assert min(plan.units, H200_SMS // 2) * 2 <= H200_SMS


def test_stream_k_deals_pairs(tmp_path):
    g = clustered(tmp_path, "pairs-stream")[1].__globals__
    plan = g["plan"](*STREAMED, H200_SMS)
    assert (plan.build.cluster, work(plan), plan.tiles) == (2, "stream", 79) and plan.stream <= H200_SMS // 2


@needs.nvcc
@pytest.mark.parametrize("variant", ["pairs", "pairs-one"])
def test_the_paired_builds_compile_for_hopper_without_spills(variant, tmp_path):
    from avo.cuda import declared_builds
    from avo.evaluate.cuda_compile import compile_check

    folder, _ = clustered(tmp_path, variant)
    builds = [b for b in declared_builds(folder) if "-DCLUSTER_N=2" in b.flags]
    assert len(builds) == 3 and all("-DBLOCK_M=64" in b.flags for b in builds), [b.flags for b in builds]
    check = compile_check(folder, "sm_90a", builds=builds)
    assert check.ok, check.log
    for name, facts in check.resources.items():
        assert facts["spill_store_bytes"] == facts["spill_load_bytes"] == 0, f"{name} spills: {facts}"
        assert facts["wgmma_serialized"] is None, f"{name}: {facts['wgmma_serialized']}"


@needs.nvrtc
def test_nvrtc_compiles_the_paired_builds(tmp_path):
    """The wrapper compiles with NVRTC at run time (nvcc above only for ptxas's resource report)."""
    from avo.cuda import CudaModule, declared_builds

    folder, _ = clustered(tmp_path, "pairs")
    builds = [b for b in declared_builds(folder) if "-DCLUSTER_N=2" in b.flags]
    assert len(builds) == 3
    for build in builds:
        assert CudaModule(build).compile("sm_90a")[:4] == b"\x7fELF", build.flags


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_pairs_are_correct_and_bitwise_repeatable(variant, tmp_path):
    needs.module("cupy")
    gemm = clustered(tmp_path, variant)[1]
    shapes = [STREAMED] if variant == "pairs-stream" else list(SHAPES)
    for dtype in (torch.bfloat16, torch.float16):
        for shape in shapes:
            check_repeatable(gemm, shape, dtype, (variant, str(dtype), shape), repeats=3)
    assert arrivals_reset(gemm), "arrival counters left set"


@pytest.mark.gpu
def test_pairs_read_a_transposed_weight_in_place(tmp_path):
    """B as nn.Linear's weight.t(): the K-major twin's pairs give the row-major B's bits."""
    needs.module("cupy")
    check_reads_weight_in_place(clustered(tmp_path, "pairs")[1], list(SHAPES), "pairs")
