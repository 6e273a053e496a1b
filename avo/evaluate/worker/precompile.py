"""Compile-ahead: a candidate's Triton kernels built in parallel, for every case of both suites, before the check stage.

Triton compiles a kernel on its first launch with each new specialization (dtypes, constexprs, integer arguments
equal to 1 or divisible by 16, pointer alignment), one after another on the launching thread. On the H200 host that
is about a second apiece, and an attention candidate meets 14 of them over the check and bench suites. Here the
candidate's wrapper runs once per case on meta tensors (shapes, strides and dtypes; no memory, no GPU work) while
every Triton launch is turned into a compile-only warm-up under Triton's AsyncCompileMode. The compiles run on a
thread pool (the compiler's long passes and ptxas run outside the GIL) and land in each kernel's own cache, where
the real launches find them. An autotuned kernel has all its configs compiled, and its choice is left to its real
launches.

Best effort by design: a wrapper that fails on meta tensors, a kernel that fails to compile, or a Triton without
AsyncCompileMode leaves those kernels to compile on first launch as before, where any error is reported as usual.
The pool's threads start before the Sentinel takes its snapshot, so they are the evaluator's, not the candidate's.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable
from unittest import mock

MAX_WORKERS = 32


@dataclass
class Outcome:
    cases: int = 0
    """Cases whose wrapper ran through on meta tensors."""
    skipped: int = 0
    """Cases whose wrapper raised on meta tensors (their kernels compile on first launch)."""
    kernels: int = 0
    """Specializations compiled ahead."""
    note: str = ""


class CompilePool:
    """A thread pool whose workers are all started (and parked) on creation."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or min(MAX_WORKERS, max(2, os.cpu_count() or 2))
        self.executor = ThreadPoolExecutor(self.workers, thread_name_prefix="avo-compile")
        barrier = threading.Barrier(self.workers + 1)
        for _ in range(self.workers):  # each blocks until all exist: the executor spawns a new thread per submit
            self.executor.submit(barrier.wait, 30)
        barrier.wait(30)


def pool_for(task: Any) -> CompilePool | None:
    """A parked pool where compiling ahead applies: a task that opts in (its wrappers run on meta tensors) and a
    Triton with AsyncCompileMode."""
    if not getattr(task, "compile_ahead", False) or not supported():
        return None
    return CompilePool()


def meta_calls(task: Any, entry: Callable, suites: list[str]) -> list[Callable[[], Any]]:
    """One call of the candidate per case of the suites (each suite once), on the case's inputs as meta tensors."""
    from avo.tasks.meta import meta_inputs

    cases = [case for suite in dict.fromkeys(s for s in suites if s) for case in task.cases(suite)]
    return [lambda case=case: task.call(entry, meta_inputs(task, case)) for case in cases]


def supported() -> bool:
    try:
        from triton.runtime import _async_compile  # noqa: F401  (in Triton 3.6 and 3.9, not in older releases)
    except ImportError:
        return False
    return True


def compile_ahead(pool: CompilePool, calls: list[Callable[[], Any]]) -> Outcome:
    """Run each call with Triton launches turned into parallel compiles; returns when every compile has ended."""
    from triton.runtime import _async_compile
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    outcome = Outcome()
    original = JITFunction.run

    def compile_only(self, *args, grid, warmup, **kwargs):
        return original(self, *args, grid=grid, warmup=True, **kwargs)

    def every_config(self, *args, **kwargs):
        # Benchmarking needs real launches; the real call chooses. Its cache is left untouched.
        for config in self.configs:
            try:
                self.fn.run(*args, **kwargs, **config.all_kwargs())
            except Exception:
                pass

    try:
        mode = _async_compile.AsyncCompileMode(pool.executor, ignore_errors=True)
    except TypeError:  # a Triton without ignore_errors: the mode's exit raises the first compile error
        mode = _async_compile.AsyncCompileMode(pool.executor)
    with mock.patch.object(JITFunction, "run", compile_only), mock.patch.object(Autotuner, "run", every_config):
        try:
            with mode:
                for call in calls:
                    try:
                        call()
                        outcome.cases += 1
                    except Exception as exc:
                        outcome.skipped += 1
                        outcome.note = outcome.note or f"{type(exc).__name__}: {str(exc)[:200]}"
                outcome.kernels = len(mode.future_kernels)
                wait(list(mode.raw_futures))  # all of them, even if the exit's finalizing stops at a failure
        except Exception:
            pass  # that kernel's first real launch raises its compile error again, with its message
    return outcome
