"""The rule model on a B200: its target is read from the system prompt, points whose accumulators overflow tensor
memory are invalid there (and only there), and the starting points offered are the B200's, not Hopper's."""

from __future__ import annotations

from avo.agent.context import gpu_line
from avo.agent.heuristic import blackwell
from avo.agent.heuristic.knobs import parse_knobs, point_of
from avo.agent.heuristic.rules import Shape, infeasible, roles
from avo.agent.heuristic.search import PRESETS, Search
from avo.agent.models.heuristic import _arch, _smem_limit
from avo.gpus import PROFILES

GEMM = ("BLOCK_M = 128  # avo: tune 64 128 256\nBLOCK_N = 128  # avo: tune 64 128 256\n"
        "BLOCK_K = 64  # avo: tune 32 64\nnum_warps = 4  # avo: tune 4 8 16\nnum_stages = 2  # avo: tune 2 3 4\n"
        "GROUP_M = 8  # avo: tune 1 8\n")
ATTENTION = ("BLOCK_M = 128  # avo: tune 64 128 256\nBLOCK_N = 64  # avo: tune 32 64 128 256\n"
             "num_warps = 8  # avo: tune 4 8 16\nnum_stages = 2  # avo: tune 1 2 3\n")


def test_the_target_and_limits_are_read_from_the_b200s_prompt_line():
    line = gpu_line(PROFILES["b200"])
    assert "256 KB tensor memory per SM" in line
    assert _arch(line) == "sm_100a" and _smem_limit(line) == 227 * 1024
    assert _arch(gpu_line(PROFILES["h200"])) == "sm_90a" and "tensor memory" not in gpu_line(PROFILES["h200"])


def test_an_attention_tile_overflowing_tensor_memory_is_invalid_on_b200_only():
    knobs = parse_knobs(ATTENTION)
    point = dict(point_of(knobs), BLOCK_M=256, BLOCK_N=256, num_warps=16)
    # two 128-lane slabs of S (256 columns) and O (128 columns): 768 columns > 512
    assert blackwell.tmem_columns("attention", 256, 256, 128) == 768
    b200 = Shape(kind="attention", roles=roles(knobs), arch="sm_100a")
    hopper = Shape(kind="attention", roles=roles(knobs))
    assert infeasible(b200, point) == "needs 768 tensor-memory columns > 512 per SM (tcgen05 accumulators)"
    assert infeasible(hopper, point) is None  # the same point is only register-limited on Hopper, and fits
    assert infeasible(b200, dict(point, BLOCK_N=128)) is None  # 2 x (128 + 128) = 512 columns


def test_the_register_limit_still_applies_on_b200():
    knobs = parse_knobs(GEMM)
    shape = Shape(kind="gemm", roles=roles(knobs), arch="sm_100a")
    # 256x256 fp32 over 4 warps: 512 registers per thread when the epilogue loads the tile
    assert "registers per thread > 255" in infeasible(shape, dict(point_of(knobs), BLOCK_M=256, BLOCK_N=256))


def test_the_b200_search_offers_the_b200_starting_points():
    knobs = parse_knobs(GEMM)
    for arch, expected in (("sm_100a", blackwell.PRESETS["gemm"]), ("sm_90a", PRESETS["gemm"])):
        search = Search(knobs=knobs, shape=Shape(kind="gemm", roles=roles(knobs), arch=arch),
                        incumbent=dict(point_of(knobs), BLOCK_N=64, num_stages=2), incumbent_fitness=1.0)
        labels = {m.label for m in search._presets()}
        assert labels and labels <= {label for label, _ in expected}, arch


def test_every_b200_start_is_valid_on_b200():
    for kind, presets in blackwell.PRESETS.items():
        knobs = parse_knobs(GEMM if kind == "gemm" else ATTENTION)
        shape = Shape(kind=kind, roles=roles(knobs), arch="sm_100a")
        for label, targets in presets:
            point = {shape.roles[role]: value for role, value in targets.items() if role in shape.roles}
            assert infeasible(shape, dict(point_of(knobs), **point)) is None, label
            assert "not yet measured on a B200" in label
