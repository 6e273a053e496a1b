"""attention/cuda_fa3's per-shape table on the CPU: the bench suite keeps the single configuration it had before the
table (same build, same defines), the other buckets take their measured entries, each entry's knobs reach its build
(a causal grid persistent only where its entry says), avo reads the bucket rule as Python runs it, and the builds the
entries can name compile for sm_90a without spills. The GPU side of the same builds is tests/kernels/test_fa3_plans.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import needs
import pytest

from avo.agent.buckets import case_buckets
from avo.agent.heuristic.knobs import render
from avo.cuda import declared_builds
from avo.evaluate.cuda_compile import compile_check
from avo.evaluate.worker.loader import load_entry
from avo.tasks import load

SEED = Path(__file__).resolve().parents[2] / "kernels" / "attention" / "cuda_fa3"
# The one build per dtype the seed compiled for D = 128 before the table (then with -DPERSISTENT=1, a define the
# kernel never read: the wrapper sizes the grid), and its grid choice.
BEFORE = ("-DBLOCK_N=192", "-DCONSUMERS=2", "-DSTAGES=2", "-DPINGPONG=1", "-DOVERLAP=1", "-DORDER=1")
BEFORE_SMEM = (128 * 128 + 2 * 2 * 192 * 128) * 2 + 2048


def seed_module(folder: Path = SEED):
    return load_entry(folder, "attention").__globals__


def planned(module, case):
    p = case.params
    return module["plan"](p["B"], p["Hq"], p["Hkv"], p["S"], p["D"], p["causal"])


def test_every_bench_case_past_mid_s_runs_the_configuration_it_ran_before_the_table():
    """From S = 8192 the bench suite's cases run the build they ran before the table (their causal tiles now drawn
    from a counter, a launch's choice); its S = 4096 cases take the d128_mid entry (128-wide blocks, O through TMA,
    two Q tiles), measured faster there."""
    module = seed_module()
    for case in load("attention").cases("bench"):
        plan = planned(module, case)
        build = plan.build
        if case.params["S"] <= module["MID_S"]:
            assert plan is module["PLANS"]["d128_mid"] and (build.block_n, build.o_tma, build.q_buffers) == \
                (128, True, 2), case.name
            continue
        assert (build.d, build.block_n, build.consumers, build.block_m, build.threads) == (128, 192, 2, 128, 384)
        assert plan.persistent is True and build.smem == BEFORE_SMEM, case.name
        assert plan.causal_dynamic is True, case.name  # causal tiles drawn from the counter (a launch's choice)
        for dtype, fp16 in (("bf16", 0), ("fp16", 1)):
            assert build.modules[dtype].build.flags == BEFORE + (f"-DKERNEL_FP16={fp16}", "-DKERNEL_D=128")


def _entry(module, name: str) -> tuple[int, int, bool, bool, bool]:
    """(BLOCK_N, consumer warpgroups, persistent, causal persistent, causal dynamic) a bucket's entry names, the
    shared configuration's where it has none of its own."""
    entry = module["TABLE"].get(name, {})
    return (entry.get("BLOCK_N", module["BLOCK_N"]), entry.get("WARPGROUPS", module["CONSUMERS"]),
            entry.get("PERSISTENT", module["PERSISTENT"]), entry.get("CAUSAL_PERSISTENT", module["CAUSAL_PERSISTENT"]),
            entry.get("CAUSAL_DYNAMIC", module["CAUSAL_DYNAMIC"]))


MEASURED = {"d128": (192, 2, True, False, True), "d128_short": (128, 2, True, True, True),
            "d128_mid": (128, 2, True, False, True), "d64": (128, 3, True, False, True),
            "d64_short": (128, 3, True, False, True), "d64_short_causal": (128, 2, True, True, False)}
"""What each bucket runs, as the wide suite's sweep on the H200 chose it (kernel.py's table, BENCHMARKS.md)."""


def test_wide_cases_take_their_buckets_entries():
    module = seed_module()
    seen = set()
    for case in load("attention").cases("wide"):
        p, plan = case.params, planned(module, case)
        name = module["bucket"](p["B"], p["Hq"], p["Hkv"], p["S"], p["D"], p["causal"])
        seen.add(name)
        build = plan.build
        assert build.d == p["D"], case.name
        assert (build.block_n, build.consumers, plan.persistent, plan.causal_persistent, plan.causal_dynamic) == \
            _entry(module, name) == MEASURED[name], case.name
        assert (build.block_m, build.threads) == (64 * build.consumers, 128 * (build.consumers + 1)), case.name
    assert seen == {"d64", "d64_short", "d64_short_causal", "d128", "d128_short", "d128_mid"}


