"""Reading and setting `# avo: tune` knobs: the shipped seeds, and every syntax a seed may use."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avo.agent.heuristic.knobs import (
    KnobError, format_point, parse_knobs, parse_point_tag, point_key, point_of, render,
)
from avo.agent.heuristic.rules import Shape, infeasible, roles, smem_bytes

KERNELS = Path(__file__).resolve().parents[2] / "kernels"

FIXTURE = '''
BLOCK_M = 64  # avo: tune 32 64 128
BLOCK_N: tl.constexpr = 128   # avo: tune 64, 128, 256
CONFIG = {"BLOCK_K": 32,  # avo: tune 16 32 64
          'GROUP_M': 8,  # avo: tune 1 4 8
}
def launch(a, b, num_warps=4,  # avo: tune 2 4 8
           num_stages=2):  # avo: tune 2 3 4
    pass
USE_TMA = False  # avo: tune True False
PRECISION = "tf32"  # avo: tune tf32 ieee
SCALE = 1.5  # avo: tune 1 1.5 2
def kernel(X, BLOCK_D: tl.constexpr = 64):  # avo: tune 32 64
    pass
NOT_A_KNOB = 3  # tune 1 2 3
'''


def test_every_syntax_of_the_fixture_is_found_with_its_type():
    knobs = {k.name: k for k in parse_knobs(FIXTURE)}
    assert list(knobs) == ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages", "USE_TMA",
                           "PRECISION", "SCALE", "BLOCK_D"]
    assert knobs["BLOCK_N"].choices == (64, 128, 256)
    assert knobs["USE_TMA"].value is False and knobs["USE_TMA"].choices == (True, False)
    assert knobs["PRECISION"].choices == ("tf32", "ieee")
    assert knobs["SCALE"].choices == (1.0, 1.5, 2.0)
    assert knobs["num_stages"].neighbours() == [3]
    assert knobs["BLOCK_N"].neighbours() == [64, 256]


def test_render_changes_only_the_values_and_keeps_valid_python():
    point = dict(point_of(parse_knobs(FIXTURE)), BLOCK_M=128, BLOCK_K=64, num_stages=4, USE_TMA=True,
                 PRECISION="ieee", SCALE=2.0, BLOCK_D=32)
    out = render(FIXTURE, point)
    ast.parse(out)
    assert point_of(parse_knobs(out)) == point
    assert 'PRECISION = "ieee"  # avo: tune tf32 ieee' in out
    assert "           num_stages=4):  # avo: tune 2 3 4" in out
    changed = [(a, b) for a, b in zip(FIXTURE.splitlines(), out.splitlines()) if a != b]
    assert len(changed) == 7


def test_a_value_outside_its_list_is_kept_as_a_choice():
    (knob,) = parse_knobs("BLOCK_M = 96  # avo: tune 64 128\n")
    assert knob.choices == (64, 96, 128) and knob.neighbours() == [64, 128]


def test_an_unknown_knob_or_broken_source_is_refused():
    with pytest.raises(KnobError):
        render("BLOCK_M = 64  # avo: tune 64 128\n", {"BLOCK_Q": 128})
    with pytest.raises(KnobError):
        render("BLOCK_M = 64  # avo: tune 64 128 oops(\n", {"BLOCK_M": "oops("})


@given(st.dictionaries(st.sampled_from(["BLOCK_M", "num_warps", "FLAG", "MODE"]),
                       st.one_of(st.integers(0, 4096), st.booleans(), st.sampled_from(["ieee", "tf32", "a b"])),
                       min_size=1))
@settings(max_examples=60, deadline=None)
def test_point_tags_round_trip(point):
    assert parse_point_tag(f"BLOCK_M 64 -> 128: reuse; expect +10% {format_point(point)}") == point


@given(st.dictionaries(st.text("ABCDEFGHIJ_@#", min_size=1, max_size=12),
                       st.one_of(st.integers(0, 4096), st.booleans(), st.floats(0, 4), st.text(max_size=4)),
                       max_size=12))
@settings(max_examples=60, deadline=None)
def test_a_point_key_is_the_plain_tuple_with_its_hash_kept(point):
    key = point_key(point)
    plain = tuple(sorted((k, type(v).__name__, v) for k, v in point.items()))
    assert key == plain and hash(key) == hash(plain) == hash(key)  # found under either in a dict of trials
    assert point_key(dict(reversed(point.items()))) == key
    assert {plain: 1}[key] == 1 and {key: 1}[plain] == 1


@pytest.mark.parametrize("seed", ["gemm/triton_naive", "gemm/triton_tiled", "attention/triton_naive",
                                  "attention/triton_fa2"])
def test_shipped_seeds_expose_their_tile_knobs(seed):
    path = KERNELS / seed / "kernel.py"
    knobs = parse_knobs(path.read_text())
    found = roles(knobs)
    assert {"bm", "bn", "warps", "stages"} <= set(found), found
    if seed.startswith("gemm"):
        assert "bk" in found
    kind = seed.split("/")[0]
    shape = Shape(kind=kind, roles=found)
    assert infeasible(shape, point_of(knobs)) is None, "the seed itself must fit"
    for knob in knobs:
        ast.parse(render(path.read_text(), {knob.name: knob.choices[-1]}))


def test_naive_gemm_seed_knobs_are_the_expected_ones():
    path = KERNELS / "gemm/triton_naive/kernel.py"
    point = point_of(parse_knobs(path.read_text()))
    assert point == {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "NUM_WARPS": 4, "NUM_STAGES": 2, "GROUP_M": 1}


def test_shared_memory_estimate_matches_the_known_limits():
    knobs = parse_knobs("BLOCK_M = 128  # avo: tune 128 256\nBLOCK_N = 256  # avo: tune 128 256\n"
                        "BLOCK_K = 64  # avo: tune 64\nnum_stages = 4  # avo: tune 3 4 5\n")
    shape = Shape(kind="gemm", roles=roles(knobs))
    point = point_of(knobs)
    assert smem_bytes(shape, point) == (128 * 64 + 64 * 256) * 4 * 2  # 192 KB: fits in 227
    assert infeasible(shape, point) is None
    assert "shared memory" in infeasible(shape, dict(point, num_stages=5))


def test_naive_attention_seed_exposes_its_structural_flags_off_with_readable_reasons():
    from avo.agent.heuristic.speed import estimate

    knobs = parse_knobs((KERNELS / "attention/triton_naive/kernel.py").read_text())
    point = point_of(knobs)
    assert {point[name] for name in ("EXP2", "MASK_SPLIT", "HEAVY_FIRST", "FMA_SCALE")} == {False}
    shape = Shape(kind="attention", roles=roles(knobs))
    for name, words in (("EXP2", "ex2"), ("MASK_SPLIT", "pay for masks"), ("HEAVY_FIRST", "most keys"),
                        ("FMA_SCALE", "multiply-add")):
        guess = estimate(shape, point, dict(point, **{name: True}), None)
        assert guess.gain > 0 and words in guess.reason, (name, guess)


def test_a_warp_specialized_cuda_seed_is_read_with_its_fixed_constants():
    """cuda_wgmma fixes BLOCK_K by its swizzle and runs two consumer warpgroups: the model reads both from plain
    constants, so the seed's 128x256 tile counts 128 accumulators per thread (8 MMA warps), not 256 (4 warps)."""
    from avo.agent.heuristic.rules import accumulator_registers, fixed_roles
    from avo.agent.heuristic.speed import estimate

    text = (KERNELS / "gemm/cuda_wgmma/kernel.py").read_text()
    knobs = parse_knobs(text)
    shape = Shape(kind="gemm", roles=roles(knobs), fixed=fixed_roles(text, knobs))
    point = point_of(knobs)
    assert shape.fixed == {"bk": 64, "consumers": 2}
    assert accumulator_registers(shape, point) == 128 and infeasible(shape, point) is None
    # three stages of A and B plus the C tile staged for the TMA store: what kernel.py asks for, less its 2 KB
    assert smem_bytes(shape, point) == (3 * (128 * 64 + 64 * 256) + 128 * 256) * 2
    assert "shared memory" in infeasible(shape, dict(point, STAGES=4))
    assert infeasible(shape, dict(point, STAGES=4, TMA_STORE=False)) is None
    assert infeasible(shape, dict(point, BLOCK_M=256, BLOCK_N=128)) is None
    # C stored in two rounds (EPILOGUE_SPLIT) stages half the tile: room for a fourth stage
    assert shape.roles["epilogue_split"] == "EPILOGUE_SPLIT"
    rounds = dict(point, STAGES=4, EPILOGUE_SPLIT=2)
    assert smem_bytes(shape, rounds) == (4 * (128 * 64 + 64 * 256) + 128 * 256 // 2) * 2
    assert infeasible(shape, rounds) is None and infeasible(shape, dict(rounds, STAGES_192=5)) is None
    off = estimate(shape, dict(point, TMA_STORE=False), point, None)
    assert off.gain > 0 and "copy engine stores C" in off.reason
    assert "multicasts" in estimate(shape, point, dict(point, CLUSTER_M=2), None).reason


def test_a_narrower_widths_own_stages_are_read_at_that_width():
    """cuda_wgmma's STAGES_192 and STAGES_128 are the pipeline depths of its narrower tiles: the model weighs them
    by the pipeline table and checks their shared memory at their own width (4 stages fit a 192-wide tile beside
    its C tile, where they would not fit the 256-wide one), and the first move of the seed is the 192-wide tile's
    fourth stage (on the H200: 0.968 against 0.921x cuBLAS side by side at 1024 x 3072 x 2048)."""
    from avo.agent.heuristic.rules import fixed_roles, width_stages
    from avo.agent.heuristic.search import Search
    from avo.agent.heuristic.speed import estimate

    text = (KERNELS / "gemm/cuda_wgmma/kernel.py").read_text()
    knobs = [k for k in parse_knobs(text) if k.bucket is None]
    shape = Shape(kind="gemm", roles=roles(knobs), fixed=fixed_roles(text, knobs))
    point = point_of(knobs)
    assert width_stages(shape, point) == {192: 3, 160: 5, 128: 6}
    assert width_stages(shape, dict(point, BLOCK_N=192)) == {160: 5, 128: 6}  # 192 the widest: STAGES serves it
    deeper = estimate(shape, point, dict(point, STAGES_192=4), None)
    assert deeper.gain > 0 and "192-wide tile's 3 -> 4 stages" in deeper.reason
    assert infeasible(shape, dict(point, STAGES_192=4)) is None
    assert "shared memory" in infeasible(shape, dict(point, STAGES=4))
    assert "192-wide tile's 5 stages" in infeasible(shape, dict(point, STAGES_192=5))
    first = Search(knobs=knobs, shape=shape, incumbent=point, incumbent_fitness=1.0).next_move()
    assert first.changes == {"STAGES_192": (3, 4)}, first.describe()


def test_a_narrower_tiles_stages_are_counted_in_bytes_in_flight():
    """A stage of the 128-wide tile holds two thirds of a 256-wide one's bytes, so its fifth stage is expected to pay
    (on the H200: 0.918 against 0.899x cuBLAS at 1024 x 2048 x 8192) and a sixth less than the fifth (0.914); a move
    of BLOCK_N is not credited with the pipeline of a width it stops reading as narrower."""
    from avo.agent.heuristic.rules import fixed_roles
    from avo.agent.heuristic.speed import estimate

    text = (KERNELS / "gemm/cuda_wgmma/kernel.py").read_text()
    knobs = [k for k in parse_knobs(text) if k.bucket is None]
    shape = Shape(kind="gemm", roles=roles(knobs), fixed=fixed_roles(text, knobs))
    point = dict(point_of(knobs), STAGES_128=4)  # the depth those figures were measured from (it ships 6)
    fifth = estimate(shape, point, dict(point, STAGES_128=5), None).gain
    sixth = estimate(shape, dict(point, STAGES_128=5), dict(point, STAGES_128=6), None).gain
    assert fifth > 0.02 and 0 <= sixth < fifth / 2, (fifth, sixth)
    narrower = estimate(shape, point, dict(point, BLOCK_N=192), None)
    assert narrower.gain < 0 and "operand reuse" in narrower.reason


def test_a_per_shape_entry_stands_for_its_bucket_only():
    """cuda_wgmma's few-token entry (BLOCK_N@few) comes first in the file: the whole kernel is still read with the
    shared 128x256 tile, and a move of the few bucket with its own entry."""
    knobs = parse_knobs((KERNELS / "gemm/cuda_wgmma/kernel.py").read_text())
    assert roles(knobs)["bn"] == "BLOCK_N" and roles(knobs)["stages"] == "STAGES"
    few = [k for k in knobs if k.bucket in (None, "few")]
    assert roles(few, "few")["bn"] == "BLOCK_N@few" and roles(few, "few")["stages"] == "STAGES@few"


def test_an_epilogue_split_frees_shared_memory_for_another_stage():
    text = (KERNELS / "gemm/triton_tma_persistent/kernel.py").read_text()
    knobs = parse_knobs(text)
    shape = Shape(kind="gemm", roles=roles(knobs))
    point = point_of(knobs)
    assert shape.roles["epilogue_split"] == "EPILOGUE_SPLIT" and infeasible(shape, point) is None
    assert "shared memory" in infeasible(shape, dict(point, NUM_STAGES=4))
    assert infeasible(shape, dict(point, NUM_STAGES=4, EPILOGUE_SPLIT=2)) is None


def test_a_deeper_ring_that_does_not_fit_is_repaired_by_an_epilogue_split():
    """A move to more stages than fit beside the whole C tile is made with C stored in slices (the search's repair
    of a move that set the stages), on a Triton seed and on cuda_wgmma, whose 256-wide tile then takes 4 stages."""
    from avo.agent.heuristic.rules import fixed_roles
    from avo.agent.heuristic.search import Search

    for seed, stages in (("triton_tma_persistent", "NUM_STAGES"), ("cuda_wgmma", "STAGES")):
        text = (KERNELS / "gemm" / seed / "kernel.py").read_text()
        knobs = [k for k in parse_knobs(text) if k.bucket is None]
        shape = Shape(kind="gemm", roles=roles(knobs), fixed=fixed_roles(text, knobs))
        point = point_of(knobs)
        search = Search(knobs=knobs, shape=shape, incumbent=point, incumbent_fitness=1.0)
        deeper = point[stages] + 1
        assert infeasible(shape, dict(point, **{stages: deeper})), seed
        move = search._candidate({stages: deeper}, "single")
        assert move is not None and move.changes == {stages: (deeper - 1, deeper), "EPILOGUE_SPLIT": (1, 2)}, seed
        assert infeasible(shape, move.point) is None


def test_the_fa3_attention_seed_is_read_as_warp_specialized():
    """cuda_fa3 keeps every K/V stage resident (a producer fills the ring), gives its consumers 240 registers, and
    its ORDER, OVERLAP and PINGPONG knobs carry the priors measured on the H200 (each one off, or ORDER 2, lost)."""
    from avo.agent.heuristic.rules import accumulator_registers, fixed_roles
    from avo.agent.heuristic.speed import estimate

    text = (KERNELS / "attention/cuda_fa3/kernel.py").read_text()
    knobs = parse_knobs(text)
    shape = Shape(kind="attention", roles=roles(knobs), fixed=fixed_roles(text, knobs))
    point = point_of(knobs)
    assert shape.fixed == {"bm": 128, "consumers": 2}
    assert shape.roles["bn"] == "BLOCK_N" and shape.roles["order"] == "ORDER"
    assert smem_bytes(shape, point) == (128 * 128 + 2 * 2 * 192 * 128) * 2  # kernel.py's figure, less its 2 KB
    assert accumulator_registers(shape, point) == 160 and infeasible(shape, point) is None
    assert "shared memory" in infeasible(shape, dict(point, STAGES=3))
    assert infeasible(shape, dict(point, STAGES=3, BLOCK_N=128)) is None
    for change, words in (({"OVERLAP": False}, "OVERLAP off"), ({"PINGPONG": False}, "PINGPONG off"),
                          ({"ORDER": 2}, "K/V leave L2"), ({"BLOCK_N": 128}, "K/V reloads")):
        guess = estimate(shape, point, dict(point, **change), None)
        assert guess.gain < 0 and words in guess.reason, (change, guess)
    on = estimate(shape, dict(point, OVERLAP=False), point, None)
    assert on.gain > 0 and "softmax runs while" in on.reason


def test_the_fa3_seeds_short_sequence_knobs_say_what_they_trade():
    """Q_BUFFERS, O_TMA and CAUSAL_DYNAMIC are read for what they are: a second Q tile and O's staging take shared
    memory as a K/V stage does (neither fits beside the shared 192-wide tiles), and each move's reason names its
    effect rather than a generic one; STREAM_LANES in the GEMM seed says what one lane per run costs."""
    from avo.agent.heuristic.rules import fixed_roles
    from avo.agent.heuristic.speed import estimate

    text = (KERNELS / "attention/cuda_fa3/kernel.py").read_text()
    knobs = parse_knobs(text)
    shape = Shape(kind="attention", roles=roles(knobs), fixed=fixed_roles(text, knobs))
    point = point_of(knobs)
    assert (shape.roles["q_buffers"], shape.roles["o_store"]) == ("Q_BUFFERS", "O_TMA")
    base = smem_bytes(shape, point)
    for change in ({"Q_BUFFERS": 2}, {"O_TMA": True}):
        assert smem_bytes(shape, dict(point, **change)) == base + 128 * 128 * 2, change
        assert "shared memory" in infeasible(shape, dict(point, **change)), change
        narrow = dict(point, BLOCK_N=128, **change)
        assert infeasible(shape, narrow) is None, change
    narrow = dict(point, BLOCK_N=128, CAUSAL_DYNAMIC=False)
    for change, words in (({"Q_BUFFERS": 2}, "next tile's Q loads"), ({"O_TMA": True}, "whole 128-byte rows"),
                          ({"CAUSAL_DYNAMIC": True}, "drawn from a counter")):
        guess = estimate(shape, narrow, dict(narrow, **change), None)
        assert guess.gain > 0 and words in guess.reason, (change, guess)
    text = (KERNELS / "gemm/cuda_wgmma/kernel.py").read_text()
    knobs = parse_knobs(text)
    shape = Shape(kind="gemm", roles=roles(knobs), fixed=fixed_roles(text, knobs))
    point = point_of(knobs)
    assert shape.roles["lanes"] == "STREAM_LANES" and point["STREAM_LANES"] == 8
    guess = estimate(shape, point, dict(point, STREAM_LANES=1), None)
    assert guess.gain < 0 and "B at different K offsets" in guess.reason
