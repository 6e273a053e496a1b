"""Compile-ahead: a candidate's Triton kernels built in parallel, for every case of both suites, before the check stage.

Triton compiles a kernel on its first launch with each new specialization (dtypes, constexprs, integer arguments
equal to 1 or divisible by 16, pointer alignment), one after another on the launching thread. On the H200 host that
is about a second apiece, and an attention candidate meets 13–14 of them over the check and bench suites. Here the
candidate's wrapper runs once per case on meta tensors (shapes, strides and dtypes; no memory, no GPU work) while
every Triton launch only hands its compile to us (through Triton's AsyncCompileMode hook), deduplicated by cache key.
The compiles then run in parallel, in one of two ways:

- processes (where os.fork exists): forked children of the worker, each compiling its share into Triton's cache on
  disk (each kernel's launcher too, `build_launcher`), reporting each kernel it compiled, and exiting; the worker
  then loads each from that cache (a cache hit: milliseconds). Triton's compiler holds the GIL for much of its
  work (a busy Python thread beside one compile doubles its time), so threads of one process contend for it,
  processes do not. A child touches no GPU:
  compiling for a named target needs no driver. What a child does stays in it but for files, and the audit hook
  refuses a candidate's writes there as in the worker; a kernel whose compile failed, or raised a Sentinel finding,
  or was not done by CHILD_LIMIT_S, is left to its first launch, in the worker;
- threads (`EvalConfig.compile_ahead = "threads"`, or no fork): the pool's threads, as Triton's AsyncCompileMode
  runs them (their parses of the kernels' sources take turns where CPython needs it: avo/util/pyast.py).

An autotuned kernel has all its configs compiled, and its choice is left to its real launches. Best effort by
design: a wrapper that fails on meta tensors, a kernel that fails to compile, or a Triton without AsyncCompileMode
leaves those kernels to compile on first launch as before, where any error is reported as usual. The pool's threads
start before the Sentinel takes its snapshot, so they are the evaluator's, not the candidate's.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable
from unittest import mock

from avo.evaluate.guards.sentinel import findings
from avo.util.procs import die_with_parent

MAX_WORKERS = 32
CHILD_LIMIT_S = 120.0
"""A compile child still running after this long is killed; its kernels compile on their first launch."""
WAYS = ("processes", "threads")


@dataclass
class Outcome:
    cases: int = 0
    """Cases whose wrapper ran through on meta tensors."""
    skipped: int = 0
    """Cases whose wrapper raised on meta tensors (their kernels compile on first launch)."""
    kernels: int = 0
    """Specializations compiled ahead."""
    failed: int = 0
    """Of those, the ones whose compile failed (or ran out of time): left to the first launch."""
    way: str = ""
    """'processes' or 'threads'."""
    note: str = ""


class CompilePool:
    """A thread pool whose workers are all started (and parked) on creation; `way` says how compiles run."""

    def __init__(self, workers: int | None = None, way: str = "processes"):
        self.workers = workers or min(MAX_WORKERS, max(2, os.cpu_count() or 2))
        self.way = way if way in WAYS and (way != "processes" or hasattr(os, "fork")) else "threads"
        self.executor = ThreadPoolExecutor(self.workers, thread_name_prefix="avo-compile")
        barrier = threading.Barrier(self.workers + 1)
        for _ in range(self.workers):  # each blocks until all exist: the executor spawns a new thread per submit
            self.executor.submit(barrier.wait, 30)
        barrier.wait(30)


def pool_for(task: Any, way: str = "processes") -> CompilePool | None:
    """A parked pool where compiling ahead applies: a task that opts in (its wrappers run on meta tensors) and a
    Triton with AsyncCompileMode's hook."""
    if not getattr(task, "compile_ahead", False) or not supported():
        return None
    return CompilePool(way=way)


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


@dataclass
class Job:
    compile: Callable[[], Any]
    finalizers: list[Callable[[Any], None]] = field(default_factory=list)


class _Capture:
    """Takes the place of Triton's AsyncCompileMode while the wrappers run: each launch's compile is collected
    (once per cache key) instead of run. Its placeholder in the kernel's cache is None, removed afterwards."""

    def __init__(self) -> None:
        self.jobs: dict[Any, Job] = {}
        self.cleanups: list[Callable[[Any], None]] = []

    def submit(self, key, compile_fn, finalize_fn, *cleanup_fn):
        self.jobs.setdefault(key, Job(compile_fn)).finalizers.append(finalize_fn)
        self.cleanups.extend(cleanup_fn)
        return None


def compile_ahead(pool: CompilePool, calls: list[Callable[[], Any]]) -> Outcome:
    """Run each call with its Triton launches collected, then compile them all in parallel; returns when every
    compile has ended and its kernel sits in its JITFunction's cache, where the real launches find it."""
    outcome = Outcome(way=pool.way)
    jobs = _collect(calls, outcome)
    outcome.kernels = len(jobs)
    failed = in_children(jobs, pool.workers) if pool.way == "processes" and jobs else set()
    # From the cache on disk where a child compiled it; compiled here where no child could be forked (or threads).
    loaded = list(pool.executor.map(_load, [None if i in failed else job for i, job in enumerate(jobs)]))
    outcome.failed = sum(not _finalize(job, kernel) for job, kernel in zip(jobs, loaded))
    if not outcome.note:
        outcome.note = next((str(k) for k in loaded if isinstance(k, _Failed)), "")
    return outcome


