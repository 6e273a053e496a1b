"""The worker's set-up on a GPU: the library's ops and plans per bench case recorded before any candidate."""

from __future__ import annotations

import functools
import io

import pytest

from avo.config import EvalConfig
from avo.evaluate import guards
from avo.evaluate.worker import evaluation
from avo.evaluate.worker.candidate import Progress

pytestmark = pytest.mark.gpu


def test_setup_records_the_library_ops_of_every_bench_case_as_the_bench_stage_would():
    from avo.gpus import resolve

    setup = {"task": "attention", "device": "cuda", "gpu": resolve("auto", "cuda").name, "check_suite": "check",
             "bench_suite": "bench", "seed": 5, "config": EvalConfig().model_dump(mode="json")}
    prep = evaluation.prepare(setup, Progress(io.StringIO()))
    task, ctx = prep.ctx.task, prep.ctx
    cases = task.cases("bench")
    assert set(ctx.bench_ops) == {c.name for c in cases}
    assert prep.seconds["setup.library"] > 0
    for i in (0, len(cases) - 1):  # what bench() recorded on its own inputs before the set-up did it
        inputs = task.make_inputs(cases[i], ctx.seed + 1_000_000 + 1000 * i, "cuda")
        assert ctx.bench_ops[cases[i].name] == guards.forbidden_ops(functools.partial(task.library, *inputs))
        assert ctx.bench_ops[cases[i].name]  # the library dispatches something the candidate may not
