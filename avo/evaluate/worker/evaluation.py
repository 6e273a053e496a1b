"""One evaluation in the worker: every candidate through static guards -> Sentinel -> import -> Triton kernels
compiled ahead, in parallel (precompile.py; stage "compile") -> check suite (its first launch marked as stage
"compile" too) -> Sentinel.verify; then the bench stage times every passing candidate interleaved with the library.
Stage starts are appended to a progress file, so the parent can apply per-stage limits and say where a candidate
hung. `finalize` turns what was seen into each candidate's EvalResult.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from avo.evaluate import guards
from avo.evaluate.cuda_compile import has_cuda_sources, no_gpu_outcome
from avo.evaluate.guards import Rejection
from avo.evaluate.result import EvalResult, geomean
from avo.evaluate.worker import timing  # noqa: F401  (binds the clock before any candidate code runs)
from avo.evaluate.worker.bench import bench
from avo.evaluate.worker.candidate import Candidate, Context, Progress, Verdict
from avo.evaluate.worker.check import check_candidate, compile_candidate
from avo.evaluate.worker.correctness import poison_allocations
from avo.evaluate.worker.loader import CandidateLoadError, load_entry
from avo.evaluate.worker.stage_clock import Parts, stage


def load_candidate(ctx: Context, cand: Candidate) -> None:
    ctx.progress.mark("static", who=cand.index)
    with stage(cand.result.stage_s, "static"):
        is_wrapper = getattr(ctx.task, "is_reference_wrapper", None)
        cand.reference_wrapper = bool(is_wrapper and is_wrapper(cand.path))
        if not cand.reference_wrapper:
            guards.check_static(cand.path, ctx.task.name, ctx.ops)
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
    r.fitness = geomean([c.speedup for c in r.bench_cases()]) if timed else 0.0
    r.timing_source = ("gpu" if ctx.device == "cuda" else "interpreter") if timed else "none"
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


def run(request: dict, progress: Progress) -> list[EvalResult]:
    from avo import tasks
    from avo.gpus import PROFILES

    startup = time.time() - float(request.get("spawned_at") or time.time())  # interpreter start and imports
    setup = Parts("setup")
    setup.start("task")
    task = tasks.load(request["task"])
    bench_suite = request.get("bench_suite") or ""
    seed = request["seed"] if request.get("seed") is not None else secrets.randbelow(2**31 - 2_000_000)
    ctx = Context(task=task, device=request["device"], gpu=PROFILES[request["gpu"]], config=request["config"],
                  seed=seed, progress=progress, check_suite=request["check_suite"], bench_suite=bench_suite)
    base = _base_fields(ctx)
    cands = [Candidate(i, Path(p).resolve(), EvalResult(status="crash", **base), cuda=has_cuda_sources(Path(p)))
             for i, p in enumerate(request["candidates"])]
    # Before any Sentinel exists: recording the reference's ops under a dispatch mode imports torch._dynamo, which
    # rebinds torch.manual_seed; done later, that would read as a candidate patching a scoring function.
    setup.start("ops")
    forbidden = _forbidden(ctx)
    setup.start("warm")
    _warm_toolchain(ctx)
    ctx.compile_pool = _compile_pool(ctx, cands)  # its threads start before any Sentinel: the evaluator's own
    setup.stop()
    for cand in cands:
        # Per evaluation, not per candidate: every candidate's result shows where the rest of wall_s went.
        cand.result.stage_s["startup"] = round(max(0.0, startup), 3)
        cand.result.stage_s["setup"] = round(sum(setup.seconds.values()), 3)
        cand.result.stage_s.update(setup.seconds)
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


def _forbidden(ctx: Context) -> frozenset[str]:
    """The compute ops of the reference and the library over every check case (a backend may depend on shape)."""
    task = ctx.task
    sets = [task.make_inputs(case, ctx.seed + i, ctx.tensor_device)
            for i, case in enumerate(task.cases(ctx.check_suite))]
    forbidden = guards.forbidden_ops(lambda: [(task.reference(*x), task.library(*x)) for x in sets])
    if not guards.watches_ops(ctx.ops):
        forbidden = frozenset()
    with poison_allocations():  # its first use, too, belongs before the Sentinel
        task.make_inputs(task.cases(ctx.check_suite)[0], ctx.seed, ctx.tensor_device)
    return forbidden


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


def _compile_pool(ctx: Context, cands: list[Candidate]) -> Any:
    from avo.evaluate.worker import precompile

    wanted = ctx.device == "cuda" and ctx.config.get("compile_ahead", True) and not all(c.cuda for c in cands)
    return precompile.pool_for(ctx.task) if wanted else None


def _base_fields(ctx: Context) -> dict:
    import torch
    import triton

    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__,
                "cuda": torch.version.cuda or "none"}
    versions["gpu_device"] = torch.cuda.get_device_name() if ctx.device == "cuda" else "none (interpreter)"
    return {"device": ctx.device, "gpu": ctx.gpu.name, "library": ctx.task.library_name(), "versions": versions,
            "seed": ctx.seed, "ops": ctx.ops}
