"""The worker's set-up: the library's ops (and, on a GPU, its plans) per bench case recorded before any candidate.

On the CPU the interpreter's suites are one and the same, so the set-up records nothing there; given distinct suites
(gemm's tiny one checked, its check suite as the bench) the same recording runs and is compared the same way."""

from __future__ import annotations

import functools
import io

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
