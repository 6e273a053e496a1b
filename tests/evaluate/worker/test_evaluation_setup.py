"""The worker's set-up: the library's ops (and, on a GPU, its plans) per bench case recorded before any candidate.

On the CPU the interpreter's suites are one and the same, so the set-up records nothing there; given distinct suites
(gemm's tiny one checked, its check suite as the bench) the same recording runs and is compared the same way."""

from __future__ import annotations

import functools
import io
import subprocess
import sys
from pathlib import Path

import pytest

from avo.config import EvalConfig
from avo.evaluate import guards
from avo.evaluate.worker import evaluation
from avo.evaluate.worker.candidate import Progress

WHERE = [pytest.param("attention", "cuda", "check", "bench", marks=pytest.mark.gpu, id="attention-gpu"),
         pytest.param("gemm", "interpret", "tiny", "check", id="gemm-cpu")]


@pytest.mark.parametrize("task_name, device, check_suite, bench_suite", WHERE)
def test_setup_records_the_library_ops_of_every_bench_case_as_the_bench_stage_would(task_name, device, check_suite,
                                                                                     bench_suite):
    from avo.gpus import resolve

    setup = {"task": task_name, "device": device, "gpu": resolve("auto", device).name, "check_suite": check_suite,
             "bench_suite": bench_suite, "seed": 5, "config": EvalConfig().model_dump(mode="json")}
    prep = evaluation.prepare(setup, Progress(io.StringIO()))
    task, ctx = prep.ctx.task, prep.ctx
    cases = task.cases(bench_suite)
    assert set(ctx.bench_ops) == {c.name for c in cases}
    assert prep.seconds["setup.library"] > 0
    for i in (0, len(cases) - 1):  # what bench() recorded on its own inputs before the set-up did it
        inputs = task.make_inputs(cases[i], ctx.seed + 1_000_000 + 1000 * i, ctx.tensor_device)
        assert ctx.bench_ops[cases[i].name] == guards.forbidden_ops(functools.partial(task.library, *inputs))
        assert ctx.bench_ops[cases[i].name]  # the library dispatches something the candidate may not



def _producer_probe(mode: str) -> subprocess.CompletedProcess:
    """producer_probe.py in a process of its own: the worker forks its producer from a process whose torch has not
    started its CPU threads yet, as a worker's is (a fork after they start can leave the child's products waiting
    on threads it does not have)."""
    probe = Path(__file__).with_name("producer_probe.py")
    return subprocess.run([sys.executable, str(probe), mode], capture_output=True, text=True, timeout=300)


def test_the_references_are_computed_beside_the_rest_of_the_set_up_and_waited_for_before_it_ends():
    """The producer starts its references only once the worker has gone on to record the library's ops: a set-up
    that waited for the producer first would leave it waiting (it gives up after a minute, and the set-up fails)."""
    done = _producer_probe("beside")
    assert done.returncode == 0 and "every reference written, the producer gone" in done.stdout, done.stderr[-3000:]


def test_a_producer_that_fails_fails_the_set_up():
    done = _producer_probe("fails")
    said = "set-up failed: the check suite's references could not be computed"
    assert done.returncode == 0 and said in done.stdout, done.stderr[-3000:]
