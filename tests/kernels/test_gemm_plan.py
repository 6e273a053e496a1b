"""gemm/cuda_wgmma's plan() on the bench and wide suites (CPU): what the split tail (rule 4) and stream-K (rule 5)
change and what they leave alone. The tables are the plans as they were before the tail existed, the shapes the
tail takes over, and those stream-K takes over from both; the GPU side of the same shapes is
tests/kernels/test_gemm_splitk.py."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import needs
import pytest
from script_module import script

from avo.evaluate.worker.loader import load_entry
from avo.tasks import load

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "kernels" / "gemm" / "cuda_wgmma"
H200_SMS = 132
# case -> (rows, width, tiles, whole, splits) as plan() chose before the split tail: whole == tiles is unsplit,
# whole == 0 split-K.
BEFORE = {
    "4096x4096x4096": (128, 256, 512, 512, 1),
    "8192x8192x8192": (128, 256, 2048, 2048, 1),
    "8192x14336x4096": (128, 256, 3584, 3584, 1),
    "16384x4096x4096": (128, 256, 2048, 2048, 1),
    "64x10240x8192": (64, 128, 80, 80, 1),
    "64x8192x8192": (64, 128, 64, 64, 1),
    "64x57344x8192": (64, 128, 448, 448, 1),
    "64x8192x28672": (64, 128, 64, 0, 2),
    "256x10240x8192": (128, 192, 108, 108, 1),
    "256x8192x8192": (128, 128, 128, 128, 1),
    "256x57344x8192": (128, 128, 896, 896, 1),
    "256x8192x28672": (128, 128, 128, 128, 1),
    "1024x10240x8192": (128, 128, 640, 640, 1),
    "1024x8192x8192": (128, 256, 256, 256, 1),
    "1024x57344x8192": (128, 256, 1792, 1792, 1),
    "1024x8192x28672": (128, 256, 256, 256, 1),
    "4096x10240x8192": (128, 256, 1280, 1280, 1),
    "4096x8192x8192": (128, 256, 1024, 1024, 1),
    "4096x57344x8192": (128, 256, 7168, 7168, 1),
    "4096x8192x28672": (128, 256, 1024, 1024, 1),
    "16384x10240x8192": (128, 256, 5120, 5120, 1),
    "16384x8192x8192": (128, 256, 4096, 4096, 1),
    "16384x57344x8192": (128, 256, 28672, 28672, 1),
    "16384x8192x28672": (128, 256, 4096, 4096, 1),
}
# The wide shapes whose last wave the tail fills: 256 wide with 264 tiles whole and 56 in 2 parts; 128 wide with
# 132 whole and 28 in 4 parts; 256 wide with 396 whole and 52 in 2 parts; all 64 tiles of 256 wide in 2 parts.
WITH_TAIL = {
    "1024x10240x8192": (128, 256, 320, 264, 2),
    "256x10240x8192": (128, 128, 160, 132, 4),
    "256x57344x8192": (128, 256, 448, 396, 2),
    "256x8192x28672": (128, 256, 64, 0, 2),
}


# The shapes stream-K takes (rows, width, tiles, whole, most pieces of a tile, blocks, blocks a run): the tiles past
# the last full wave, or the last two, dealt out in equal runs, each run to the 8 blocks of a tile column's 8 rows
# (so 128 of the 132 SMs).
WITH_STREAM = {  # only from STREAM_MIN_ROWS rows (below it stream-K lost on the H200: kernel.py, rule 5); on the
    # few-token tile only past FEW's STREAM_FROM waves (4: none of these shapes)
    "8192x8192x8192": (128, 256, 2048, 1848, 2, 128, 8),
    "8192x14336x4096": (128, 256, 3584, 3432, 2, 128, 8),
    "16384x8192x8192": (128, 256, 4096, 3960, 2, 128, 8),
    "16384x8192x28672": (128, 256, 4096, 3960, 2, 128, 8),
}


# The shapes whose waves 128 x 320 tiles divide better than any narrower tile's, with their tail or split rules:
# 256 whole tiles at 1024 rows (under two waves, where 256-wide tiles make 320); 64 tiles in 2 parts at 256 rows.
WITH_320 = {
    "1024x10240x8192": (128, 320, 256, 256, 1),
    "256x10240x8192": (128, 320, 64, 0, 2),
}


# The shape whose 64 x 320 tiles (SHORT_N) fill one wave whole at a K of SHORT_MIN_K or more: 128 of them, unsplit.
WITH_SHORT = {
    "256x10240x8192": (64, 320, 128, 128, 1),
}


# From 129 to 256 rows, the shape where a width's 128-row tiles make one wave at least WAVE_FILL full: 128 whole
# tiles of 128 x 128, in place of 64 of 128 x 256 in 2 parts (WITH_TAIL).
WITH_WAVE_FILL = {
    "256x8192x28672": (128, 128, 128, 128, 1),
}


# The few-token shapes whose 64 x 64 tiles fill one wave (rule 1's NARROW): 128 whole tiles each, no split; and
# past one wave, the one whose 64 x 64 tiles' waves end sooner (NARROW_WAVES): 7 of 896 against 4 of 448.
WITH_NARROW = {
    "64x8192x8192": (64, 64, 128, 128, 1),
    "64x8192x28672": (64, 64, 128, 128, 1),
    "64x57344x8192": (64, 64, 896, 896, 1),
}


def seed_globals(**knobs) -> dict:
    g = load_entry(SEED, "gemm").__globals__
    g.update(knobs)
    return g


def no_wave_fill(**knobs) -> dict:
    """The seed's plan as before one wave of whole tiles took the shapes up to 256 rows (ROWS256's WAVE_FILL 0),
    with `knobs` set."""
    g = seed_globals(**knobs)
    g["ROWS256"] = dict(g["ROWS256"], WAVE_FILL=0.0)
    return g


def without_320(**knobs) -> dict:
    """The seed's plan as before the 320-wide tiles (WIDTH_320 False, SHORT_N 0), with `knobs` set."""
    g = no_wave_fill(_SHORT=None, **knobs)
    for builds in ("_LARGE", "_ROWS256"):
        g[builds] = {width: build for width, build in g[builds].items() if width != 320}
    return g


def before_narrow(**knobs) -> dict:
    """The plan as before the few-token tiles' own rules (NARROW off, K split from MIN_SPLIT_STEPS as for the others),
    and before the 320-wide tile, with `knobs` set."""
    g = without_320(_NARROW=None, _NARROW_M64=None, **knobs)
    g["FEW"] = dict(g["FEW"], SPLIT_STEPS=g["MIN_SPLIT_STEPS"])
    return g


