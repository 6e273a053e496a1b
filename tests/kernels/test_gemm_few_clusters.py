"""gemm/cuda_wgmma's tiles in pairs along N (CLUSTER_N 2: each block of a pair loads half of the tile's rows of A and
multicasts them to both, as cuBLAS's 64 x 64 tiles run in pairs at 64 x 8192 x 8192), the few-token tiles' (FEW) and
up to 256 rows the 128-row tiles' (ROWS256): where a knob asks for them every build of that entry takes them, the
plan counts pairs, and the builds compile for Hopper without spills; on a GPU each kind of work (whole tiles,
split-K, a split tail, stream-K, a pair's second tile past N, rows past M, an edge row, one K-step, B as
nn.Linear's weight.t()) is correct and bitwise repeatable, with one consumer or two splitting K."""

from __future__ import annotations

import shutil

import needs
import pytest
import torch
from test_gemm_splitk import (H200_SMS, SEED, arrivals_reset, check_compiles_without_spills, check_nvrtc_compiles,
                              check_reads_weight_in_place, check_repeatable, work)

from avo.agent.heuristic.knobs import render
from avo.evaluate.worker.loader import load_entry

VARIANTS = {
    "pairs": {"CLUSTER_N@few": 2},  # two consumers splitting K (WG_SPLIT_K, the default)
    "pairs-one": {"CLUSTER_N@few": 2, "WG_SPLIT_K@few": False},
    "pairs-stream": {"CLUSTER_N@few": 2, "STREAM@few": True, "STREAM_FROM@few": 1, "NARROW_WAVES@few": 0},
    "rows256-pairs": {"CLUSTER_N@rows256": 2},
}


def clustered(tmp_path, variant: str):
    folder = tmp_path / variant
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "kernel.py").write_text(render((folder / "kernel.py").read_text(), VARIANTS[variant]))
    return folder, load_entry(folder, "gemm")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_build_of_the_entry_takes_the_pairs(variant, tmp_path):
    g = clustered(tmp_path, variant)[1].__globals__
    few = [g["_FEW"], g["_NARROW"], g["_FEW_M64"], g["_NARROW_M64"]]
    paired, alone = (list(g["_ROWS256"].values()), few) if variant == "rows256-pairs" else (few, g["_ROWS256"].values())
    for build in paired:
        assert (build.cluster_m, build.cluster_n, build.cluster) == (1, 2, 2)
        assert build.defines["CLUSTER_N"] == 2
    assert all(b.cluster == 1 for b in (*g["_LARGE"].values(), *alone))
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
    (80, 4096, 2048): (64, "whole", 64),     # an edge row of 16 rows: its A is the first block's share alone
    (90, 2048, 20000): (128, "split", 16),   # the same, split (26 rows)
}
STREAMED = (64, 20000, 1000)  # "pairs-stream": 79 pairs of 64 x 128 tiles on 66 pairs of SMs
# (M, N, K) -> (width, work, units of two tiles, rows of M in the last tile row), under "rows256-pairs"
ROWS256_SHAPES = {
    (256, 8192, 8192): (128, "whole", 64, 0),
    (192, 4096, 4096): (128, "split", 32, 64),   # an edge row: the second block of each pair loads no A
    (160, 5120, 8192): (256, "split", 20, 32),   # an edge row, split in 3
    (256, 10240, 28672): (320, "split", 32, 0),  # the 320-wide tile
    (190, 21504, 8192): (256, "tail", 84, 62),   # an edge row, a split tail; 84 tiles: the last pair's second past N
    (200, 3000, 1000): (128, "whole", 24, 72),   # ragged M, N and K: a last tile row past half a tile
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_plan_counts_pairs(shape, tmp_path):
    g = clustered(tmp_path, "pairs")[1].__globals__
    plan = g["plan"](*shape, H200_SMS)
    width, kind, units = SHAPES[shape]
    assert (plan.build.block_m, plan.build.block_n, plan.build.cluster, work(plan), plan.tiles) == \
        (64, width, 2, kind, units), plan


def test_stream_k_deals_pairs(tmp_path):
    g = clustered(tmp_path, "pairs-stream")[1].__globals__
    plan = g["plan"](*STREAMED, H200_SMS)
    assert (plan.build.cluster, work(plan), plan.tiles) == (2, "stream", 79) and plan.stream <= H200_SMS // 2


def test_the_rows256_plan_counts_pairs(tmp_path):
    g = clustered(tmp_path, "rows256-pairs")[1].__globals__
    for shape, (width, kind, units, left) in ROWS256_SHAPES.items():
        plan = g["plan"](*shape, H200_SMS)
        assert (plan.build.block_m, plan.build.block_n, plan.build.cluster, work(plan), plan.tiles) == \
            (128, width, 2, kind, units), (shape, plan)
        assert shape[0] % plan.build.block_m == left, (shape, plan)


# the paired builds a variant declares: the four few-token ones (64 x 128 and 64 x 64, each at two depths), or the
# four widths of the 128-row tile up to 256 rows
BUILDS = {"pairs": ("-DBLOCK_M=64", 4), "pairs-one": ("-DBLOCK_M=64", 4), "rows256-pairs": ("-DBLOCK_M=128", 4)}


@needs.nvcc
@pytest.mark.parametrize("variant", list(BUILDS))
def test_the_paired_builds_compile_for_hopper_without_spills(variant, tmp_path):
    from avo.cuda import declared_builds

    folder, _ = clustered(tmp_path, variant)
    builds = [b for b in declared_builds(folder) if "-DCLUSTER_N=2" in b.flags]
    rows, count = BUILDS[variant]
    assert len(builds) == count and all(rows in b.flags for b in builds), [b.flags for b in builds]
    check_compiles_without_spills(folder, builds)


@needs.nvrtc
@pytest.mark.parametrize("variant", ["pairs", "rows256-pairs"])
def test_nvrtc_compiles_the_paired_builds(variant, tmp_path):
    """The wrapper compiles with NVRTC at run time (nvcc above only for ptxas's resource report)."""
    from avo.cuda import declared_builds

    folder, _ = clustered(tmp_path, variant)
    builds = [b for b in declared_builds(folder) if "-DCLUSTER_N=2" in b.flags]
    assert len(builds) == BUILDS[variant][1]
    check_nvrtc_compiles(builds)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_pairs_are_correct_and_bitwise_repeatable(variant, tmp_path):
    needs.module("cupy")
    gemm = clustered(tmp_path, variant)[1]
    shapes = {"pairs-stream": [STREAMED], "rows256-pairs": list(ROWS256_SHAPES)}.get(variant, list(SHAPES))
    for dtype in (torch.bfloat16, torch.float16):
        for shape in shapes:
            check_repeatable(gemm, shape, dtype, (variant, str(dtype), shape), repeats=3)
    assert arrivals_reset(gemm), "arrival counters left set"


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["pairs", "rows256-pairs"])
def test_pairs_read_a_transposed_weight_in_place(variant, tmp_path):
    """B as nn.Linear's weight.t(): the K-major twin's pairs give the row-major B's bits."""
    needs.module("cupy")
    shapes = list(ROWS256_SHAPES if variant == "rows256-pairs" else SHAPES)
    check_reads_weight_in_place(clustered(tmp_path, variant)[1], shapes, variant)
