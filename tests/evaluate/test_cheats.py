"""The adversarial suite: each cheating kernel under tests/evaluate/cheats/ through the real evaluator, with the exact
status and rule it must get; the honest kernels written in the same style must come out correct.

On the CPU every candidate runs under the Triton interpreter in its own child process. Those processes are started
a few at a time, once per module, and each test reads its own verdict. GPU-only cheats (a side stream, a cache keyed
by address, which the interpreter's three timed calls on three distinct input slots can never hit) run with
`pytest -m gpu`.
"""

from __future__ import annotations

import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator
from avo.gpus import PROFILES

CHEATS = Path(__file__).parent / "cheats"
SEEDS = Path(__file__).resolve().parents[2] / "kernels"
H200 = PROFILES["h200"]
STASH = Path.home() / ".avo-cheat-stash.bin"  # where file_write_runtime tries to write

# name -> (status, rule, a phrase the message must contain)
EXPECTED_CPU = {
    "returns_zeros": ("incorrect", "check.mismatch", "relative error 1 exceeds"),
    "library_alias": ("rejected", "static.library_call", "kernel.py:5 imports torch.matmul"),
    "library_dynamic_name": ("rejected", "runtime.library_op", "aten.mm"),
    "cache_by_shape": ("incorrect", "check.timed_output", "timed call"),
    "first_tile_only": ("incorrect", "check.unwritten", "never written"),
    "unwritten_buffer": ("incorrect", "check.unwritten", "never written"),
    "thread_hidden": ("rejected", "runtime.thread", "running kernel.py"),
    "thread_plain": ("rejected", "static.forbidden_import", "kernel.py:7 imports threading"),
    "timer_patch": ("rejected", "runtime.timer_patched", "time.perf_counter"),
    "event_patch": ("rejected", "runtime.timer_patched", "torch.cuda.Event.elapsed_time"),
    "lazy_subclass": ("rejected", "runtime.output_type", "_Deferred"),
    "mutates_inputs": ("rejected", "runtime.input_mutated", "input 0"),
    "fp8_compute": ("incorrect", "check.mismatch", "exceeds the tolerance 0.002"),
    "file_write_static": ("rejected", "static.file_access", "kernel.py:42"),
    "file_write_runtime": ("rejected", "runtime.file_access", ".avo-cheat-stash.bin"),
    "sleeps_past_timeout": ("timeout", "stage.check", "stage check"),  # its hour-long sleep ended by the 4 s limit
    "fallback_on_error": ("rejected", "static.torch_fallback", "kernel.py:41 calls torch.mm"),
    # Beyond the list, caught by general mechanisms rather than a rule written for them.
    "aten_op_dynamic": ("rejected", "runtime.library_op", "aten.mm"),
    "exec_encoded": ("rejected", "runtime.library_op", "aten.mm"),
    "conv_as_gemm": ("rejected", "runtime.library_op", "aten.convolution"),
    "lying_class": ("rejected", "runtime.output_type", "_Plain"),
    "forged_verdict": ("rejected", "runtime.file_access", "forged"),
    # CuPy's work is invisible to the op recorder, so a name built at run time must not reach into it.
    "cupy_dynamic_name": ("rejected", "static.library_call", "passes cupy on as a value"),
    "numpy_dynamic_name": ("rejected", "static.library_call", "calls .numpy()"),
    # Honest while checked, cheating in the timed calls: timed outputs are type-checked, and one more call after
    # timing runs watched.
    "library_when_unwatched": ("rejected", "runtime.library_op", "aten.mm"),
    "lazy_when_unwatched": ("rejected", "runtime.output_type", "_Deferred"),
    "attention_sdpa_alias": ("rejected", "static.library_call", "kernel.py:5 imports torch.nn.functional"),
    "attention_sdpa_dynamic": ("rejected", "runtime.library_op", "scaled_dot_product"),
    # Honest kernels in the cheats' style: every guard lets them through.
    "honest_tiled": ("correct", None, ""),
    "honest_helpers": ("correct", None, ""),
}
# Cheats that step around the op recorder from inside the process it runs in, through torch's dispatcher internals
# reached by names built at run time: one detects it and behaves only while it is active, the other takes it off the
# dispatch-mode stack for its library call and puts it back. Their outputs are all correct. No in-process observer is
# beyond the reach of in-process code, so these get through today.
GAPS = {
    "library_when_unobserved": ("rejected", "runtime.library_op", "aten.mm",
                                "an op recorder (a dispatch mode) can be detected from inside the process; catching "
                                "this needs an observer outside it (on a GPU: the names of the kernels launched)"),
    "recorder_popped": ("rejected", "runtime.library_op", "aten.mm",
                        "an op recorder (a dispatch mode) can be popped off the stack and pushed back by the code it "
                        "watches; catching this needs an observer outside the process (on a GPU: the names of the "
                        "kernels launched)"),
}
TIMED = {"cache_by_shape", "honest_tiled", "library_when_unwatched", "lazy_when_unwatched", *GAPS}
"""Candidates whose cheat only shows in timed calls: evaluated with the tiny suite timed too."""


