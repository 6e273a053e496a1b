"""Compile-ahead (evaluate/precompile.py), on the CPU: kernels are compiled for the H200's target without a GPU.

Each specialization the cases need is compiled once, in forked children or on the pool's threads; the real launches
afterwards compile nothing; a wrapper that fails on meta tensors, a kernel that fails to compile or a child that
runs too long only leaves work for the first launch.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("compiles for a GPU target; the interpreter compiles nothing", allow_module_level=True)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from avo.evaluate.worker import precompile  # noqa: E402
from avo.gpus import PROFILES  # noqa: E402
from avo.profile.triton_capture import target_driver  # noqa: E402

pytestmark = pytest.mark.skipif(not precompile.supported(), reason="this Triton has no AsyncCompileMode")


@triton.jit
def _scale(x_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


@triton.jit
def _broken(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.no_such_function(BLOCK))


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def _tuned(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)


def scale(x):
    _scale[(triton.cdiv(x.numel(), 64),)](x, x.numel(), 2.0, BLOCK=64)
    return x


def launch_for_real(fn, *args):
    """What the check stage's first launch does about compiling (without a GPU: compile, do not run). A launch reads
    the kernel's metadata, which raises the compile error where Triton (3.8) keeps a failed compile in its cache."""
    kernel = fn.run(*args, grid=(1,), warmup=True)
    assert kernel.metadata is not None
    return kernel


WAYS = pytest.mark.parametrize("way", precompile.WAYS)


class Counting(precompile.CompilePool):
    def __init__(self, way: str):
        super().__init__(2, way)
        self.submitted = 0
        submit = self.executor.submit

        def counted(*args, **kwargs):
            self.submitted += 1
            return submit(*args, **kwargs)

        self.executor.submit = counted


@pytest.fixture(scope="module")
def h200():
    with target_driver(PROFILES["h200"]):
        yield


