"""One evaluation in the worker. First the set-up that needs no candidate (`prepare`: task, the reference's ops,
toolchain warm-up), which a worker started ahead of its request does while it waits; then, per candidate: static
guards -> Sentinel -> import -> Triton kernels compiled ahead, in parallel (precompile.py; stage "compile") -> check
suite (its first launch marked as stage "compile" too; its outputs judged by avo, against references this process never
held: references.py) -> Sentinel.verify; then the bench stage times every passing
candidate interleaved with the library. Stage starts are appended to a progress file, so the parent can apply
per-stage limits and say where a candidate hung. `finalize` turns what was seen into each candidate's EvalResult.
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from avo.evaluate import guards
from avo.evaluate.cuda_compile import has_cuda_sources, no_gpu_outcome
from avo.evaluate.guards import Rejection
from avo.evaluate.result import EvalResult
from avo.evaluate.worker import timing  # noqa: F401  (binds the clock before any candidate code runs)
from avo.evaluate.worker.bench import bench, release_memory
from avo.evaluate.worker.candidate import Candidate, Context, Progress, Verdict
from avo.evaluate.worker.check import check_candidate, compile_candidate
from avo.evaluate.worker.correctness import poison_allocations
from avo.evaluate.worker.loader import CandidateLoadError, load_entry
from avo.evaluate.worker.precision import result_precision
from avo.evaluate.worker.stage_clock import Parts, stage


def load_candidate(ctx: Context, cand: Candidate) -> None:
    ctx.progress.mark("static", who=cand.index)
    with stage(cand.result.stage_s, "static"):
        is_wrapper = getattr(ctx.task, "is_reference_wrapper", None)
        cand.reference_wrapper = bool(is_wrapper and is_wrapper(cand.path))
        if not cand.reference_wrapper:
            guards.check_static(cand.path, ctx.task.name, ctx.ops, ctx.kernel_required)
        if cand.cuda and ctx.device == "cuda":
            from avo.cuda import prepare

            prepare(0)  # CuPy/NVRTC start-up (threads, lazy bindings) happens before the Sentinel's snapshot
        # The working directory is this evaluation's own (the harness makes a fresh one); Triton's launcher build
        # writes its C source there on some versions.
        cand.sentinel = guards.Sentinel(cand.path, allowed_dirs=(Path.cwd(),))
    ctx.progress.mark("import", who=cand.index)
    # Bytecode for modules imported from here on is looked up in (and written to) an empty folder, never the
    # candidate's __pycache__ (a planted .pyc would run code the static guards never read). Set only now, so torch
    # and triton, already imported (see _warm_toolchain), keep their cached bytecode.
    sys.pycache_prefix = tempfile.mkdtemp(prefix="pycache-")
    with stage(cand.result.stage_s, "import"):
        try:
            cand.entry = load_entry(cand.path, ctx.task.entry)
        except CandidateLoadError as exc:
            raise Verdict("compile_error", exc.rule, exc.message) from None
        cand.sentinel.verify("import")
        if cand.cuda and ctx.device != "cuda":
            raise Verdict(*no_gpu_outcome(cand.path, ctx.gpu.arch))


def finalize(ctx: Context, cand: Candidate, timed: bool) -> EvalResult:
    r = cand.result
    if cand.done:
        r.fitness = 0.0
        return r
    if cand.failures:
        first = cand.failures[0]
        r.status, r.rule, r.fitness = "incorrect", first.rule, 0.0
        failed = [c.case for c in r.cases if c.correct is False]
        r.message = first.message
        if len(failed) > 1:
            r.message += f" ({len(failed)} cases failed: {', '.join(failed[:8])})"
        return r
    r.status, r.rule = "correct", None
    if cand.reference_wrapper:
        r.message = ("the task's first candidate: its reference wrapped unchanged, scored as the baseline (the guard "
                     "against the reference's ops does not apply to it; any edit makes it an ordinary candidate)")
    if timed:  # a workload weighs its cases (equal weights: the plain geometric mean)
        weights = {case.name: case.weight for case in ctx.task.cases(ctx.bench_suite)}
        for c in r.bench_cases():
            c.weight = weights.get(c.case, 1.0)
    r.fitness = r.weighted_fitness() if timed else 0.0
    r.timing_source = ("gpu" if ctx.device == "cuda" else "interpreter") if timed else "none"
    r.library_precision = result_precision(r.bench_cases())
    flags = []
    for c in r.bench_cases():
        if c.tflops is not None and c.tflops > ctx.gpu.peak_bf16_tflops:
            flags.append(f"{c.case}: {c.tflops:.0f} TFLOPS exceeds the {ctx.gpu.name} peak of "
                         f"{ctx.gpu.peak_bf16_tflops:.0f}")
        elif c.speedup is not None and c.speedup > 3.0:
            flags.append(f"{c.case}: {c.speedup:.2f}x the library")
    if flags:
        r.suspicious, r.suspicious_reason = True, "; ".join(flags)
    return r


@dataclass
class Prepared:
    """A worker set up for its task before any candidate exists in the process (see `prepare`)."""

    ctx: Context
    forbidden: frozenset[str]
    base: dict
    seconds: dict[str, float]
    startup: float
    done_at: float
    """Wall-clock time the set-up ended (a request that came earlier waited for it)."""

    def known(self) -> dict:
        """What later workers of the same task may reuse, reported before any candidate code runs."""
        return {"forbidden": sorted(self.forbidden)}


def prepare(setup: dict, progress: Progress) -> Prepared:
    """Everything that does not depend on the candidates: the task, the ops the reference and library dispatch,
    the toolchain warmed, the compile pool started. A worker started ahead of its request (harness.WorkerProcess)
    does this while the previous candidate is still being scored elsewhere or the agent is thinking."""
    from avo import tasks
    from avo.config import EvalConfig
    from avo.gpus import PROFILES

    startup = setup.get("startup_s")  # interpreter start and imports
    if startup is None:
        startup = time.time() - float(setup.get("spawned_at") or time.time())
    parts = Parts("setup")
    parts.start("task")
    config = EvalConfig.model_validate(setup["config"])
    task = tasks.load(setup["task"], config.workload)  # a workload's cases are its bench suite
    seed = setup["seed"] if setup.get("seed") is not None else secrets.randbelow(2**31 - 2_000_000)
    ctx = Context(task=task, device=setup["device"], gpu=PROFILES[setup["gpu"]], config=config,
                  seed=seed, progress=progress, check_suite=setup["check_suite"],
                  bench_suite=setup.get("bench_suite") or "")
    # The references first, by a process of their own forked before this one touches the GPU (references.py); it
    # computes them while this one goes on with its set-up, and is waited for at the end of it.
    parts.start("references")
    ctx.judge, references_done = _judge(ctx, setup)
    base = _base_fields(ctx)
    # Before any Sentinel exists, so that nothing the reference or the library does reads as the candidate's. (The
    # recorder's dispatch mode imports no torch._dynamo: guards/modes.py.)
    parts.start("ops")
    forbidden = _forbidden(ctx, setup.get("forbidden"))
    parts.start("library")
    ctx.bench_ops = _bench_ops(ctx)
    parts.start("warm")
    _warm_toolchain(ctx)
    ctx.compile_pool = _compile_pool(ctx)  # its threads start before any Sentinel: the evaluator's own
    parts.start("references")
    references_done()  # before the set-up is reported done: no candidate code runs while the producer does
    parts.stop()
    return Prepared(ctx, forbidden, base, parts.seconds, max(0.0, startup), time.time())


def run(request: dict, progress: Progress) -> list[EvalResult]:
    """One request, set-up included (`prepare`, then `evaluate`)."""
    return evaluate(prepare(request, progress), request)


def evaluate(prep: Prepared, request: dict) -> list[EvalResult]:
    """The request's candidates through the stages, on a worker `prepare` set up."""
    ctx, forbidden, bench_suite, progress = prep.ctx, prep.forbidden, prep.ctx.bench_suite, prep.ctx.progress
    requested = float(request.get("requested_at") or prep.done_at)
    cands = [Candidate(i, Path(p).resolve(), EvalResult(status="crash", **prep.base), cuda=has_cuda_sources(Path(p)))
             for i, p in enumerate(request["candidates"])]
    for cand in cands:
        # Per evaluation, not per candidate: every candidate's result shows where the rest of wall_s went. A
        # worker set up ahead of its request shows `waited`: the part of the set-up the request waited for.
        cand.result.stage_s["startup"] = round(prep.startup, 3)
        cand.result.stage_s["setup"] = round(sum(prep.seconds.values()), 3)
        cand.result.stage_s.update(prep.seconds)
        if request.get("requested_at"):
            cand.result.stage_s["waited"] = round(max(0.0, prep.done_at - requested), 3)
    for cand in cands:
        try:
            load_candidate(ctx, cand)
            compile_candidate(ctx, cand)
            check_candidate(ctx, cand, forbidden)
        except Verdict as verdict:
            cand.finish(verdict)
        except Rejection as exc:
            cand.finish(Verdict("rejected", exc.rule, exc.message))
    timed = bool(bench_suite) and any(c.passing for c in cands)
    if timed:
        progress.mark("bench")
        started = time.perf_counter()
        bench(ctx, [c for c in cands if c.passing], forbidden)
        for cand in cands:
            cand.result.stage_s["bench"] = round(time.perf_counter() - started, 3)
    return [finalize(ctx, c, timed) for c in cands]