def cases(*suites):
    return [case for suite in suites for case in load("gemm").cases(suite)]


def work(plan) -> tuple:
    """(rows, width, tiles, whole, splits, stream blocks) of a plan."""
    return plan.build.block_m, plan.build.block_n, plan.tiles, plan.whole, plan.splits, plan.stream


def planned(g: dict, case) -> tuple:
    p = case.params
    plan = g["plan"](p["M"], p["N"], p["K"], H200_SMS)
    return work(plan)[:5] + ((plan.stream, plan.lanes) if plan.stream else ())


def test_the_tables_name_every_bench_and_wide_shape():
    assert {case.name for case in cases("bench", "wide")} == set(BEFORE)
    assert set(WITH_TAIL) < set(BEFORE) and set(WITH_STREAM) < set(BEFORE) and set(WITH_NARROW) < set(BEFORE)
    assert set(WITH_320) < set(BEFORE) and set(WITH_SHORT) < set(BEFORE) and set(WITH_WAVE_FILL) < set(BEFORE)


def with_narrow(name: str):
    """The plan of case `name` with the rules up to the few-token tiles' own (the tail, stream-K, NARROW)."""
    return WITH_NARROW.get(name, WITH_STREAM.get(name, WITH_TAIL.get(name, BEFORE[name])))


def with_short(name: str):
    """The plan of case `name` with the short tile and every rule before it."""
    return WITH_SHORT.get(name, WITH_320.get(name, with_narrow(name)))


@pytest.mark.parametrize("case", cases("bench", "wide"), ids=lambda c: c.name)
def test_one_wave_of_whole_tiles_changes_only_the_shapes_up_to_256_rows_it_fills(case):
    assert planned(seed_globals(), case) == WITH_WAVE_FILL.get(case.name, with_short(case.name))


@pytest.mark.parametrize("case", cases("bench", "wide"), ids=lambda c: c.name)
def test_the_short_tile_changes_only_the_shapes_whose_one_wave_it_fills_whole(case):
    assert planned(no_wave_fill(), case) == with_short(case.name)


@pytest.mark.parametrize("case", cases("bench", "wide"), ids=lambda c: c.name)
def test_the_320_wide_tile_changes_only_the_shapes_whose_waves_it_divides_better(case):
    assert planned(no_wave_fill(_SHORT=None), case) == WITH_320.get(case.name, with_narrow(case.name))


@pytest.mark.parametrize("case", cases("bench", "wide"), ids=lambda c: c.name)
def test_stream_k_changes_only_the_shapes_whose_waves_it_evens_out(case):
    assert planned(without_320(), case) == with_narrow(case.name)


@pytest.mark.parametrize("case", cases("bench", "wide"), ids=lambda c: c.name)
def test_the_tail_changes_only_the_shapes_whose_last_wave_it_fills(case):
    assert planned(before_narrow(STREAM_K=False), case) == WITH_TAIL.get(case.name, BEFORE[case.name])


@pytest.mark.parametrize("case", cases("bench", "wide"), ids=lambda c: c.name)
def test_the_tail_knob_at_1_gives_the_plans_from_before_the_tail(case):
    assert planned(before_narrow(TAIL_SPLITS=1, STREAM_K=False), case) == BEFORE[case.name]