class _Failed:
    """A compile that raised here (left to the first launch, which raises it again with its message)."""

    def __init__(self, exc: BaseException):
        self.text = f"{type(exc).__name__}: {str(exc)[:200]}"

    def __str__(self) -> str:
        return self.text


def _finalize(job: Job, kernel: Any) -> bool:
    """The kernel into its JITFunction's cache (Triton's finalize, which runs the post-compile hook a candidate may
    set); False where there is none or that fails: the first launch then raises whatever failed with its message."""
    if kernel is None or isinstance(kernel, _Failed):
        return False
    try:
        for finalize in job.finalizers:
            finalize(kernel)
    except Exception:
        return False
    return True


def _collect(calls: list[Callable[[], Any]], outcome: Outcome) -> list[Job]:
    from triton.runtime import _async_compile
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

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

    capture = _Capture()
    token = _async_compile.active_mode.set(capture)
    try:
        with mock.patch.object(JITFunction, "run", compile_only), mock.patch.object(Autotuner, "run", every_config):
            for call in calls:
                try:
                    call()
                    outcome.cases += 1
                except Exception as exc:
                    outcome.skipped += 1
                    outcome.note = outcome.note or f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        _async_compile.active_mode.reset(token)
        for cleanup in capture.cleanups:  # the None placeholders out of the kernels' caches
            try:
                cleanup(None)
            except KeyError:  # a key launched twice: its placeholder is gone already
                pass
    return list(capture.jobs.values())


def _load(job: Job | None) -> Any:
    """The compiled kernel (from Triton's cache on disk where a child compiled it), None where a child did not
    compile it, or _Failed saying why it failed here."""
    if job is None:
        return None
    try:
        return job.compile()
    except Exception as exc:
        return _Failed(exc)  # its first real launch compiles it again and raises the error with its message


def in_children(jobs: list[Job], workers: int, limit_s: float = CHILD_LIMIT_S) -> set[int]:
    """Each share of the jobs compiled into Triton's cache on disk by a forked child, which reports each job it
    compiled through a pipe. Returns the indices of the jobs a child did not compile (it failed, or was killed past
    `limit_s`); a share no child could be forked for is not among them."""
    shares = [list(range(i, len(jobs), workers)) for i in range(min(workers, len(jobs)))]
    children: dict[int, tuple[list[int], int]] = {}  # pid -> (share, the pipe's read end)
    forked: set[int] = set()
    compiled: set[int] = set()
    gc.freeze()  # the children's garbage collector leaves the inherited objects (and their pages) alone
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, use of fork()": see the docstring
            for share in shares:
                read, write = os.pipe()
                try:
                    pid = os.fork()
                except OSError:  # no more processes: the rest compile in this one
                    os.close(read)
                    os.close(write)
                    break
                if pid == 0:
                    os.close(read)
                    _child(jobs, share, write)
                os.close(write)
                children[pid] = (share, read)
                forked.update(share)
    finally:
        gc.unfreeze()
    try:
        deadline = time.monotonic() + limit_s
        while children and time.monotonic() < deadline:
            for pid in list(children):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    compiled |= _reported(children.pop(pid)[1])
            time.sleep(0.002)
    finally:  # past the limit, or interrupted: no child outlives the call
        for pid, (_, read) in children.items():
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            compiled |= _reported(read)
    return forked - compiled


def _reported(read: int) -> set[int]:
    with os.fdopen(read) as pipe:
        return {int(line) for line in pipe.read().split()}


def _child(jobs: list[Job], share: list[int], write: int) -> None:
    """In a forked child: compile the share into Triton's cache, writing the index of each job compiled, and exit at
    once (no atexit, no flushed buffers of the parent's files). A job whose compile made a Sentinel record a finding
    (the candidate's compile-time code tried a write or a spawn, refused here) is not reported: it compiles again on
    its first launch in the worker, where the finding is the worker's."""
    try:
        die_with_parent()
        gc.disable()
        for i in share:
            before = findings()
            try:
                kernel = jobs[i].compile()
            except BaseException:
                continue
            if findings() == before:
                os.write(write, f"{i}\n".encode())
                build_launcher(kernel)
    finally:
        os._exit(0)


def build_launcher(kernel: Any) -> None:
    """The kernel's launcher built into Triton's cache as well, where its first launch finds it. Triton up to 3.6
    compiles a C launcher per kernel signature with gcc on that first launch (about a second each; later ones have
    a generic launcher and build nothing here); in a sandboxed worker, whose cache is its own, every launch of a new
    signature paid that in the check stage, one after another. Best effort: whatever fails here is built there."""
    try:
        from triton.runtime import driver

        driver.active.launcher_cls(kernel.src, kernel.metadata)
    except Exception:
        pass