@pytest.fixture(autouse=True)
def fresh_kernels(tmp_path, monkeypatch):
    """Each test compiles from nothing: an empty Triton cache on disk and none in memory."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    for fn in (_scale, _broken, _tuned.fn):
        fn.device_caches.clear()
    _tuned.cache.clear()


def meta(n: int, dtype=torch.float32):
    return torch.empty(n, dtype=dtype, device="meta")


@WAYS
def test_each_specialization_is_compiled_once_and_real_launches_compile_nothing(h200, way):
    # n == 1, n plain and n divisible by 16 are three specializations; float16 a fourth; the repeat is none.
    sizes = [(1, torch.float32), (17, torch.float32), (64, torch.float32), (64, torch.float16), (96, torch.float32)]
    pool = Counting(way)
    hits = []
    old_listener = triton.knobs.compilation.listener
    triton.knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
    try:
        outcome = precompile.compile_ahead(pool, [lambda n=n, d=d: scale(meta(n, d)) for n, d in sizes])
    finally:
        triton.knobs.compilation.listener = old_listener
    assert (outcome.cases, outcome.skipped, outcome.kernels, outcome.failed, outcome.way) == (5, 0, 4, 0, way), \
        outcome.note
    assert pool.submitted == 4
    # In processes the children compiled: this process only loaded each kernel from Triton's cache on disk.
    assert hits == ([True] * 4 if way == "processes" else [False] * 4)
    compiles = []
    old = triton.knobs.runtime.jit_cache_hook
    triton.knobs.runtime.jit_cache_hook = lambda *args, **kwargs: compiles.append(args) and None
    try:
        for n, d in sizes:
            launch_for_real(_scale, meta(n, d), n, 2.0, 64)
    finally:
        triton.knobs.runtime.jit_cache_hook = old
    assert compiles == []


@WAYS
def test_a_wrapper_failing_on_meta_tensors_or_a_broken_kernel_leaves_the_work_to_the_first_launch(h200, way):
    def needs_values():
        x = meta(32)
        if x.sum().item() > 0:  # data-dependent: meta tensors have no values
            scale(x)

    outcome = precompile.compile_ahead(precompile.CompilePool(2, way), [
        needs_values,
        lambda: _broken[(1,)](meta(16), BLOCK=16),
        lambda: scale(meta(33)),
    ])
    assert (outcome.cases, outcome.skipped, outcome.kernels, outcome.failed) == (2, 1, 2, 1)
    assert "item" in outcome.note or "meta" in outcome.note.lower()
    with pytest.raises(Exception, match="no_such_function"):
        launch_for_real(_broken, meta(16), 16)


def test_a_compile_that_fails_here_is_named_in_the_outcome(h200):
    """On the pool's threads the compile error itself is at hand: the outcome's note names it."""
    broken = [lambda: _broken[(1,)](meta(16), BLOCK=16)]
    outcome = precompile.compile_ahead(precompile.CompilePool(2, "threads"), broken)
    assert (outcome.kernels, outcome.failed) == (1, 1)
    assert "no_such_function" in outcome.note, outcome.note


@WAYS
def test_an_autotuned_kernel_has_every_config_compiled_and_its_choice_left_to_the_real_launch(h200, way):
    outcome = precompile.compile_ahead(precompile.CompilePool(2, way), [lambda: _tuned[(1,)](meta(40), 40)])
    assert (outcome.kernels, outcome.failed) == (2, 0)
    assert _tuned.cache == {}
    compiles = []
    old = triton.knobs.runtime.jit_cache_hook
    triton.knobs.runtime.jit_cache_hook = lambda *args, **kwargs: compiles.append(args) and None
    try:
        for config in _tuned.configs:  # each config's real launch (the autotuner's benchmark) finds its kernel
            assert _tuned.fn.run(meta(40), 40, grid=(1,), warmup=True, **config.all_kwargs()).metadata is not None
    finally:
        triton.knobs.runtime.jit_cache_hook = old
    assert compiles == []


def test_a_post_compile_hook_that_raises_fails_that_kernel_only(h200):
    old = triton.knobs.runtime.jit_post_compile_hook
    triton.knobs.runtime.jit_post_compile_hook = lambda *args, **kwargs: 1 / 0
    try:
        outcome = precompile.compile_ahead(precompile.CompilePool(2), [lambda: scale(meta(40))])
    finally:
        triton.knobs.runtime.jit_post_compile_hook = old
    assert (outcome.kernels, outcome.failed) == (1, 1)


def forks(monkeypatch) -> list[int]:
    pids, fork = [], os.fork

    def recorded():
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recorded)
    return pids


def test_a_child_past_its_time_limit_is_killed_and_what_it_finished_is_kept(monkeypatch):
    pids = forks(monkeypatch)

    def broken():
        raise RuntimeError("a compile error")

    # One child: a job done, a broken one, one that hangs, one it never reaches; another child: a job done.
    jobs = [precompile.Job(lambda: None), precompile.Job(lambda: None), precompile.Job(broken),
            precompile.Job(lambda: None), precompile.Job(lambda: time.sleep(60)), precompile.Job(lambda: None),
            precompile.Job(lambda: None)]
    missing = precompile.in_children(jobs, workers=2, limit_s=3)
    assert missing == {2, 4, 6}  # had the hung child run on, its 60 s job would be done and the next one with it
    assert len(pids) == 2
    for pid in pids:  # both children reaped: no zombie left behind
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_compile_that_the_sentinel_refused_in_a_child_is_left_to_the_worker(tmp_path):
    """Candidate code running at compile time in a child that tries a write outside its folder: refused there, the
    job is not reported (raised or swallowed alike), so the kernel compiles again in the worker, under its Sentinel."""
    import importlib.util

    from avo.evaluate import guards

    folder = tmp_path / "cand"
    folder.mkdir()
    sentinel = guards.Sentinel(folder)
    # A folder the Sentinel does not allow (the temp folder is allowed, and a checkout may sit inside it).
    allowed = [Path(d) for d in sentinel.allowed_dirs]
    home = next(d for d in (Path(__file__).parent, Path.home(), Path("/var/tmp"), Path("/dev/shm"))
                if d.is_dir() and not any(d.resolve().is_relative_to(a) for a in allowed))
    outside = home / f"avo-refused-{os.getpid()}.txt"
    (folder / "hooks.py").write_text(
        f"def writes():\n    open({str(outside)!r}, 'w').write('x')\n\n"
        "def swallows():\n    try:\n        writes()\n    except Exception:\n        pass\n")
    spec = importlib.util.spec_from_file_location("hooks_precompile_test", folder / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    try:
        jobs = [precompile.Job(hooks.writes), precompile.Job(hooks.swallows), precompile.Job(lambda: None)]
        assert precompile.in_children(jobs, workers=3, limit_s=30) == {0, 1}
    finally:
        sentinel.close()
        written = outside.exists()
        outside.unlink(missing_ok=True)
    assert not written


def test_where_no_child_can_be_forked_the_kernels_compile_in_this_process(h200, monkeypatch):
    def no_fork():
        raise BlockingIOError("Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    outcome = precompile.compile_ahead(precompile.CompilePool(2), [lambda: scale(meta(48))])
    assert (outcome.kernels, outcome.failed) == (1, 0)
    assert _scale.device_caches[0][0]  # the kernel sits in its cache: the real launch compiles nothing


def test_the_pool_exists_only_where_compiling_ahead_applies():
    """Started while the worker is set up, before its candidates are known (a CUDA C++ candidate leaves it unused:
    compile_candidate skips it)."""
    from types import SimpleNamespace

    from avo.config import EvalConfig
    from avo.evaluate.worker.evaluation import _compile_pool

    class Task:
        compile_ahead = True

    def ctx(device="cuda", on="processes", task=Task()):
        return SimpleNamespace(device=device, config=EvalConfig(compile_ahead=on), task=task)

    assert _compile_pool(ctx()).way == "processes"
    assert _compile_pool(ctx(on="threads")).way == "threads"
    assert _compile_pool(ctx(on=True)).way == "processes"
    assert _compile_pool(ctx(device="interpret")) is None
    assert _compile_pool(ctx(on="off")) is None
    assert _compile_pool(ctx(on=False)) is None
    assert _compile_pool(ctx(task=object())) is None


def test_the_builtin_tasks_compile_ahead_for_every_case_of_both_suites(h200):
    """The gemm seed over the real check and bench suites: each case's wrapper runs on meta tensors, and every
    specialization it meets is compiled (none is left for the first launch)."""
    from avo import tasks
    from avo.evaluate.worker.loader import load_entry

    task = tasks.load("gemm")
    entry = load_entry(Path(__file__).resolve().parents[3] / "kernels" / "gemm" / "triton_naive", "gemm")
    calls = precompile.meta_calls(task, entry, ["check", "bench", "bench"])
    assert len(calls) == len(task.cases("check")) + len(task.cases("bench"))
    outcome = precompile.compile_ahead(precompile.CompilePool(2), calls)
    assert outcome.cases == len(calls) and outcome.skipped == 0 and outcome.kernels >= 2 and outcome.failed == 0


def test_a_child_builds_the_launcher_of_each_kernel_it_compiled(tmp_path, monkeypatch):
    """Each kernel a child compiled has its launcher built there too (Triton <= 3.6 compiles one per signature with
    gcc on the first launch), through the active driver; a launcher that fails to build leaves the kernel reported
    (its first launch builds it)."""
    from triton.runtime import driver

    class Kernel:
        def __init__(self, name):
            self.src, self.metadata = name, None

    class Driver:
        @staticmethod
        def launcher_cls(src, metadata):
            if src == "broken":
                raise RuntimeError("gcc failed")
            (tmp_path / f"launcher-{src}").write_text("built")

    jobs = [precompile.Job(lambda name=name: Kernel(name)) for name in ("a", "broken", "c")]
    monkeypatch.setattr(driver, "_active", Driver())  # what `driver.active` returns (this machine may have no GPU)
    assert precompile.in_children(jobs, workers=2, limit_s=30) == set()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["launcher-a", "launcher-c"]