def test_avo_reads_the_bucket_rule_as_python_runs_it():
    module, task = seed_module(), load("attention")
    source = (SEED / "kernel.py").read_text()
    for suite in ("bench", "wide", "check"):
        cases = task.cases(suite)
        read = case_buckets(source, cases)
        assert read and read == {c.name: module["bucket"](*(c.params[n] for n in ("B", "Hq", "Hkv", "S", "D",
                                                                                     "causal"))) for c in cases}


def variant(tmp_path: Path, **knobs) -> Path:
    """A copy of the seed with some knobs set, as the heuristic agent writes it."""
    folder = tmp_path / "cuda_fa3"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "kernel.py").write_text(render((SEED / "kernel.py").read_text(), knobs))
    return folder


def test_each_entrys_knobs_reach_its_own_build_only(tmp_path):
    folder = variant(tmp_path, **{"WARPGROUPS@d64": 3, "BLOCK_N@d64": 128, "PERSISTENT@d64": False,
                                  "BLOCK_N@d128_short": 96, "PERSISTENT@d128_short": False,
                                  "CAUSAL_PERSISTENT@d128_short": False})
    module = seed_module(folder)
    plans = module["PLANS"]
    d64, short = plans["d64"], plans["d128_short"]
    assert (d64.build.consumers, d64.build.block_m, d64.build.block_n, d64.persistent) == (3, 192, 128, False)
    assert d64.build.threads == 512 and "-DCONSUMERS=3" in d64.build.modules["bf16"].build.flags
    assert (short.build.consumers, short.build.block_n, short.persistent, short.causal_persistent) == \
        (2, 96, False, False)
    untouched = plans["d64_short_causal"]  # the bucket beside it keeps its own entry
    assert (untouched.build.consumers, untouched.build.block_n, untouched.persistent,
            untouched.causal_persistent) == (2, 128, True, True)
    assert plans["d128"].build.modules["bf16"].build.flags == BEFORE + ("-DKERNEL_FP16=0", "-DKERNEL_D=128")


def test_buckets_with_the_same_configuration_share_one_build(tmp_path):
    plans = seed_module()["PLANS"]
    # d128_short and d128_mid differ only in their causal grid, a launch's choice: one build serves both.
    assert plans["d128_short"].build is plans["d128_mid"].build
    assert len({id(p.build) for p in plans.values()}) == 5
    assert [p.build.pingpong for p in plans.values()].count(False) == 1  # d64_short_causal's alone
    assert plans["d64_short_causal"].build.modules["bf16"].build.flags[3] == "-DPINGPONG=0"
    same = seed_module(variant(tmp_path, **{"BLOCK_N@d64": 128, "WARPGROUPS@d64": 2, "O_TMA@d64": True,
                                            "Q_BUFFERS@d64": 2, "CAUSAL_ALIGN_END@d64": False,
                                            "PINGPONG@d64_short_causal": True}))["PLANS"]
    assert same["d64"].build is same["d64_short_causal"].build and len({id(p.build) for p in same.values()}) == 4


@needs.nvcc
def test_the_narrower_blocks_an_entry_may_name_compile_for_hopper_without_spills(tmp_path):
    """Three consumers hold BLOCK_N 96 and 128 (the widest) in their 160 registers; D = 128 holds BLOCK_N 64."""
    folder = variant(tmp_path, **{"BLOCK_N@d128_short": 64, "BLOCK_N@d64": 96, "WARPGROUPS@d64": 3,
                                  "BLOCK_N@d64_short": 128, "WARPGROUPS@d64_short": 3})
    assert {(b.block_n, b.consumers) for b in (p.build for p in seed_module(folder)["PLANS"].values())} == \
        {(192, 2), (64, 2), (128, 2), (96, 3), (128, 3)}
    check = compile_check(folder, "sm_90a")
    assert check.ok, check.log
    assert len(declared_builds(folder)) == len(check.resources) == 12
    for name, facts in check.resources.items():
        assert 0 < facts["registers"] <= 255, name
        assert facts["spill_store_bytes"] == facts["spill_load_bytes"] == 0, f"{name} spills: {facts}"
        assert facts["wgmma_serialized"] is None, f"{name}: {facts['wgmma_serialized']}"


