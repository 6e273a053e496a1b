"""gemm/cuda_wgmma's per-shape choice: which configuration, K split and split tail each kind of shape takes (CPU),
and on a GPU every configuration it can choose is correct and gives bitwise-identical outputs call after call, with
its arrival counters back at zero."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch

from avo.evaluate.worker.loader import load_entry
from avo.tasks import load, relative_error

SEED = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
H200_SMS = 132
# One shape per configuration the wrapper can choose, ragged edges included: (M, N, K) -> (rows, width, work), the
# work "whole" (unsplit), "split" (split-K: every tile cut along K), "tail" (the last wave's tiles cut) or "stream"
# (stream-K: the tiles past the full waves, or past all but one, dealt out in equal runs of K-steps).
SHAPES = {
    (64, 33792, 1024): (64, 128, "whole"),     # few tokens: the 64-row tile, unsplit
    (64, 4096, 16384): (64, 128, "split"),     # few tokens, 32 tiles, long K: split
    (64, 8192, 8192): (64, 64, "whole"),       # few tokens, 128 tiles of 64 x 64: one wave (NARROW, 8 stages)
    (40, 8200, 1000): (64, 64, "whole"),       # the same, ragged M, N and K: 129 tiles
    (33, 4096, 20000): (64, 128, "split"),     # ragged M and K, split
    (33, 2048, 20000): (64, 64, "split"),      # the same on 32 tiles of 64 x 64 (NARROW_SPLIT: 128 units against 64)
    (100, 3584, 3584): (64, 64, "whole"),      # up to FEW_ROWS 128: two rows of 64 x 64 tiles (112), ragged M
    (64, 57344, 8192): (64, 64, "whole"),      # NARROW_WAVES: 896 tiles of 64 x 64, 7 waves against 4 of 64 x 128
    (50, 37800, 1000): (64, 64, "whole"),      # the same, ragged M, N and K: 591 tiles
    (128, 11008, 4096): (128, 128, "whole"),   # FEW_LARGE_WAVES: 86 tiles of 128 x 128 for 172 of 64 x 128
    (100, 37888, 3584): (128, 320, "whole"),   # the same, ragged M: 119 tiles of 128 x 320
    (4096, 4096, 4096): (128, 256, "whole"),   # the widest tile, unsplit (the bench suite)
    (256, 10240, 1024): (128, 192, "whole"),   # 192 wide fills the SMs better than 256 or 128
    (256, 4096, 16384): (128, 128, "split"),   # 128 wide, 64 tiles, long K: split
    (300, 1000, 20000): (128, 128, "split"),   # ragged M, N and K, split
    (1024, 14336, 4096): (128, 256, "tail"),   # 396 tiles whole, 52 in 2 parts
    (1000, 14336, 4096): (128, 256, "tail"),   # the same with a ragged last tile row
    (384, 18688, 8192): (128, 128, "tail"),    # 396 tiles whole, 42 in 3 parts (ragged N)
    (1024, 10240, 8192): (128, 320, "whole"),  # 256 tiles of 128 x 320: under two waves
    (1000, 10240, 8192): (128, 320, "whole"),  # the same with a ragged last tile row
    (256, 10240, 8192): (64, 320, "whole"),    # SHORT_N: 128 tiles of 64 x 320, one wave whole
    (200, 10240, 3000): (64, 320, "whole"),    # the same, ragged M and K
    (320, 8192, 8192): (64, 320, "whole"),     # SHORT_ROWS: 130 tiles of 64 x 320 past 256 rows
    (300, 7680, 4100): (64, 320, "whole"),     # the same, ragged M and K: 120 tiles
    (256, 10240, 28672): (128, 320, "split"),  # 64 tiles of 128 x 320 in 2 parts
    (896, 2368, 8192): (128, 320, "split"),    # 56 tiles in 2 parts (ragged N: the last 128 of 320 columns)
    (384, 17152, 8192): (128, 320, "tail"),    # 132 tiles whole, 30 in 4 parts (ragged N)
    (8192, 8192, 8192): (128, 256, "stream"),  # 1848 tiles whole, 200 dealt out by 8 lanes (from 8192 rows)
}
# With stream-K off (STREAM_K False, a knob an evolve may move) the shapes it takes run as the other rules say.
WITHOUT_STREAM = {(8192, 8192, 8192): (128, 256, "whole")}
KNOBS = {"": {}, "no-stream": {"STREAM_K": False}}


def seed(**knobs):
    entry = load_entry(SEED, "gemm")
    entry.__globals__.update(knobs)
    return entry


def check_repeatable(gemm, shape: tuple[int, int, int], dtype, label, repeats: int = 5) -> None:
    """On a GPU: gemm's output on random inputs of `shape` within the task's tolerance of fp32 torch.matmul, and the
    same bits from `repeats` more calls, each after garbage was left where its output may land."""
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn((m, k), generator=gen, device="cuda", dtype=dtype)
    b = torch.randn((k, n), generator=gen, device="cuda", dtype=dtype)
    first = gemm(a, b)
    task = load("gemm")
    assert relative_error(first, task.reference(a, b)) <= task.tolerance(str(dtype).removeprefix("torch.")), label
    for _ in range(repeats):
        torch.empty_like(first).fill_(float("nan"))  # the next output may land where this garbage was
        assert torch.equal(gemm(a, b), first), f"{label}: a repeated call gave other bits"


def check_same_bits(changed, plain, shapes, dtype, label: str, repeats: int = 3, k_major: bool = False) -> None:
    """On a GPU: a variant of the seed (`changed`) is correct and bitwise repeatable at each of `shapes`
    (check_repeatable), gives the seed's own (`plain`) bits there, with k_major also for B given as an [N, K]
    weight's transpose (read in place), and leaves every split tile's arrival counter at zero."""
    for m, n, k in shapes:
        check_repeatable(changed, (m, n, k), dtype, (m, n, k), repeats=repeats)
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn((m, k), generator=gen, device="cuda", dtype=dtype)
        b = torch.randn((k, n), generator=gen, device="cuda", dtype=dtype)
        assert torch.equal(changed(a, b), plain(a, b)), f"{(m, n, k)}: other bits than {label}"
        if k_major:
            weight = torch.randn((n, k), generator=gen, device="cuda", dtype=dtype)
            assert torch.equal(changed(a, weight.t()), plain(a, weight.t())), \
                f"{(m, n, k)}: [N, K] B, other bits than {label}"
    assert arrivals_reset(changed), "arrival counters left set"


def check_reads_weight_in_place(gemm, shapes, label="") -> None:
    """On a GPU: B given as nn.Linear's weight.t() (read K-major in place) gives the row-major B's bits."""
    for m, n, k in shapes:
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn((m, k), generator=gen, device="cuda", dtype=torch.bfloat16)
        weight = torch.randn((n, k), generator=gen, device="cuda", dtype=torch.bfloat16)
        assert torch.equal(gemm(a, weight.t()), gemm(a, weight.t().contiguous())), (label, m, n, k)


def check_compiles_without_spills(folder, builds, cubin_dir=None) -> dict:
    """nvcc compiles `builds` of the seed in `folder` for sm_90a, none spilling or serializing its wgmma; ptxas's
    resource report of each kernel, returned (with `cubin_dir`, each names its cubin there)."""
    from avo.evaluate.cuda_compile import compile_check

    check = compile_check(folder, "sm_90a", builds=builds, cubin_dir=cubin_dir)
    assert check.ok, check.log
    for name, facts in check.resources.items():
        assert facts["spill_store_bytes"] == facts["spill_load_bytes"] == 0, f"{name} spills: {facts}"
        assert facts["wgmma_serialized"] is None, f"{name}: {facts['wgmma_serialized']}"
    return check.resources


def check_nvrtc_compiles(builds) -> None:
    """NVRTC, as the wrapper compiles at run time, makes a cubin of each of `builds` for sm_90a."""
    from avo.cuda import CudaModule

    for build in builds:
        assert CudaModule(build).compile("sm_90a")[:4] == b"\x7fELF", build.flags


def check_shipped(folder, shape: tuple[int, int, int], dtype) -> None:
    """On a GPU: the seed in `folder` correct and bitwise repeatable at `shape` (check_repeatable), every split
    tile's arrival counter back at zero after."""
    needs.module("cupy")
    gemm = load_entry(folder, "gemm")
    check_repeatable(gemm, shape, dtype, shape)
    assert arrivals_reset(gemm), f"{shape}: arrival counters left set"


