"""Every shipped seed kernel is correct: on the tiny suite under the interpreter, on check and bench on a GPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from avo.agent.heuristic.knobs import render
from avo.tasks import load, relative_error

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
SEEDS = [("attention", "triton_fa2"), ("attention", "triton_naive"), ("gemm", "triton_tiled"),
         ("gemm", "triton_naive"), ("gemm", "triton_tma_persistent")]

TUNE_MARKER = re.compile(r"^([A-Z_]+) = (\S+)  # avo: tune (.+)$", re.M)


def _check(task, module, cases, device):
    entry = getattr(module, task.entry)
    for case in cases:
        inputs = task.make_inputs(case, 1234, device)
        out = task.call(entry, inputs)
        shape, dtype = task.output_like(case, inputs)
        assert tuple(out.shape) == shape and str(out.dtype) == f"torch.{dtype}", case.name
        assert out.device.type == inputs[0].device.type and out.is_contiguous(), case.name
        err = relative_error(out, task.reference(*inputs))
        assert err <= task.tolerance(case.dtype), f"{case.name}: relative error {err:.3g}"


@pytest.mark.parametrize("task_name,seed", SEEDS)
def test_seed_is_correct_on_tiny_suite_under_interpreter(task_name, seed, interpreted_tiny_check):
    rows = interpreted_tiny_check(task_name, seed)
    assert [r["case"] for r in rows] == [c.name for c in load(task_name).cases("tiny")]
    for row in rows:
        assert row["layout_ok"], row["case"]
        assert row["err"] <= row["tol"], f"{row['case']}: relative error {row['err']:.3g}"


@pytest.mark.parametrize("split", [1, 2, 4])
def test_tma_persistent_gemm_is_correct_through_its_descriptors_under_interpreter(split, tmp_path):
    """The tiny suite's odd shapes take the pointer fallback; these rows are 16-byte aligned, so A, B and C move
    through tensor descriptors, with C stored whole or in column slices, over several tiles and a partial K step."""
    path = KERNELS / "gemm" / "triton_tma_persistent" / "kernel.py"
    variant = tmp_path / "kernel.py"
    variant.write_text(render(path.read_text(), {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32,
                                                 "EPILOGUE_SPLIT": split}))
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("interpret_gemm.py")), str(variant),
                           "96,136,48", "8,8,8", "130,256,72"], env={**os.environ, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for row in json.loads(done.stdout.strip().splitlines()[-1]):
        assert row["layout_ok"] and row["err"] <= 2e-3, row


NAIVE_SWITCHES = ("EXP2", "MASK_SPLIT", "HEAVY_FIRST", "FMA_SCALE")


@pytest.mark.parametrize("switch", NAIVE_SWITCHES + ("all",))
def test_naive_attention_switches_are_correct_under_interpreter(switch, interpreted_tiny_check):
    """Each structural switch of the naive attention seed, alone and all together, computes the same attention."""
    on = NAIVE_SWITCHES if switch == "all" else (switch,)
    rows = interpreted_tiny_check("attention", "triton_naive", **{name: True for name in on})
    assert len(rows) == len(load("attention").cases("tiny"))
    for row in rows:
        assert row["layout_ok"] and row["err"] <= row["tol"], row


@pytest.mark.parametrize("task_name,seed", SEEDS)
def test_seed_has_tune_knobs_whose_default_is_a_choice(task_name, seed):
    text = (KERNELS / task_name / seed / "kernel.py").read_text()
    knobs = TUNE_MARKER.findall(text)
    assert {"BLOCK_M", "BLOCK_N", "NUM_WARPS", "NUM_STAGES"} <= {name for name, _, _ in knobs}
    for name, default, choices in knobs:
        assert default in choices.split(), name


def test_tiled_gemm_default_config():
    text = (KERNELS / "gemm" / "triton_tiled" / "kernel.py").read_text()
    defaults = {name: value for name, value, _ in TUNE_MARKER.findall(text)}
    assert (defaults["BLOCK_M"], defaults["BLOCK_N"], defaults["BLOCK_K"]) == ("128", "256", "64")
    assert (defaults["NUM_WARPS"], defaults["NUM_STAGES"]) == ("8", "3")


@pytest.mark.gpu
@pytest.mark.parametrize("task_name,seed", SEEDS)
def test_seed_is_correct_on_gpu(task_name, seed, compiled_seed):
    task = load(task_name)
    module = compiled_seed(task_name, seed)
    bench = task.cases("bench")
    _check(task, module, task.cases("check") + [min(bench, key=task.flops)], "cuda")
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("tiles", [(64, 64, 4), (128, 128, 8)])
def test_naive_attention_with_every_switch_is_correct_on_gpu(tiles, compiled_seed):
    """All four switches on, with the tiles the search favours and the big ones, on the check shapes."""
    task = load("attention")
    block_m, block_n, warps = tiles
    module = compiled_seed("attention", "triton_naive", BLOCK_M=block_m, BLOCK_N=block_n, NUM_WARPS=warps,
                           NUM_STAGES=3, **{name: True for name in NAIVE_SWITCHES})
    bench = task.cases("bench")
    _check(task, module, task.cases("check") + [min(bench, key=task.flops)], "cuda")
    torch.cuda.synchronize()