def _task(name: str) -> str:
    if "/" in name:  # a seed: kernels/<task>/<name>
        return name.split("/")[0]
    return "attention" if name.startswith("attention") else "gemm"


def _seeds(with_cuda_sources: bool) -> list[str]:
    """Shipped seed kernels as 'task/name'; the CUDA ones (CuPy + NVRTC) need a GPU to run at all."""
    found = []
    for folder in sorted(SEEDS.glob("*/*")):
        if (folder / "kernel.py").is_file() and any(folder.glob("*.cu")) == with_cuda_sources:
            found.append(f"{folder.parent.name}/{folder.name}")
    return found


def _evaluate(name: str, root: Path, device: str = "interpret", **settings):
    source = SEEDS / name if "/" in name else CHEATS / name
    folder = root / name.replace("/", "-")
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("__pycache__"))
    if device == "interpret":
        defaults = {"check_suite": "tiny", "bench_suite": "tiny" if name in TIMED else "", "seed": 7,
                    "import_timeout_s": 90.0, "check_timeout_s": 60.0}
        if name == "sleeps_past_timeout":
            defaults["check_timeout_s"] = 4.0
    else:
        defaults = {"seed": 7}
    config = EvalConfig(**(defaults | settings))
    return Evaluator(_task(name), device=device, gpu=H200, config=config).evaluate(folder)