@pytest.mark.parametrize("case", cases("bench", "wide", "check"), ids=lambda c: c.name)
def test_a_stream_plan_starts_on_a_wave_boundary_and_is_estimated_faster_than_the_other_rules(case):
    g = seed_globals()
    p = case.params
    plan = g["plan"](p["M"], p["N"], p["K"], H200_SMS)
    if not plan.stream:
        return
    k_steps, slots = -(-p["K"] // 64), H200_SMS // plan.build.cluster_m
    total = (plan.tiles - plan.whole) * k_steps
    assert 0 < plan.tiles - plan.whole < g["STREAM_WAVES"] * slots + plan.lanes, case.name
    assert -plan.whole % slots < plan.lanes and plan.whole % plan.lanes == 0, case.name  # a wave's edge, by lanes
    assert plan.stream % plan.lanes == 0 and (plan.tiles - plan.whole) % plan.lanes == 0, case.name
    assert 2 <= plan.stream <= slots and plan.stream * g["MIN_RUN_STEPS"] <= total
    runs = g["stream_runs"](plan.tiles, plan.whole, k_steps, plan.stream, plan.lanes)
    assert plan.splits == max(piece[4] for run in runs for piece in run)  # the workspace's room per tile
    assert plan.units == plan.whole + plan.stream
    other = seed_globals(STREAM_K=False)["plan"](p["M"], p["N"], p["K"], H200_SMS)
    before = g["_time"](other.build, other.tiles, other.whole, other.splits, k_steps, slots)
    after = g["_stream_time"](plan.build, plan.tiles, plan.whole, k_steps, slots, plan.lanes)[0]
    assert after <= (1 - g["STREAM_GAIN"]) * before, case.name


@pytest.mark.parametrize("case", cases("bench", "wide", "check"), ids=lambda c: c.name)
def test_a_tail_starts_on_a_wave_boundary_and_is_estimated_faster_than_whole_tiles(case):
    g = seed_globals(STREAM_K=False)
    p = case.params
    plan = g["plan"](p["M"], p["N"], p["K"], H200_SMS)
    k_steps = -(-p["K"] // 64)
    slots = H200_SMS // plan.build.cluster_m
    assert 1 <= plan.splits <= k_steps and 0 <= plan.whole <= plan.tiles
    assert plan.splits > 1 or plan.whole == plan.tiles  # unsplit plans name every tile whole
    assert plan.units == plan.whole + (plan.tiles - plan.whole) * plan.splits
    if 0 < plan.whole < plan.tiles:
        # A persistent grid of one block per SM: the split units start together, one per block, after the full waves.
        assert plan.whole % slots == 0 and plan.tiles - plan.whole < slots, case.name
        before = g["_time"](plan.build, plan.tiles, plan.tiles, 1, k_steps, slots)
        after = g["_time"](plan.build, plan.tiles, plan.whole, plan.splits, k_steps, slots)
        assert after <= (1 - g["TAIL_GAIN"]) * before, case.name


def test_the_estimate_charges_waves_and_partials():
    g = seed_globals()
    wide = g["_LARGE"][256]
    # 320 tiles of 128 steps on 132 SMs: 3 waves whole; 2 waves whole, then 112 half-tile units with 3 partials each.
    assert g["_time"](wide, 320, 320, 1, 128, H200_SMS) == 3 * 128
    assert g["_time"](wide, 320, 264, 2, 128, H200_SMS) == 2 * 128 + 64 + 3 * g["PARTIAL_STEPS"]
    # Parts that spill past one wave pay for the second: 56 tiles in 3 parts are 168 units.
    assert g["_time"](wide, 320, 264, 3, 128, H200_SMS) == 2 * 128 + 2 * (43 + 4 * g["PARTIAL_STEPS"])


# Shapes of a 7B model's layers (Qwen2.5-7B: qkv 4608 x 3584, o 3584 x 3584) timed with every width and tail side by
# side on the H200 (BENCHMARKS.md): (rows, width, tiles, whole, splits) of the fastest; at 4096 x 3584 x 3584 the
# plan since whole 128-wide plans are weighed at RATE_128 0.93, with two accumulator sets (ACC_SETS_128).
MODEL_LAYERS = {
    # H200, one set: 0.947x cuBLAS against 1.006 for 128 x 256 with a tail in 2; H100, two sets: 1.014 against 1.012
    (4096, 3584, 3584): (128, 128, 896, 896, 1),
    (4096, 4608, 3584): (128, 256, 576, 528, 2),  # 0.969; 192 wide whole: 0.939
    (1024, 4608, 3584): (128, 320, 120, 120, 1),  # 0.992 (a later call); 192 wide, tail in 2: 0.873 (0.884 then)
}


@pytest.mark.parametrize("shape", MODEL_LAYERS, ids=lambda s: "x".join(map(str, s)))
def test_the_width_rates_pick_what_ran_fastest_on_a_models_layers(shape):
    plan = seed_globals()["plan"](*shape, H200_SMS)
    assert (plan.build.block_m, plan.build.block_n, plan.tiles, plan.whole, plan.splits) == MODEL_LAYERS[shape]


def test_the_width_rates_are_knobs_an_evolve_can_move(tmp_path):
    """RATE_128 written back to 0.88, as the heuristic agent's editor writes a knob: 4096 x 3584 x 3584 goes back to
    the 256-wide tiles with a tail in 2 that it took before whole 128-wide plans were weighed apart from split ones."""
    import shutil

    from avo.agent.heuristic.knobs import parse_knobs, point_of, render

    folder = tmp_path / "rate"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "kernel.py").read_text()
    knobs = point_of(parse_knobs(source))
    assert {k: knobs[k] for k in ("RATE_192", "RATE_128", "RATE_128_SPLIT", "TAIL_GAIN", "PARTIAL_STEPS")} == \
        {"RATE_192": 0.92, "RATE_128": 0.93, "RATE_128_SPLIT": 0.88, "TAIL_GAIN": 0.04, "PARTIAL_STEPS": 5}
    (folder / "kernel.py").write_text(render(source, {"RATE_128": 0.88}))
    plan = load_entry(folder, "gemm").__globals__["plan"](4096, 3584, 3584, H200_SMS)
    assert (plan.build.block_n, plan.tiles, plan.whole, plan.splits) == (256, 448, 396, 2)


def test_a_tail_of_one_tile_is_cut_into_the_most_parts():
    plan = without_320(STREAM_K=False)["plan"](896, 2368, 8192, H200_SMS)  # 7 x 19 tiles of 128 x 128 on 132 SMs
    assert (plan.build.block_n, plan.tiles, plan.whole, plan.splits) == (128, 133, 132, 4)


def test_the_few_token_tile_takes_no_tail_and_stream_k_only_past_stream_from_waves():
    # 64 x 57344: 448 tiles of 64 x 128, 3.4 waves: whole (STREAM off; on, STREAM_FROM 4), never a split tail; with
    # STREAM on and STREAM_FROM 3 the last wave's 52 tiles dealt out over all 132 SMs (rule 1's STREAM). Below one
    # wave (64 tiles) whole. (NARROW_WAVES off: at 64 rows it takes 896 whole tiles of 64 x 64 instead; and
    # FEW_LARGE_WAVES off: past 64 rows and one wave the 128-row tiles. Each has its own test.)
    g = seed_globals(FEW_LARGE_WAVES=False)
    assert g["FEW"]["STREAM"] is False
    g["FEW"] = dict(g["FEW"], NARROW_WAVES=0)
    assert g["plan"](64, 57344, 8192, H200_SMS)[1:5] == (448, 448, 1, 0)
    g["FEW"] = dict(g["FEW"], STREAM=True)
    assert g["plan"](64, 57344, 8192, H200_SMS)[1:5] == (448, 448, 1, 0)
    assert g["plan"](128, 14336, 4096, H200_SMS)[1:5] == (224, 224, 1, 0)  # 1.7 waves: whole
    g["FEW"] = dict(g["FEW"], STREAM_FROM=3)
    plan = g["plan"](64, 57344, 8192, H200_SMS)
    assert (plan.build.block_m, plan.whole, plan.stream, plan.lanes) == (64, 396, 132, 1)
    assert g["plan"](128, 14336, 4096, H200_SMS)[1:5] == (224, 224, 1, 0)
    g["FEW"] = dict(g["FEW"], STREAM_FROM=1)
    assert g["plan"](128, 14336, 4096, H200_SMS).stream == 132
    assert g["plan"](64, 8192, 8192, H200_SMS)[1:5] == (128, 128, 1, 0)  # 64 x 64 tiles, one wave (NARROW)
    assert before_narrow()["plan"](64, 8192, 8192, H200_SMS)[1:5] == (64, 64, 1, 0)  # 64 x 128, whole
    # without NARROW, its 64 tiles of 64 x 128 split K in two (FEW's SPLIT_STEPS: parts of at least 32 steps)
    assert seed_globals(_NARROW=None, _NARROW_M64=None)["plan"](64, 8192, 8192, H200_SMS)[1:5] == (64, 0, 2, 0)
    g["FEW"] = dict(g["FEW"], STREAM=False)
    plan = g["plan"](64, 57344, 8192, H200_SMS)
    assert (plan.build.block_m, plan.whole, plan.splits, plan.stream) == (64, 448, 1, 0)


def test_the_config_sweep_times_the_tail_off_and_forces_each_kind_of_work(tmp_path):
    sweep = script("gemm_config_sweep")
    off = sweep.variant("plan-no-tail", sweep.PLANS["plan-no-tail"], tmp_path).__globals__["plan"]
    # whole tiles: without the tail, 128 x 128 (6.8 waves at RATE_128) beats 128 x 320 (2.7) and 128 x 256 (3.4)
    assert off(1024, 14336, 4096, H200_SMS)[1:5] == (896, 896, 1, 0)
    gemm = sweep.variant("large128x256s3", sweep.VARIANTS["large128x256s3"], tmp_path)
    for work, parts, expected in (("tail", 2, (320, 264, 2)), ("split", 2, (320, 0, 2)), ("tail", 1, (320, 320, 1))):
        plan = sweep.forced(gemm, work, parts).__globals__["plan"](1024, 10240, 8192, H200_SMS)
        assert (plan.build.block_n, *plan[1:4]) == (256, *expected) and not plan.stream, (work, parts)
    # No partial wave (132 tiles on 132 SMs): nothing to cut, and the row says so.
    assert sweep.forced(gemm, "tail", 2).__globals__["plan"](128 * 132, 256, 8192, H200_SMS)[1:5] == (132, 132, 1, 0)
    no_stream = sweep.variant("plan-no-stream", sweep.PLANS["plan-no-stream"], tmp_path).__globals__["plan"]
    assert no_stream(1024, 14336, 4096, H200_SMS)[1:5] == (448, 396, 2, 0)  # the split tail, as before stream-K
    # M = 256 is two tile rows: each run goes to the two blocks of a tile column (2 lanes).
    for width, waves, expected in ((256, 1, (80, 0, 3, 132, 2)), (128, 1, (160, 132, 6, 132, 2)),
                                  (128, 2, (160, 0, 2, 132, 2)), (192, 2, (108, 0, 3, 132, 2))):
        streamed = sweep.variant(f"s{width}{waves}", {}, tmp_path)
        plan = sweep.forced_stream(streamed, width, waves).__globals__["plan"](256, 10240, 8192, H200_SMS)
        assert (plan.build.block_n, *plan[1:]) == (width, *expected), (width, waves)



def _clustered(tmp_path):
    """The seed with CLUSTER_M 2 (FIT_WIDTHS on, as shipped), as an evolve candidate would set it: its entry and
    its clustered builds by width."""
    import shutil

    from avo.cuda import declared_builds

    folder = tmp_path / "clustered"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source, knob = (folder / "kernel.py").read_text(), "CLUSTER_M = 1  # avo: tune 1 2"
    assert knob in source and "FIT_WIDTHS = True" in source
    (folder / "kernel.py").write_text(source.replace(knob, knob.replace("= 1", "= 2", 1)))
    entry = load_entry(folder, "gemm")
    widths = {}
    for build in declared_builds(folder):
        flags = dict(re.findall(r"-D(\w+)=(\w+)", " ".join(build.flags)))
        if flags.get("CLUSTER_M") == "2":
            widths[int(flags["BLOCK_N"])] = build
    return entry, widths


def test_with_clusters_of_two_every_declared_width_splits_between_the_blocks(tmp_path):
    """CLUSTER_M 2 with FIT_WIDTHS on once declared a 192-wide build, which gemm.cu's static_assert refuses (two
    blocks share a tile's three 64-column boxes of B unequally): each such evolve candidate failed to compile."""
    entry, widths = _clustered(tmp_path)
    assert set(widths) == {256, 128}
    for case in cases("bench", "wide"):  # every shape still has a plan, on a width two blocks can share
        p = case.params
        build = entry.__globals__["plan"](p["M"], p["N"], p["K"], H200_SMS).build
        assert build.block_n in widths or build.cluster_m == 1 and build.block_m == 64  # few tokens: no cluster


@needs.nvrtc
def test_with_clusters_of_two_every_declared_build_compiles_for_hopper(tmp_path):
    from avo.cuda import CudaModule

    _, widths = _clustered(tmp_path)
    for n, build in widths.items():
        assert CudaModule(build).compile("sm_90a")[:4] == b"\x7fELF", n


@needs.nvrtc
def test_with_clusters_of_two_a_consumers_release_of_a_stage_carries_no_memory_barrier(tmp_path):
    """A consumer hands a stage back to both blocks' producers with an arrival on each block's barrier. With the
    arrival's .release.cluster qualifier ptxas put MEMBAR.ALL.GPU before each, two per K-step and consumer, and
    CLUSTER_M 2 ran 1.75x slower than 1 (4096 x 8192 x 8192 on the H200: 1,217 against 697 us); the release
    needs no memory ordering, since wgmma's wait has already retired the reads of the stage."""
    from avo.cuda import CudaModule
    from avo.profile.sass import sass_text, split_sass_functions

    _, widths = _clustered(tmp_path)
    cubin = tmp_path / "clustered.cubin"
    cubin.write_bytes(CudaModule(widths[256]).compile("sm_90a"))
    code = [line.split("*/", 1)[1].split(";")[0].strip() for line in
            split_sass_functions(sass_text(cubin))["gemm_bf16"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4}\*/", line)]
    remote = [i for i, op in enumerate(code) if "SYNCS.ARRIVE.TRANS64.RED" in op]
    assert len(remote) >= 2, "no arrival on the partner block's barrier found"
    for i in remote:
        assert not any("MEMBAR" in op for op in code[max(0, i - 4):i]), code[max(0, i - 4):i + 1]


def test_split_calls_on_two_streams_get_workspaces_of_their_own():
    """The partials and arrival counters of split tiles are per device and stream: two split GEMMs running at once
    on two streams would otherwise sum into each other's partials. (On the CPU: the buffers' bookkeeping.)"""
    g = seed_globals()
    workspace, held = g["_workspace"], g["_WORKSPACE"]
    held.clear()
    first = workspace("cpu", 1, 1024, 8)
    assert workspace("cpu", 1, 512, 4) is first, "a stream's smaller call reuses its buffers"
    other = workspace("cpu", 2, 1024, 8)
    assert other[0].data_ptr() != first[0].data_ptr() and other[1].data_ptr() != first[1].data_ptr()
    grown = workspace("cpu", 1, 4096, 8)
    assert grown[0].numel() == 4096 and grown[1].numel() == 8 and int(grown[1].abs().sum()) == 0
    assert workspace("cpu", 2, 1024, 8) is other, "growing one stream's leaves the other's alone"
    held.clear()


@pytest.mark.parametrize("tiles,whole,k_steps,blocks,lanes", [
    (80, 0, 128, 132, 1), (160, 0, 128, 132, 1), (320, 132, 128, 132, 1), (133, 132, 128, 16, 1),
    (24, 0, 313, 132, 1), (7, 0, 9, 7, 1), (3, 0, 1000, 131, 1), (56, 0, 128, 100, 1),
    (80, 0, 128, 132, 2), (320, 128, 128, 128, 8), (2048, 1848, 128, 128, 8), (64, 0, 7, 12, 4), (12, 4, 50, 8, 4),
])
def test_stream_k_deals_every_step_of_the_tail_once_in_runs_a_step_apart(tiles, whole, k_steps, blocks, lanes):
    runs = seed_globals()["stream_runs"](tiles, whole, k_steps, blocks, lanes)
    assert len(runs) == blocks
    lengths = [sum(end - begin for _, begin, end, _, _ in run) for run in runs]
    assert max(lengths) - min(lengths) <= 1 and min(lengths) >= 1
    seen, pieces = {}, {}
    for b, run in enumerate(runs):
        for tile, begin, end, piece, count in run:
            assert whole <= tile < tiles and 0 <= begin < end <= k_steps
            assert (tile - whole) % lanes == b % lanes, (b, tile)  # a block stays on its lane's row
            for k in range(begin, end):
                assert (tile, k) not in seen, (tile, k)
                seen[tile, k] = b
            pieces.setdefault(tile, []).append((piece, count, begin, b))
    assert len(seen) == (tiles - whole) * k_steps
    for group in range(blocks // lanes):  # the blocks of a group walk the same K ranges of one tile column
        walks = {tuple(((t - whole) // lanes, begin, end) for t, begin, end, _, _ in runs[group * lanes + lane])
                 for lane in range(lanes)}
        assert len(walks) == 1, group
    for tile, held in pieces.items():
        # A tile's pieces are numbered 0, 1, ... in K order, by the blocks of consecutive groups, each knowing how
        # many there are.
        assert [p for p, _, _, _ in held] == list(range(len(held))), tile
        assert {c for _, c, _, _ in held} == {len(held)}, tile
        assert [begin for _, _, begin, _ in held] == sorted(begin for _, _, begin, _ in held)
        assert [b for _, _, _, b in held] == list(range(held[0][3], held[0][3] + len(held) * lanes, lanes))


def test_stream_k_below_its_rows_is_what_the_knob_says():
    """STREAM_MIN_ROWS is a knob: set lower, the shapes where stream-K lost on the H200 take it again (an evolve may
    try it); the plan is then still one whose runs and workspace fit."""
    g = seed_globals(STREAM_MIN_ROWS=256, _SHORT=None)  # the short tile aside (it takes this shape whole)
    plan = g["plan"](256, 10240, 8192, H200_SMS)
    assert (plan.build.block_n, plan.tiles, plan.whole, plan.splits, plan.stream) == (128, 160, 0, 2, 132)
    assert seed_globals()["plan"](256, 10240, 8192, H200_SMS).stream == 0


def test_stream_k_against_whole_waves_is_weighed_at_the_gain_the_knob_says():
    """STREAM_GAIN is a knob: at 0 (and from 1024 rows) 4096 x 8192 x 8192, 7.76 waves of whole tiles, deals its
    last waves out as stream-K runs; at the shipped 2% it runs whole (stream-K read 0.991 against 0.995 there on
    an H100, BENCHMARKS.md)."""
    streamed = seed_globals(STREAM_MIN_ROWS=1024, STREAM_GAIN=0.0)["plan"](4096, 8192, 8192, H200_SMS)
    assert (streamed.tiles, streamed.whole, streamed.stream, streamed.lanes) == (1024, 792, 128, 8)
    assert seed_globals(STREAM_MIN_ROWS=1024)["plan"](4096, 8192, 8192, H200_SMS).stream == 0


def test_the_bucket_rule_groups_the_large_tiles_shapes_by_rows():
    """The heuristic judges a move group by group (avo/agent/acceptance.py): the wide suite's five row counts are
    five groups, read from the rule as the agent reads it, and only the few-token group has an entry of its own."""
    from avo.agent.buckets import case_buckets

    found = case_buckets((SEED / "kernel.py").read_text(), cases("wide", "bench"))
    assert {name.split("x")[0]: b for name, b in found.items()} == {
        "64": "few", "256": "rows256", "1024": "rows1024", "4096": "rows4096", "8192": "rows16384",
        "16384": "rows16384"}


@pytest.mark.parametrize("stages", [2, 3, 4, 5, 6])
def test_every_stage_count_the_knobs_allow_fits_in_shared_memory_at_every_width(tmp_path, stages):
    """STAGES 4 on the 256-wide tile once asked for 258 KB and failed to launch, so an evolve could never try more
    stages for the narrower widths, where they pay. Each build now takes what it asks for up to what fits."""
    import shutil

    from avo.agent.heuristic.knobs import parse_knobs, render

    folder = tmp_path / f"s{stages}"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "kernel.py").read_text()
    choices = {k.name: k.choices for k in parse_knobs(source)}
    point = {"STAGES": stages, "STAGES_192": min(stages, 4), "STAGES_128": max(stages, 3)}
    assert all(value in choices[name] for name, value in point.items())
    (folder / "kernel.py").write_text(render(source, point))
    g = load_entry(folder, "gemm").__globals__
    limit = g["SMEM_BYTES"]
    for width, build in g["_LARGE"].items():
        assert build.smem <= limit, (width, build.smem)
        asked = stages if width == g["BLOCK_N"] else point.get(f"STAGES_{width}", g[f"STAGES_{width}"])
        assert build.defines["STAGES"] == min(asked, {320: 3, 256: 3, 192: 4, 128: 6}[width])
    assert all(g[name].smem <= limit for name in ("_FEW", "_NARROW", "_FEW_M64", "_NARROW_M64"))


def test_the_narrower_widths_take_their_own_stages(tmp_path):
    """STAGES_192 4: 1024 x 3072 x 2048 (a 1B model's qkv at 1024 tokens, 192-wide tiles) read 0.968 against 0.921x
    cuBLAS side by side with 3 on the H200. The 256-wide build keeps STAGES."""
    import shutil

    from avo.agent.heuristic.knobs import render

    folder = tmp_path / "deeper"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "kernel.py").read_text()
    (folder / "kernel.py").write_text(render(source, {"STAGES_192": 4, "STAGES_128": 5}))
    g = load_entry(folder, "gemm").__globals__
    assert {n: b.defines["STAGES"] for n, b in g["_LARGE"].items()} == {320: 3, 256: 3, 192: 4, 128: 5}
    assert g["plan"](1024, 3072, 2048, H200_SMS).build.defines["STAGES"] == 4
    shipped = load_entry(SEED, "gemm").__globals__
    assert {n: b.defines["STAGES"] for n, b in shipped["_LARGE"].items()} == {320: 3, 256: 3, 192: 3, 128: 6}


def test_the_config_sweep_times_named_knob_variants(tmp_path):
    sweep = script("gemm_config_sweep")
    label, knobs = sweep._variant("deep:STAGES_192=4,MMA_LAG=True")
    assert (label, knobs) == ("deep", {"STAGES_192": 4, "MMA_LAG": True})
    for bad in ("deep", "deep:", "1x:STAGES=4", "deep:STAGES"):
        with pytest.raises(argparse.ArgumentTypeError):
            sweep._variant(bad)
    gemm = sweep.variant(label, knobs, tmp_path)
    assert gemm.__globals__["STAGES_192"] == 4 and gemm.__globals__["MMA_LAG"] is True


def test_the_config_sweep_times_another_copy_of_the_seed_beside_its_plan(tmp_path):
    sweep = script("gemm_config_sweep")
    older = tmp_path / "older"
    older.mkdir()
    for path in SEED.iterdir():
        if path.is_file():
            (older / path.name).write_bytes(path.read_bytes().replace(b"GROUP_M = 8 ", b"GROUP_M = 4 "))
    assert sweep._other(f"old:{older}") == ("old", older)
    for bad in (f"1x:{older}", f"old:{tmp_path / 'none'}", "old"):
        with pytest.raises(argparse.ArgumentTypeError):
            sweep._other(bad)
    gemm = sweep.variant("old", {}, tmp_path, older)  # the copy's own knobs, not the seed's
    assert gemm.__globals__["GROUP_M"] == 4 and load_entry(SEED, "gemm").__globals__["GROUP_M"] == 8
    args = argparse.Namespace(plans=True, stream=False, plan_only=True, variant={"deep": {}}, other={"old": older})
    assert sweep.options(args, 256) == [("plan", "own", 0), ("deep", "own", 0), ("old", "own", 0)]
    args.plan_only = False
    assert [name for name, _, _ in sweep.options(args, 256)] == [*sweep.PLANS, "deep", "old"]


def test_the_config_sweep_prints_its_speedups_as_a_table():
    sweep = script("gemm_config_sweep")

    def row(case, config, speedup, library_ms):
        return {"case": case, "config": config, "speedup": speedup, "library_ms": library_ms}

    rows = [row("128x4096x4096", "plan", 0.9, 0.0224), row("128x4096x4096", "deep", 0.96, 0.0224),
            row("64x8192x8192", "plan", 0.99, 0.0585)]  # "deep" not timed on the second shape
    lines = sweep.markdown_table(rows).splitlines()
    assert lines[0] == "| shape | plan | deep | cuBLAS µs |" and lines[1] == "|---|---:|---:|---:|"
    assert lines[2] == "| 128×4096×4096 | 0.900 | **0.960** | 22.4 |"
    assert lines[3] == "| 64×8192×8192 | **0.990** |  | 58.5 |"
    assert lines[4] == f"| geomean | {math.sqrt(0.9 * 0.99):.3f} | 0.960 | |"


@needs.nvrtc
def test_the_deepest_stages_of_each_width_compile_for_hopper(tmp_path):
    import shutil

    from avo.agent.heuristic.knobs import render
    from avo.cuda import CudaModule, declared_builds

    folder = tmp_path / "deepest"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "kernel.py").read_text()
    (folder / "kernel.py").write_text(render(source, {"STAGES_192": 4, "STAGES_128": 6}))
    load_entry(folder, "gemm")
    deep = [b for b in declared_builds(folder) if "-DBLOCK_M=128" in b.flags and
            ({"-DBLOCK_N=192", "-DSTAGES=4"} <= set(b.flags) or {"-DBLOCK_N=128", "-DSTAGES=6"} <= set(b.flags))
            and "-DMMA_LAG=0" in b.flags]  # the rows256 entry's 128-wide build with MMA_LAG aside
    assert len(deep) == 2
    for build in deep:
        assert CudaModule(build).compile("sm_90a")[:4] == b"\x7fELF", build.flags


def test_the_narrow_few_token_tile_takes_one_wave_that_fills_more_than_half_the_sms():
    """64 x 64 tiles where 65 to 132 of them cover N: whole, one per SM, NARROW_STAGES deep; fewer or more keep the
    64 x 128 tile and its rules (split-K below half the SMs, stream-K past a wave). NARROW_SPLIT off: below half
    the SMs it may take the 64 x 64 tiles too (its own test)."""
    g = seed_globals()
    g["FEW"] = dict(g["FEW"], NARROW_SPLIT=False)
    narrow = g["_NARROW"]
    assert (narrow.block_m, narrow.block_n, narrow.defines["STAGES"]) == (64, 64, g["FEW"]["NARROW_STAGES"])
    for n, expected in ((4160, 64 * 128), (8448, 64 * 64), (8512, 64 * 128), (2048, 64 * 128), (8192, 64 * 64)):
        plan = g["plan"](64, n, 4096, H200_SMS)
        assert plan.build.block_m * plan.build.block_n == expected, n
        if expected == 64 * 64:
            assert plan.whole == plan.tiles == -(-n // 64) and plan.splits == 1
    assert g["plan"](g["FEW_ROWS"] + 1, 8192, 4096, H200_SMS).build.block_m == 128  # past FEW_ROWS: the large tiles


def test_at_64_rows_or_fewer_the_few_token_tiles_take_their_own_rings(tmp_path):
    """STAGES_M64, NARROW_STAGES_M64: the 64 x 128 and 64 x 64 tiles at up to 64 rows are builds of their own depth
    where it differs (6 stages of 64 x 128: at 64 x 10240 x 8192 six read 0.981 against 0.945x cuBLAS for seven on an
    H100; the 64 x 64 tiles keep 12); past 64 rows STAGES and NARROW_STAGES; equal depths share one build."""
    import shutil

    from avo.agent.heuristic.knobs import render
    from avo.cuda import declared_builds

    g = seed_globals()
    assert (g["_FEW_M64"].defines["STAGES"], g["_FEW"].defines["STAGES"]) == (6, 7)
    assert g["_NARROW_M64"] is g["_NARROW"] and g["_NARROW"].defines["STAGES"] == 12  # equal depths: one build
    folder = tmp_path / "own"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "kernel.py").read_text()
    (folder / "kernel.py").write_text(render(source, {"NARROW_STAGES_M64@few": 8, "NARROW_FULL_STAGES_M64@few": 8}))
    g = load_entry(folder, "gemm").__globals__
    assert g["_NARROW_M64"].defines["STAGES"] == 8 and g["_NARROW_M64"] is not g["_NARROW"]
    assert g["_NARROW_FULL_M64"] is g["_NARROW_M64"]  # equal depths: one build
    for m, few, narrow in ((1, "_FEW_M64", "_NARROW_M64"), (64, "_FEW_M64", "_NARROW_M64"), (65, "_FEW", "_NARROW"),
                           (128, "_FEW", "_NARROW")):
        # 80 tiles of 64 x 128 up to 64 rows, 128 past it (two tile rows): whole
        assert g["plan"](m, 10240 if m <= 64 else 8192, 8192, H200_SMS).build is g[few], m
        assert g["plan"](m, 8192 if m <= 64 else 4096, 8192, H200_SMS).build is g[narrow], m  # 128 of 64 x 64
    assert sum("-DBLOCK_M=64" in b.flags for b in declared_builds(folder)) == 5  # and the short tile's


def test_up_to_64_rows_the_64_x_64_tiles_that_fill_the_sms_whole_take_a_ring_of_their_own(tmp_path):
    """NARROW_FULL_STAGES_M64 (8), NARROW_FULL_FROM (1): up to 64 rows, the 64 x 64 tiles that run whole over more
    than half the SMs (NARROW's one wave, NARROW_WAVES's several) take the 8-stage ring; those split in K, or too few
    to fill half the SMs (NARROW_SPLIT), keep NARROW_STAGES_M64 (12); past 64 rows NARROW_STAGES. NARROW_FULL_FROM 33
    leaves 32 rows or fewer on the 12-stage ring, one past 64 takes no row count, and equal depths share one build."""
    from test_gemm_epilogue_rounds import seed_with

    from avo.cuda import declared_builds

    g = seed_globals()
    full, split, plan = g["_NARROW_FULL_M64"], g["_NARROW_M64"], g["plan"]
    assert full.defines["STAGES"] == 8 and split.defines["STAGES"] == 12 and split is g["_NARROW"]
    for m, n, k in ((64, 8192, 8192), (33, 8192, 28672), (64, 8192, 1024), (48, 6144, 14336)):  # one wave, whole
        tiles = n // 64
        assert plan(m, n, k, H200_SMS) == (full, tiles, tiles, 1, 0, 1), (m, n, k)
        assert plan(1, n, k, H200_SMS) == (full, tiles, tiles, 1, 0, 1), (1, n, k)
    assert plan(64, 57344, 8192, H200_SMS) == (full, 896, 896, 1, 0, 1)  # NARROW_WAVES: 7 waves, whole
    assert plan(1, 57344, 8192, H200_SMS) == (full, 896, 896, 1, 0, 1)
    split_plan = plan(64, 4096, 4096, H200_SMS)  # 64 tiles, split in 2 to fill the SMs
    assert split_plan.build is split and split_plan.splits == 2, split_plan
    for n in (3584, 2048):  # 56 and 32 tiles of 56 and 32 steps: too short to split, whole
        few_whole = plan(64, n, n, H200_SMS)
        assert few_whole.build is split and few_whole.splits == 1, few_whole
    assert plan(128, 4096, 8192, H200_SMS).build is g["_NARROW"]  # 128 tiles past 64 rows: NARROW_STAGES
    for name, knobs in (("from33", {"NARROW_FULL_FROM@few": 33}), ("off", {"NARROW_FULL_FROM@few": 65})):
        g = seed_with(tmp_path, knobs, name)[1].__globals__
        for rows in (1, 32, 33, 64):
            expected = g["_NARROW_FULL_M64"] if name == "from33" and rows >= 33 else g["_NARROW"]
            assert g["plan"](rows, 8192, 8192, H200_SMS).build is expected, (name, rows)
    folder, gemm = seed_with(tmp_path, {"NARROW_FULL_STAGES_M64@few": 12}, "equal")
    g = gemm.__globals__
    assert g["_NARROW_FULL_M64"] is g["_NARROW"]
    # 64 x 128 at 7 and 6 stages, 64 x 64 at 12 (one build for all three entries), the short tile's 64 x 320
    assert sum("-DBLOCK_M=64" in b.flags for b in declared_builds(folder)) == 4


def test_the_narrow_tile_is_a_knob_an_evolve_can_turn_off(tmp_path):
    import shutil

    from avo.agent.heuristic.knobs import parse_knobs, render

    folder = tmp_path / "wide"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "kernel.py").read_text()
    knobs = {k.name: k.choices for k in parse_knobs(source)}
    assert knobs["NARROW@few"] == (False, True) and knobs["NARROW_STAGES@few"] == (6, 8, 10, 12)
    (folder / "kernel.py").write_text(render(source, {"NARROW@few": False}))
    g = load_entry(folder, "gemm").__globals__
    assert g["_NARROW"] is None and g["plan"](64, 8192, 8192, H200_SMS).build.block_n == 128
    assert knobs["SPLIT_STEPS@few"] == (16, 32, 64, 128)


def test_past_64_rows_the_split_128_row_tiles_take_a_shape_only_where_the_knob_lets_them():
    """FEW_LARGE_STEPS: the 128 x 128 tiles split in K in place of the few-token tiles where they make at least as
    many units, each that many K-steps long; 0 (the default) leaves every shape up to FEW_ROWS on the few-token
    tiles."""
    g = seed_globals()
    assert g["FEW_LARGE_STEPS"] == 0
    for shape in ((128, 6144, 4096), (128, 4096, 14336), (128, 3584, 3584), (64, 4096, 14336)):
        assert g["plan"](*shape, H200_SMS).build.block_m == 64, shape
    g = seed_globals(FEW_LARGE_STEPS=32)
    # 96 units of 32 steps against 96 of 64 x 128; 128 of 56 against 128 of 64 x 64
    for shape, splits in (((128, 6144, 4096), 2), ((128, 4096, 14336), 4)):
        plan = g["plan"](*shape, H200_SMS)
        assert (plan.build.block_m, plan.build.block_n, plan.splits, plan.whole) == (128, 128, splits, 0), shape
    # parts of 14 steps; fewer units (56 of 148 steps against 112); at 64 rows the rule does not apply
    for shape in ((128, 3584, 3584), (128, 3584, 18944), (64, 4096, 14336)):
        assert g["plan"](*shape, H200_SMS).build.block_m == 64, shape


def test_narrow_split_takes_the_64_wide_tiles_split_in_k_only_where_they_make_more_units():
    """FEW's NARROW_SPLIT (on by default): at half the SMs' worth of 64 x 64 tiles or fewer, those tiles split in K
    where that makes more units than the 64 x 128 tiles split in K; otherwise the plan is unchanged."""
    g = seed_globals()
    assert g["FEW"]["NARROW_SPLIT"] is True
    g["FEW"] = dict(g["FEW"], NARROW_SPLIT=False)
    shapes = ((1, 4096, 4096), (64, 4096, 4096), (128, 1024, 4096), (33, 2048, 20000), (128, 2048, 8192),
              (8, 4096, 14336), (64, 8192, 8192), (64, 10240, 8192), (128, 11008, 4096), (128, 4096, 4096),
              (64, 2048, 2048))
    before = {shape: work(g["plan"](*shape, H200_SMS)) for shape in shapes}
    g["FEW"] = dict(g["FEW"], NARROW_SPLIT=True)
    after = {shape: work(g["plan"](*shape, H200_SMS)) for shape in shapes}
    assert {shape: w for shape, w in after.items() if w != before[shape]} == {
        (1, 4096, 4096): (64, 64, 64, 0, 2, 0),      # 128 units, where 32 tiles of 64 x 128 in 2 parts made 64
        (64, 4096, 4096): (64, 64, 64, 0, 2, 0),
        (128, 1024, 4096): (64, 64, 32, 0, 2, 0),    # 64 units against 32
        (33, 2048, 20000): (64, 64, 32, 0, 4, 0),    # 128 against 64
        (64, 2048, 2048): (64, 64, 32, 32, 1, 0),    # 32 steps, too few to split: 32 whole tiles against 16
    }
    # equal units (128x2048x8192: 64 in 2 against 32 in 4) keep the 64 x 128 tiles; past half the SMs (64 x 8192 x
    # 8192) NARROW already holds; past one wave (64 x 10240 x 8192, 160 tiles) the 64 x 128 tiles run whole


def test_narrow_waves_takes_the_64_wide_tiles_past_one_wave_only_where_their_waves_end_sooner():
    """FEW's NARROW_WAVES (up to 64 rows by default): past one wave, the 64 x 64 tiles where their waves, each half as
    long as the 64 x 128 tiles', take less time in all; level or more leaves the plan as it was."""
    g = seed_globals(FEW_LARGE_WAVES=False)  # which takes the 128-row shapes below first (its own test)
    assert g["FEW"]["NARROW_WAVES"] == 64
    shapes = ((128, 11008, 4096), (128, 28672, 8192), (64, 57344, 8192), (128, 14336, 4096), (64, 10240, 8192),
              (128, 6144, 4096), (64, 8192, 8192), (64, 4096, 4096), (256, 11008, 4096), (33, 37888, 3584))
    plans = {}
    for rows in (0, 64, 128):
        g["FEW"] = dict(g["FEW"], NARROW_WAVES=rows)
        plans[rows] = {shape: work(g["plan"](*shape, H200_SMS)) for shape in shapes}

    def changed(rows: int) -> dict:
        return {shape: w for shape, w in plans[rows].items() if w != plans[0][shape]}

    assert changed(64) == {
        (64, 57344, 8192): (64, 64, 896, 896, 1, 0),  # 7 waves against 4 (3.4) of twice the length; whole, no stream
        (33, 37888, 3584): (64, 64, 592, 592, 1, 0),  # 5 against 3
    }
    assert changed(128) == {
        **changed(64),
        (128, 11008, 4096): (64, 64, 344, 344, 1, 0),  # 3 against 2
        (128, 28672, 8192): (64, 64, 896, 896, 1, 0),  # 7 against 4
    }
    # level (128 x 14336 x 4096: 4 waves against 2; 64 x 10240 x 8192: 2 against 1) keeps the 64 x 128 tiles


def test_past_64_rows_and_one_wave_the_128_row_tiles_take_the_shape():
    """FEW_LARGE_WAVES (on): from 65 rows, where the 64 x 128 tiles would run past one wave, the plan is the 128-row
    tiles' width (rule 2), whole; within one wave, and at 64 rows or fewer, the few-token tiles'."""
    on, off = seed_globals(), seed_globals(FEW_LARGE_WAVES=False)
    assert on["FEW_LARGE_WAVES"] is True
    shapes = ((128, 11008, 4096), (128, 28672, 8192), (100, 37888, 3584), (128, 14336, 4096), (65, 8576, 4096),
              (128, 10240, 8192), (128, 6144, 4096), (128, 4096, 4096), (65, 8192, 4096), (64, 57344, 8192),
              (1, 57344, 8192))
    changed = {}
    for shape in shapes:
        before, after = work(off["plan"](*shape, H200_SMS)), work(on["plan"](*shape, H200_SMS))
        if after != before:
            assert after == work(on["_plan"](*shape, H200_SMS, False, cut=False)), shape  # the 128-row tiles, whole
            changed[shape] = after
    assert changed == {
        (128, 11008, 4096): (128, 128, 86, 86, 1, 0),    # 172 tiles of 64 x 128 (1.3 waves)
        (128, 28672, 8192): (128, 256, 112, 112, 1, 0),  # 448 (3.4)
        (100, 37888, 3584): (128, 320, 119, 119, 1, 0),  # 592 (4.5), ragged rows
        (128, 14336, 4096): (128, 128, 112, 112, 1, 0),  # 224 (1.7)
        (65, 8576, 4096): (128, 128, 67, 67, 1, 0),      # 134: one tile column past a wave
        (128, 10240, 8192): (128, 128, 80, 80, 1, 0),    # 160; whole, where the rules past 128 rows split 128 x 256
    }
    # 128 x 6144 x 4096 (96 tiles), 128 x 4096 x 4096 (64 x 64 tiles, one wave), 65 x 8192 x 4096 (128 tiles): one
    # wave or less; 64 rows or fewer: never


def test_the_few_token_tiles_rows_are_declared_and_fixed(tmp_path):
    """FEW's BLOCK_M tells a search the entry's tile (64 rows, its only choice); set to anything else, the wrapper
    refuses at import in one line instead of building another tile."""
    import shutil

    from avo.agent.heuristic.knobs import parse_knobs, render

    source = (SEED / "kernel.py").read_text()
    assert {k.name: k.choices for k in parse_knobs(source)}["BLOCK_M@few"] == (64,)
    folder = tmp_path / "rows"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "kernel.py").write_text(render(source, {"BLOCK_M@few": 128}))
    from avo.evaluate.worker.loader import CandidateLoadError

    with pytest.raises(CandidateLoadError, match="the few-token tiles are 64 rows"):
        load_entry(folder, "gemm")