def arrivals_reset(gemm) -> bool:
    """Each split tile's last unit set its arrival counter back to zero."""
    return not any(arrivals.any() for _, arrivals in gemm.__globals__["_WORKSPACE"].values())


def work(plan) -> str:
    return "stream" if plan.stream else "whole" if plan.splits == 1 else "split" if plan.whole == 0 else "tail"


def layout(plan) -> tuple:
    """A plan's tile, its tiles, the whole ones, the parts of the others and the streamed ones."""
    return plan.build.block_m, plan.build.block_n, plan.tiles, plan.whole, plan.splits, plan.stream


@pytest.mark.parametrize("knobs", list(KNOBS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_kind_of_shape_takes_its_configuration(shape, knobs):
    plan = seed(**KNOBS[knobs]).__globals__["plan"](*shape, H200_SMS)
    expected = (WITHOUT_STREAM if knobs else {}).get(shape, SHAPES[shape])
    assert (plan.build.block_m, plan.build.block_n, work(plan)) == expected, (shape, plan)
    if work(plan) == "split":
        # Split-K (rule 3) cuts K into parts of 128 steps or more; a tail with no full wave before it (rule 4, every
        # tile cut) may cut shorter parts where the estimate says they beat whole tiles by TAIL_GAIN.
        g, k_steps = seed(**KNOBS[knobs]).__globals__, -(-shape[2] // 64)
        cut = g["_time"](plan.build, plan.tiles, 0, plan.splits, k_steps, H200_SMS)
        whole = g["_time"](plan.build, plan.tiles, plan.tiles, 1, k_steps, H200_SMS)
        assert plan.splits <= k_steps // 128 or cut <= (1 - g["TAIL_GAIN"]) * whole, (shape, plan)


def test_the_bench_suite_takes_the_widest_tile_and_the_knobs_turn_each_rule_off():
    g = seed().__globals__
    for case in load("gemm").cases("bench"):
        p = case.params
        plan = g["plan"](p["M"], p["N"], p["K"], H200_SMS)
        assert (plan.build.block_m, plan.build.block_n) == (128, 256), case.name
        assert work(plan) in ("whole", "stream"), case.name  # stream-K evens out 8192^3's 15.5 waves
    g.update(FEW_ROWS=0, MAX_SPLITS=1, TAIL_SPLITS=1, STREAM_K=False, SHORT_MIN_K=1 << 40)
    for shape in SHAPES:
        plan = g["plan"](*shape, H200_SMS)
        assert plan.build.block_m == 128 and plan.splits == 1 and not plan.stream, shape


@pytest.mark.gpu
@pytest.mark.parametrize("knobs", list(KNOBS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_configuration_is_correct_and_bitwise_repeatable(shape, dtype, knobs):
    needs.module("cupy")
    if knobs and shape not in WITHOUT_STREAM:
        pytest.skip("the same plan as with stream-K on")
    gemm = seed(**KNOBS[knobs])
    check_repeatable(gemm, shape, dtype, shape)
    assert arrivals_reset(gemm), f"{shape}: arrival counters left set"


# Stream-K, forced on each width and count of waves (0: every tile dealt out), with up to `lanes` tiles of a tile
# column to the blocks of one run, ragged edges included: (M, N, K, width, waves, lanes); width "few" is the
# few-token 64 x 128 tile (one consumer), "tall" a 256 x 128 tile (two consumers of 128 rows). The wrapper takes it
# where its rules say so (test_gemm_plan.py); here every such plan must be correct and repeatable.
STREAMED = [
    (256, 10240, 8192, 128, 2, 1),   # 160 tiles on 132 SMs: no whole tiles, every run 155 steps
    (256, 10240, 8192, 128, 1, 1),   # 132 whole, 28 tiles dealt out in runs of 27 steps, a tile in up to 6 pieces
    (256, 10240, 8192, 256, 1, 1),   # 80 tiles: runs of 77 or 78 steps, a tile in up to three pieces
    (1000, 10240, 8192, 256, 2, 1),  # ragged last tile row; 132 tiles whole, 188 dealt out
    (1024, 8192, 8192, 192, 1, 1),   # 344 tiles: 264 whole, 80 dealt out
    (300, 1000, 20000, 128, 1, 1),   # ragged M, N and K; 24 tiles, short runs past a tile's end
    (896, 2368, 8192, 128, 1, 1),    # 133 tiles: a tail of one tile over every block
    (256, 10240, 8192, 256, 1, 8),   # 2 rows: 40 columns of 2 tiles, 66 runs of 2 blocks
    (1000, 10240, 8192, 256, 2, 8),  # 8 rows (the last ragged): 128 whole, 24 columns of 8 over 16 runs of 8
    (1024, 8192, 8192, 192, 1, 4),   # 8 rows in lanes of 4: 264 whole, 20 half-columns over 33 runs of 4
    (300, 1000, 20000, 128, 1, 8),   # 3 ragged rows of 8 ragged columns: 3 lanes, 44 runs of 3 blocks
    (8192, 8192, 8192, 256, 1, 8),   # the wrapper's own choice at 8192^3: 1848 whole, 25 columns over 16 runs
    (64, 8192, 8192, "few", 1, 1),   # 64 tiles of 64 x 128 over 132 blocks: 62 or 63 steps each
    (64, 57344, 8192, "few", 1, 1),  # 448 tiles: 396 whole, 52 dealt out
    (33, 2048, 20000, "few", 0, 1),  # ragged M and K: 16 tiles over 132 blocks
    (64, 57344, 8192, "few", 0, 1),  # every one of 448 tiles dealt out
    (256, 10240, 8192, "tall", 0, 1),  # 80 tiles of 256 x 128: B read once, every SM busy
    (200, 1000, 20000, "tall", 0, 1),  # ragged M, N and K
    (1024, 8192, 8192, "tall", 1, 1),  # 256 tiles: 132 whole, 124 dealt out
]
TALL = (256, 128, 3)  # BLOCK_M, BLOCK_N, STAGES of the "tall" build


def streamed(gemm, width, waves: int, lanes: int):
    """The seed's wrapper planning stream-K on `width`-wide tiles (or the "few" or "tall" build) past all but
    `waves` - 1 full waves (0: every tile), up to `lanes` tiles of a tile column a run."""
    g = gemm.__globals__
    g["STREAM_LANES"] = lanes
    tall = width == "tall" and g["_Build"](*TALL, 2, 1, 0, g["RATE_128"])
    build = g["_FEW"] if width == "few" else tall or g["_LARGE"][width]

    def plan(M, N, K, sms):
        rows = -(-M // build.block_m)
        count = rows * -(-N // build.block_n)
        return g["stream_plan"](build, count, waves or count // sms + 1, -(-K // 64), sms, rows)[1]

    g["plan"] = plan
    g["_PLANS"].clear()
    return gemm


def test_a_forced_stream_plan_deals_every_tail_step_once():
    g = seed().__globals__
    for m, n, k, width, waves, lanes in STREAMED:
        plan = streamed(seed(), width, waves, lanes).__globals__["plan"](m, n, k, H200_SMS)
        assert plan.stream > 1 and -plan.whole % H200_SMS < plan.lanes <= lanes, (m, n, k)
        runs = g["stream_runs"](plan.tiles, plan.whole, -(-k // 64), plan.stream, plan.lanes)
        assert max(piece[4] for run in runs for piece in run) == plan.splits
        assert plan.lanes == min(lanes, {256: 2, 1000: 8, 1024: 8, 300: 3, 8192: 8}[m] if lanes > 1 else 1)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", STREAMED, ids=lambda c: "x".join(map(str, c[:3])) + f"-w{c[3]}-v{c[4]}-l{c[5]}")
def test_stream_k_is_correct_and_bitwise_repeatable(case, dtype):
    needs.module("cupy")
    m, n, k, width, waves, lanes = case
    gemm = streamed(seed(), width, waves, lanes)
    check_repeatable(gemm, (m, n, k), dtype, case)
    assert all(plan.stream > 1 for plan in gemm.__globals__["_PLANS"].values())
    assert arrivals_reset(gemm), f"{case}: arrival counters left set"


# The narrower widths at the depths their knobs allow beyond the shipped ones (STAGES_192 4, STAGES_128 5 and 6),
# each on shapes the plan gives that width: whole, split and tail.
DEEPER = [(192, 4, (256, 10240, 1024)), (128, 5, (256, 4096, 16384)), (128, 6, (256, 10240, 8192)),
          (128, 6, (896, 2368, 8192)), (128, 5, (300, 1000, 20000))]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", DEEPER, ids=lambda c: f"{c[0]}s{c[1]}-" + "x".join(map(str, c[2])))
def test_the_deeper_narrow_builds_are_correct_and_bitwise_repeatable(case, dtype):
    needs.module("cupy")
    width, stages, (m, n, k) = case
    gemm = seed()
    g = gemm.__globals__
    # the widths as before the 320-wide tiles, which now take 256 x 10240 x 8192 (the short 64 x 320) and
    # 896 x 2368 x 8192, in the table of the shape's rows (up to 256 rows the rows256 entry's own)
    for table in ("_LARGE", "_ROWS256"):
        g[table] = {n: build for n, build in g[table].items() if n != 320}
    g["_SHORT"] = None
    table = "_ROWS256" if g["bucket"](m, n, k) == "rows256" else "_LARGE"
    g[table][width] = g["_Build"](128, width, stages, 2, 1, 0, g["WIDTH_RATE"][width])
    g["_PLANS"].clear()
    assert g["plan"](m, n, k, H200_SMS).build is g[table][width], "the plan no longer takes this width here"
    check_repeatable(gemm, (m, n, k), dtype, case)
    assert arrivals_reset(gemm), f"{case}: arrival counters left set"


# CLUSTER_M 2 (a knob an evolve may move): blocks in pairs, each loading half of the B tile both use and multicasting
# it to the other. Each kind of work on the clustered builds, ragged edges and a pair whose second tile row lies
# past M included: (M, N, K) -> the work the plan gives it.
CLUSTERED = {
    (4096, 4096, 4096): "whole",
    (1024, 10240, 8192): "tail",
    (1000, 10240, 8192): "tail",
    (8192, 8192, 8192): "whole",
    (256, 4096, 16384): "split",
    (130, 264, 16392): "split",
}


def clustered(tmp_path):
    import shutil

    from avo.agent.heuristic.knobs import render

    folder = tmp_path / "clustered"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "kernel.py").write_text(render((folder / "kernel.py").read_text(), {"CLUSTER_M": 2}))
    return load_entry(folder, "gemm")


def test_clustered_plans_take_each_kind_of_work(tmp_path):
    plan = clustered(tmp_path).__globals__["plan"]
    for shape, expected in CLUSTERED.items():
        planned = plan(*shape, H200_SMS)
        assert (planned.build.cluster_m, work(planned)) == (2, expected), shape


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_clusters_of_two_are_correct_and_bitwise_repeatable(dtype, tmp_path):
    needs.module("cupy")
    gemm = clustered(tmp_path)
    for shape in CLUSTERED:
        check_repeatable(gemm, shape, dtype, shape, repeats=3)
    assert arrivals_reset(gemm), "arrival counters left set"