@pytest.fixture(scope="module")
def cpu_verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("cheats")
    STASH.unlink(missing_ok=True)
    workers = max(1, min(3, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        names = [*EXPECTED_CPU, *GAPS, *_seeds(False)]
        futures = {name: pool.submit(_evaluate, name, root) for name in names}
        yield {name: f.result() for name, f in futures.items()}
    STASH.unlink(missing_ok=True)


def test_every_cheat_folder_has_an_expectation():
    folders = {p.name for p in CHEATS.iterdir() if (p / "kernel.py").is_file()}
    assert folders == set(EXPECTED_CPU) | set(EXPECTED_GPU) | set(GAPS) | TIMED_TRUE
    cheats = [n for n in folders if not n.startswith("honest")]
    assert len(cheats) >= 14


@pytest.mark.parametrize("name", sorted(EXPECTED_CPU))
def test_cheat_gets_its_verdict_on_cpu(cpu_verdicts, name):
    status, rule, phrase = EXPECTED_CPU[name]
    result = cpu_verdicts[name]
    assert (result.status, result.rule) == (status, rule), result.message
    assert phrase in result.message
    if status != "correct":
        assert result.fitness == 0
    else:
        assert all(c.correct for c in result.cases)


@pytest.mark.parametrize("name", sorted(GAPS))
def test_cheat_that_hides_from_the_observer(cpu_verdicts, name, request):
    status, rule, phrase, gap = GAPS[name]
    request.applymarker(pytest.mark.xfail(strict=True, reason=f"evaluator gap: {gap}"))
    result = cpu_verdicts[name]
    assert (result.status, result.rule) == (status, rule), result.message
    assert phrase in result.message


@pytest.mark.parametrize("seed", _seeds(False))
def test_shipped_seed_passes_every_guard_on_cpu(cpu_verdicts, seed):
    result = cpu_verdicts[seed]
    assert result.status == "correct", result.message


def test_refused_write_left_no_file(cpu_verdicts):
    assert cpu_verdicts["file_write_runtime"].status == "rejected"
    assert not STASH.exists(), "the audit hook must stop the write, not only report it"


# -- on a GPU --------------------------------------------------------------------------------------------------
EXPECTED_GPU = {
    "side_stream": ("rejected", "runtime.side_stream", "side stream"),
    # ...or, when a large case's output is read before the side stream has finished: check.unwritten (see below).
    "cache_by_pointer": ("incorrect", "check.timed_output", "timed call"),
}
TIMED_TRUE = {"side_stream_shielded"}
"""GPU cheats whose trick the timing undoes: they come out correct, at the speed of the work they really do."""
GPU_ALSO = {  # cheats that already run on the CPU, re-run where CUDA events and cuBLAS are real
    "timer_patch": ("rejected", "runtime.timer_patched", "time.perf_counter"),
    "event_patch": ("rejected", "runtime.timer_patched", "torch.cuda.Event.elapsed_time"),
    "library_dynamic_name": ("rejected", "runtime.library_op", "aten.mm"),
    "thread_hidden": ("rejected", "runtime.thread", "running kernel.py"),
    "honest_tiled": ("correct", None, ""),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(EXPECTED_GPU | GPU_ALSO))
def test_cheat_gets_its_verdict_on_gpu(tmp_path, name):
    status, rule, phrase = (EXPECTED_GPU | GPU_ALSO)[name]
    result = _evaluate(name, tmp_path, device="cuda", check_suite="tiny", bench_suite="bench")
    if name == "side_stream" and result.rule == "check.unwritten":
        # Each bench case is checked once before it is timed; on a large case the worker may read the output before
        # the unjoined side stream has written it. Caught either way; which way depends on the race.
        status, rule, phrase = "incorrect", "check.unwritten", "never written"
    assert (result.status, result.rule) == (status, rule), result.message
    assert phrase in result.message


@pytest.mark.gpu
def test_work_hidden_under_the_launch_shield_is_timed(tmp_path):
    """side_stream_shielded queues its product on a side stream, stretches its host time so the launch shield grows
    to 2 ms, and on the current stream spins as long as the product would take at PRETEND_TFLOPS. Under a spin of one
    thread its product ran beside the shield, and it scored 1.65x cuBLAS on the H200 at every bench case, each timed
    at its pretended time (0.109 ms at 4096³, 0.106 pretended; BENCHMARKS.md). The shield's spin holds every SM
    (avo/evaluate/worker/hold.py), so the product runs inside the timed window: 0.287 ms there, 0.535x."""
    result = _evaluate("side_stream_shielded", tmp_path, device="cuda", check_suite="tiny", bench_suite="bench")
    assert result.status == "correct", result.message  # honest once its work is timed: two streams, joined
    source = (CHEATS / "side_stream_shielded" / "kernel.py").read_text()
    pretend = float(re.search(r"^PRETEND_TFLOPS = ([\d.]+)", source, re.M).group(1))
    rows = result.bench_cases()
    assert rows
    for row in rows:
        m, n, k = map(int, row.case.split("x"))
        pretended_ms = 2.0 * m * n * k / (pretend * 1e12) * 1e3
        assert row.ms > 1.5 * pretended_ms, (row.case, row.ms, pretended_ms)
    assert result.fitness < 1.0


@pytest.mark.gpu
@pytest.mark.parametrize("seed", _seeds(False) + _seeds(True))
def test_shipped_seed_passes_every_guard_on_gpu(tmp_path, seed):
    result = _evaluate(seed, tmp_path, device="cuda", bench_suite="")
    assert result.status == "correct", result.message