@needs.nvcc
def test_aligned_tiles_and_idle_consumers_skipped_compile_for_hopper_without_spills(tmp_path):
    """CAUSAL_ALIGN_END on every entry, and SKIP_IDLE (attention.cu's ALIGN_END and SKIP_IDLE) on every entry whose
    tiles can hold padding rows: each build compiles with them, spills nothing and keeps its wgmma unserialized (a
    condition around the matmuls inside the loop made ptxas serialize them, C7515: the idle consumers walk the
    barriers on a path of their own). The shared BLOCK_N at 128: d128's 192-wide blocks spill 48 bytes with SKIP_IDLE
    (kernel.py says so at the knob)."""
    folder = variant(tmp_path, CAUSAL_ALIGN_END=True, SKIP_IDLE=True, BLOCK_N=128)
    plans = seed_module(folder)["PLANS"]
    assert all(p.build.align_end and p.build.skip_idle for p in plans.values())
    check = compile_check(folder, "sm_90a")
    assert check.ok, check.log
    assert len(check.resources) == len(declared_builds(folder))
    for name, facts in check.resources.items():
        assert facts["spill_store_bytes"] == facts["spill_load_bytes"] == 0, f"{name} spills: {facts}"
        assert facts["wgmma_serialized"] is None, f"{name}: {facts['wgmma_serialized']}"


@needs.nvrtc
def test_aligned_tiles_store_the_consumers_before_row_0_from_registers_not_by_tma(tmp_path):
    """With ALIGN_END a head's first causal tile starts before row 0, and a TMA store whose box starts there stopped
    the kernel on the H200 (an illegal instruction). With O through TMA the aligned build keeps the TMA store for the
    other consumers and stores those from the registers (store_o: D / 8 stores per row pair of a thread); the same
    build unaligned has only the counter's reset among its global stores."""
    import re

    from avo.profile.sass import sass_text, split_sass_functions

    module = seed_module()
    counts = {}
    for aligned in (False, True):
        build = module["_Build"](64, 128, 3, True, 2, True, aligned, False)
        cubin = tmp_path / f"aligned{int(aligned)}.cubin"
        cubin.write_bytes(build.modules["bf16"].compile("sm_90a"))
        code = split_sass_functions(sass_text(cubin))["attention_bf16_d64"]
        counts[aligned] = (len(re.findall(r"\bSTG\.", code)), len(re.findall(r"\bUTMASTG\.", code)))
    assert counts[False][1] >= 1 and counts[True][1] >= 1, counts  # O through TMA wherever a box starts at row >= 0
    assert counts[True][0] - counts[False][0] >= 2 * 64 // 8, counts


def test_launch_sizes_the_grid_and_passes_the_walk_as_each_plan_says(monkeypatch):
    """The wrapper's side of the persistent grids, on CPU tensors with the launch recorded: a persistent causal plan
    gets one block per SM and walks runs (SPAN, 1); a dynamic one one block per SM drawing tiles (DYNAMIC, 2) from the
    counter; a causal plan with neither one block per tile (0); non-causal grids follow PERSISTENT alone."""
    import torch

    module = seed_module()
    launched = []
    monkeypatch.setitem(module, "tensor_map", lambda tensor, box: None)
    monkeypatch.setitem(module, "_sm_count", lambda device: 132)
    build = module["_Build"](64, 128, 2)
    monkeypatch.setattr(build.modules["bf16"], "launcher", lambda name, grid, threads, args, shared_mem: lambda: (
        launched.append((grid, args[-3:]))))
    monkeypatch.setitem(module, "_counter", lambda device: "counter")
    q = torch.zeros(32, 8, 512, 64, dtype=torch.bfloat16)
    o = torch.empty_like(q)
    tiles = 32 * 8 * 512 // 128  # 1024 tiles of 128 rows: more than the SMs, and a run of 7 holds a head's 4
    for persistent, causal_persistent, dynamic, causal, expected in [
            (True, True, False, True, (132, (1, 1, o))), (True, False, False, True, (tiles, (1, 0, o))),
            (True, False, False, False, (132, (0, 0, o))), (False, True, False, False, (tiles, (0, 0, o))),
            (False, True, True, True, (132, (1, 2, "counter"))), (False, False, True, False, (tiles, (0, 0, o)))]:
        launched.clear()
        module["launch"](module["Plan"](build, persistent, causal_persistent, dynamic), q, q, q, o, causal, 0.125)
        assert launched == [expected], (persistent, causal_persistent, dynamic, causal)
    # Runs of fewer tiles than a head has (Llama-3.2-1B's prefill: B 1, 32 heads, S 1024: 256 tiles of 8 per head,
    # two per block) cannot even out the tiles' lengths: such a grid draws from the counter instead.
    q1 = torch.zeros(1, 32, 1024, 64, dtype=torch.bfloat16)
    o1 = torch.empty_like(q1)
    runs = module["Plan"](build, True, True, False)
    for whole_heads, expected in ((True, (132, (1, 2, "counter"))), (False, (132, (1, 1, o1)))):
        launched.clear()
        monkeypatch.setitem(module, "RUNS_NEED_WHOLE_HEADS", whole_heads)
        module["launch"](runs, q1, q1, q1, o1, True, 0.125)
        assert launched == [expected], whole_heads
    launched.clear()
    monkeypatch.setitem(module, "RUNS_NEED_WHOLE_HEADS", True)
    q_small = torch.zeros(8, 8, 512, 64, dtype=torch.bfloat16)  # 256 tiles of 4 per head: two per block, fewer
    module["launch"](runs, q_small, q_small, q_small, torch.empty_like(q_small), True, 0.125)
    q_wide = torch.zeros(32, 16, 1024, 64, dtype=torch.bfloat16)  # the wide suite's: 4096 tiles, 31 per block
    module["launch"](runs, q_wide, q_wide, q_wide, torch.empty_like(q_wide), True, 0.125)
    assert [call[1][1] for call in launched] == [2, 1]