def _forbidden(ctx: Context, known: list[str] | None = None) -> frozenset[str]:
    """The compute ops of the reference and the library over every check case (a backend may depend on shape).

    `known`: the set an earlier worker of this task recorded before any candidate ran in it (the parent passes it
    on; it depends on shapes and dtypes, not on the seed). Then only the first check case is recorded, which warms
    the recorder as the full recording would; were its ops not all in `known` (another library build), the full
    recording runs after all."""
    task = ctx.task
    cases = task.cases(ctx.check_suite)

    def recorded(count: int) -> frozenset[str]:
        sets = [task.make_inputs(case, ctx.seed + i, ctx.tensor_device) for i, case in enumerate(cases[:count])]
        return guards.forbidden_ops(lambda: [(task.reference(*x), task.library(*x)) for x in sets])

    forbidden = None
    if known is not None and cases:
        forbidden = frozenset(known) if recorded(1) <= frozenset(known) else None
    if forbidden is None:
        forbidden = recorded(len(cases))
    forbidden = guards.watched_ops(ctx.ops, forbidden)
    with poison_allocations():  # its first use, too, belongs before the Sentinel
        task.make_inputs(cases[0], ctx.seed, ctx.tensor_device)
    return forbidden


def _judge(ctx: Context, setup: dict) -> tuple[Any, Callable[[], None]]:
    """The judge, and what waits for the references' producer (nothing to wait for in-process)."""
    from avo.evaluate.worker import references

    if setup.get("refs_fd") is None:
        return references.LocalJudge(ctx), lambda: None
    done = references.produce_apart(ctx, setup["refs_fd"])
    return references.ChannelJudge(setup["check_fd"], sys.stdin), done


