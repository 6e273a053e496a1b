"""gemm/cuda_wgmma's edge rows: a last tile row that holds half a tile of rows of M or fewer (192 rows: 128 + 64; 96
rows on the 64-row tiles: 64 + 32) loads only those, one box of half the tile's rows of A through its own tensor map
(gemm.cu's EDGE_ROWS), where a box half past M ran slow. On the CPU the plan gives the shapes below each kind of
work, with an edge row and without (the shipped builds compile without spills in test_cuda_seeds.py); on a GPU such
rows, in every kind of work and with clusters (whose second tile may lie wholly past M), are correct and bitwise
repeatable, B row-major or read as the transpose of a [N, K] weight."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch
from test_gemm_epilogue_rounds import seed_with
from test_gemm_splitk import arrivals_reset, check_reads_weight_in_place, check_repeatable, check_shipped, work

from avo.evaluate.worker.loader import load_entry

FOLDER = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
# (M, N, K): (width, work, rows of M in the last tile row) as the shipped plan takes them
SHAPES = {
    (192, 2048, 1024): (128, "whole", 64),  # rows256's 128-wide build
    (160, 5120, 8192): (256, "split", 32),
    (190, 21504, 8192): (256, "tail", 62),
    (9000, 8192, 4096): (256, "stream", 40),
    (1080, 4000, 1000): (320, "whole", 56),  # ragged N and K too
    (200, 21504, 8192): (256, "tail", 72),  # past half a tile: the whole box, as before
    (100, 57344, 1024): (256, "whole", 100),  # few-token rows past one wave of 64-row tiles
    # the 64-row tiles: a 32-row box of A where the last tile row holds 32 rows or fewer
    (96, 4096, 1024): (64, "whole", 32),
    (16, 8192, 2048): (64, "whole", 16),  # the only tile row
    (80, 2048, 20000): (128, "split", 16),
    (24, 3000, 1000): (64, "whole", 24),  # ragged N and K too
    (48, 8192, 1024): (64, "whole", 48),  # past half a tile: the whole box
}
CLUSTERED = [(192, 4096, 4096), (320, 8192, 1024), (1090, 4096, 1024)]  # split; a tile past M; whole


def test_the_shapes_take_each_kind_of_work_with_an_edge_row_or_without():
    g = load_entry(FOLDER, "gemm").__globals__
    for (m, n, k), (width, kind, left) in SHAPES.items():
        planned = g["plan"](m, n, k, 132)
        assert (planned.build.block_n, work(planned), m % planned.build.block_m) == (width, kind, left), (m, n, k)


def test_clustered_shapes_reach_an_edge_row_and_a_tile_past_m(tmp_path):
    g = seed_with(tmp_path, {"CLUSTER_M": 2}, "clustered")[1].__globals__
    for m, n, k in CLUSTERED:
        assert g["plan"](m, n, k, 132).build.cluster_m == 2, (m, n, k)
    planned = g["plan"](320, 8192, 1024, 132)  # three tile rows in pairs: the fourth lies wholly past M
    assert planned.tiles // -(-8192 // planned.build.block_n) * 2 * 128 - 320 >= 128


@pytest.mark.gpu
@pytest.mark.parametrize("shape", list(SHAPES))
def test_edge_rows_are_correct_and_bitwise_repeatable(shape):
    for dtype in (torch.bfloat16, torch.float16):
        check_shipped(FOLDER, shape, dtype)


@pytest.mark.gpu
def test_edge_rows_with_clusters_are_correct_and_bitwise_repeatable(tmp_path):
    needs.module("cupy")
    _, gemm = seed_with(tmp_path, {"CLUSTER_M": 2}, "clustered")
    for shape in CLUSTERED:
        check_repeatable(gemm, shape, torch.bfloat16, ("clustered", shape))
    assert arrivals_reset(gemm), "clustered: arrival counters left set"


@pytest.mark.gpu
def test_edge_rows_read_a_transposed_weight_in_place():
    needs.module("cupy")
    check_reads_weight_in_place(load_entry(FOLDER, "gemm"), [(192, 2048, 1024), (160, 5120, 8192), (190, 21504, 8192)],
                                "edge")