def test_the_plan_sweep_reads_each_configuration_flag():
    from script_module import script

    sweep = script("fa3_plan_sweep")
    # (D, BLOCK_N, consumers, persistent, span, dynamic, O_TMA, Q tiles, ping-pong, causal tiles aligned to the end,
    # idle consumers skipped, K/V stages)
    assert sweep.parse_config("64:128:2")[1] == (64, 128, 2, True, False, False, False, 1, True, False, False, 2)
    assert sweep.parse_config("64:128:2:span:otma:q2:nopp")[1] == \
        (64, 128, 2, True, True, False, True, 2, False, False, False, 2)
    assert sweep.parse_config("128:96:3:nopersist:dyn:end:skip:s3")[1] == \
        (128, 96, 3, False, False, True, False, 1, True, True, True, 3)
    for bad in ("64:128", "64:128:2:fast", "64:128:2:q2:q2"):
        with pytest.raises(SystemExit):
            sweep.parse_config(bad)
    seed = seed_module()
    build = seed["_Build"](*sweep.parse_config("64:128:2:otma:q2:nopp")[1][:3], True, 2, False)
    assert "-DPINGPONG=0" in build.modules["bf16"].build.flags
    assert not [flag for flag in build.modules["bf16"].build.flags if "ALIGN_END" in flag]
    aligned = seed["_Build"](64, 128, 3, False, 1, True, True, True)
    assert {"-DALIGN_END=1", "-DSKIP_IDLE=1"} <= set(aligned.modules["bf16"].build.flags)
    deeper = seed["_Build"](128, 128, 2, False, 1, True, False, False, 3)  # 128:128:2:s3
    assert "-DSTAGES=3" in deeper.modules["bf16"].build.flags and deeper.smem <= seed["_SMEM_LIMIT"]
    assert seed["_Build"](128, 128, 2, True, 2, True, False, False, 3).smem > seed["_SMEM_LIMIT"]  # with O and Q2: no


@needs.nvrtc
def test_three_stages_of_128_wide_blocks_at_d_128_compile_for_hopper(tmp_path):
    """An entry's own STAGES reaches its build only; three 128-wide stages at D = 128 (one Q tile, O from registers)
    compile for sm_90a, in the shared memory they need."""
    folder = tmp_path / "cuda_fa3"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "kernel.py").read_text()
    entry = 'CAUSAL_PERSISTENT=False,  # avo: tune False True bucket=d128_mid'
    assert entry in source
    (folder / "kernel.py").write_text(source.replace(entry, entry + "\n        STAGES=3,").replace(
        "O_TMA=True,  # avo: tune False True bucket=d128_mid", "O_TMA=False,  # avo: tune False True bucket=d128_mid")
        .replace("Q_BUFFERS=2,  # avo: tune 1 2 bucket=d128_mid", "Q_BUFFERS=1,  # avo: tune 1 2 bucket=d128_mid"))
    plans = seed_module(folder)["PLANS"]
    mid = plans["d128_mid"].build
    assert (mid.stages, mid.o_tma, mid.q_buffers, mid.block_n) == (3, False, 1, 128)
    assert mid.smem <= seed_module(folder)["_SMEM_LIMIT"]
    assert all(p.build.stages == 2 for name, p in plans.items() if name != "d128_mid")
    assert "-DSTAGES=3" in mid.modules["bf16"].build.flags
    assert mid.modules["bf16"].compile("sm_90a")