def _bench_ops(ctx: Context) -> dict[str, frozenset[str]]:
    """The library once on each bench case's shapes (inputs of another seed, freed at once), under the op recorder
    where the policy watches ops: the ops per case, and the library's first-call work on each shape (cuDNN builds
    an execution plan per shape, ~0.1 s each) done before any candidate. Nothing where the bench suite is the check
    suite (the interpreter's tiny one): `_forbidden` recorded the library over those cases."""
    task = ctx.task
    if not ctx.bench_suite or ctx.bench_suite == ctx.check_suite:
        return {}
    ops = {}
    for i, case in enumerate(task.cases(ctx.bench_suite)):
        inputs = task.make_inputs(case, ctx.seed + 2_000_000 + i, ctx.tensor_device)
        if guards.watches_ops(ctx.ops):
            ops[case.name] = guards.forbidden_ops(functools.partial(task.library, *inputs))
        else:
            task.library(*inputs)
        del inputs
    release_memory(ctx)
    return ops


def _import_toolchain() -> None:
    """torch, Triton and the stage modules imported: no GPU is touched (CUDA starts at its first use); an older
    Triton's interpreter mended where this NumPy breaks it (evaluate/interpreter.py)."""
    import importlib

    for name in ("torch", "triton", "triton.language", "avo.tasks", "avo.evaluate.guards",
                 "avo.evaluate.worker.check", "avo.evaluate.worker.bench", "avo.evaluate.worker.precompile"):
        importlib.import_module(name)
    from avo.evaluate import interpreter

    if interpreter.interpreting():
        interpreter.fix_scalar_index()


def _warm_toolchain(ctx: Context) -> None:
    """One tiny Triton kernel compiled and launched before any candidate: the compiler and launcher modules Triton
    imports lazily are loaded now, with their cached bytecode, and their start-up is not billed to the candidate."""
    if ctx.device != "cuda":
        return
    try:
        from avo.evaluate.worker.warm import warm_triton

        warm_triton()
    except Exception:  # a toolchain that cannot compile shows up, with its message, as the candidate's compile error
        pass


def _compile_pool(ctx: Context) -> Any:
    """Started before the candidates are known: a CUDA C++ candidate leaves it unused (compile_candidate)."""
    from avo.evaluate.worker import precompile

    way = ctx.config.compile_ahead
    return precompile.pool_for(ctx.task, way) if ctx.device == "cuda" and way != "off" else None


def _base_fields(ctx: Context) -> dict:
    import torch
    import triton

    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__,
                "cuda": torch.version.cuda or "none"}
    versions["gpu_device"] = torch.cuda.get_device_name() if ctx.device == "cuda" else "none (interpreter)"
    if ctx.device == "cuda":
        versions["gpu_capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    return {"device": ctx.device, "gpu": ctx.gpu.name, "library": ctx.task.library_name(), "versions": versions,
            "seed": ctx.seed, "ops": ctx.ops}
