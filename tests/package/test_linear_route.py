"""patch()'s nn.Linear route hands the kernel the weight's transpose as a view (no copy) when the kernel says it reads
that layout and its answer there matches its row-major one; otherwise the library takes the call. On CPU: a package
of the shipped GEMM run whose guard is opened to CPU tensors and whose kernel is a small stand-in that records the
strides it is given."""

from __future__ import annotations

import pytest
import torch
from package_runs import GEMM_TRITON, package_with_kernel

STAND_IN = '''
import torch

READS_TRANSPOSED_B = {reads}
seen = []


def gemm(a, b):
    seen.append(tuple(b.stride()))
    if {misreads} and not b.is_contiguous():  # b's storage taken as if it were row-major
        b = b.as_strided(b.shape, (b.shape[1], 1))
    return (a.float() @ b.float()).to(a.dtype)
'''


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


def _package(runs, tmp_path, name: str, *, reads: bool, misreads: bool = False):
    """The GEMM run's package with the stand-in kernel and a guard that lets CPU tensors through."""
    return package_with_kernel(runs, GEMM_TRITON, tmp_path, name, STAND_IN.format(reads=reads, misreads=misreads),
                               device="cpu", device_names=[])


def _close(out, expected) -> bool:  # F.linear adds the bias inside its product, the route after it: rounding apart
    return torch.allclose(out.float(), expected.float(), atol=1e-2, rtol=1e-2)


def _linear_twice(pkg):
    torch.manual_seed(0)
    linear = torch.nn.Linear(40, 24, dtype=torch.bfloat16)
    x = torch.randn(2, 33, 40, dtype=torch.bfloat16)
    with torch.no_grad():
        expected = linear(x)
        with pkg.patch():
            first, second = linear(x), linear(x)
    return expected, first, second


def test_a_kernel_that_reads_the_transpose_gets_the_weight_as_a_view(runs, tmp_path):
    pkg = _package(runs, tmp_path, "reads_transposed", reads=True)
    expected, first, second = _linear_twice(pkg)
    seen = pkg._loader.entry("gemm").__globals__["seen"]
    # The first call checks the view's answer against the row-major copy's, once; after that only the view.
    assert seen == [(1, 40), (24, 1), (1, 40), (1, 40)]
    assert pkg.calls == {"op": 2, "kernel": 2} and not pkg.fallbacks
    assert _close(first, expected) and torch.equal(first, second)


_VERDICTS = {  # the stand-in timer's (ms, host µs) for the kernel and the library -> the fallback reason, or None
    ((2.0, 10.0), (1.0, 10.0)): "layout (the kernel reads a transposed b slower than the library here: 0.500x, "
                                "timed on this GPU)",
    ((1.0, 10.0), (2.0, 10.0)): None,
    ((1.0, 30.0), (1.01, 10.0)): "layout (a transposed b: the kernel saves 10.0 µs of GPU time a call here, no more "
                                 "than the 20.0 µs of host time it adds; timed on this GPU)",
    ((1.0, 30.0), (1.03, 10.0)): None,
}


@pytest.mark.parametrize("times", list(_VERDICTS), ids=["slower", "faster", "saves-less-than-host", "saves-more"])
def test_a_transposed_b_goes_to_the_kernel_only_where_it_was_timed_faster(runs, tmp_path, monkeypatch, times):
    """The run timed row-major operands only: a transposed b's first call times the kernel reading it in place
    against the library, on the GPU and on the host (on a GPU; here the timer is a stand-in and CPU tensors count as
    timed). The kernel takes the calls where it saves more GPU time than it adds host time."""
    pkg = _package(runs, tmp_path, f"timed_{list(_VERDICTS).index(times)}", reads=True)
    timed = []
    monkeypatch.setattr(pkg._guard, "TIMED_ON", ("cpu",))
    monkeypatch.setattr(pkg._guard, "best_times", lambda *calls: timed.append(len(calls)) or list(times))
    expected, first, second = _linear_twice(pkg)
    assert timed == [2], "timed once, the kernel and the library"
    if _VERDICTS[times] is None:
        assert pkg.calls == {"op": 2, "kernel": 2} and not pkg.fallbacks
    else:
        assert pkg.calls == {"op": 2, "library": 2}
        assert list(pkg.fallbacks) == [_VERDICTS[times]]
    assert _close(first, expected) and _close(second, expected)


def test_a_kernel_that_does_not_say_so_leaves_linear_to_the_library(runs, tmp_path):
    pkg = _package(runs, tmp_path, "rows_only", reads=False)
    expected, first, second = _linear_twice(pkg)
    assert pkg._loader.entry("gemm").__globals__["seen"] == []  # never given a copy of the weight either
    assert pkg.calls == {"op": 2, "library": 2}
    assert pkg.fallbacks == {"layout (b is a transposed view the kernel does not read in place)": 2}
    assert _close(first, expected) and _close(second, expected)


def test_a_kernel_whose_transposed_answer_differs_is_not_used_for_it(runs, tmp_path):
    pkg = _package(runs, tmp_path, "misreads_transposed", reads=True, misreads=True)
    expected, first, second = _linear_twice(pkg)
    assert pkg._loader.entry("gemm").__globals__["seen"] == [(1, 40), (24, 1)]  # the one check, then no more
    assert pkg.calls == {"op": 2, "library": 2}
    assert list(pkg.fallbacks) == ["layout (the kernel's answer for a transposed b differed from its row-major one)"]
    assert _close(first, expected) and _close(second, expected)
    b = torch.randn(40, 24, dtype=torch.bfloat16)
    with torch.no_grad(), pkg.patch():
        torch.matmul(torch.randn(33, 40, dtype=torch.bfloat16), b)  # a row-major b still reaches the kernel
    assert pkg.calls["kernel"] == 1


@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated:DeprecationWarning")
def test_eager_calls_skip_the_dispatcher_and_traced_ones_keep_the_op(runs, tmp_path, monkeypatch):
    """An eager call runs the op's body directly (the dispatcher's host time is the caller's); torch.compile's graph
    and a dispatch mode still see the op as one node."""
    pkg = _package(runs, tmp_path, "eager_path", reads=True)
    op = torch.ops.eager_path.gemm.default
    a, b = torch.randn(8, 40, dtype=torch.bfloat16), torch.randn(40, 24, dtype=torch.bfloat16)
    dispatched = []
    real = pkg._op.gemm_op
    monkeypatch.setattr(pkg._op, "gemm_op", lambda *args: dispatched.append(args) or real(*args))
    with torch.no_grad():
        eager = pkg.gemm(a, b)
    assert dispatched == [] and pkg.calls == {"op": 1, "kernel": 1}

    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        ops: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func)
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Seen():
        moded = pkg.gemm(a, b)
    assert len(dispatched) == 1 and op in Seen.ops

    graphs = []

    def backend(gm, example_inputs):
        graphs.append([node.target for node in gm.graph.nodes])
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(lambda x, y: pkg.gemm(x, y) * 2, fullgraph=True, backend=backend)
    with torch.no_grad():
        traced = compiled(a, b)
    assert any(op in targets or torch.ops.eager_path.gemm in targets for targets in graphs), graphs
    assert torch.equal(eager, moded) and torch.equal(traced, eager * 2)

    with torch.no_grad():  # torch.jit.trace records the op, where the body's own launches would leave no trace
        scripted = torch.jit.trace(lambda x, y: pkg.gemm(x, y), (a, b))
    assert "eager_path::gemm" in str(scripted.graph) and torch.equal(scripted(a, b), eager)


def test_an_eager_calls_verdict_is_kept_by_layout_and_a_not_yet_one_is_not(runs, tmp_path, monkeypatch):
    """The guard's checks run once per layout (shape, strides, dtype, device); the calls are still counted one by
    one; another layout is judged afresh; a verdict that says a check could not run yet is asked again next time."""
    pkg = _package(runs, tmp_path, "kept_verdicts", reads=True)
    runtime = pkg._op
    judged = []
    refusal = runtime._refusal
    monkeypatch.setattr(runtime, "_refusal", lambda a, b: judged.append((a.shape, b.stride())) or refusal(a, b))
    a, b = torch.randn(33, 40, dtype=torch.bfloat16), torch.randn(40, 24, dtype=torch.bfloat16)
    with torch.no_grad(), pkg.patch():
        for _ in range(3):
            torch.matmul(a, b)
        torch.matmul(a[:, :20], b[:20])  # a strided view: another layout, and one the guard refuses
        torch.matmul(a[:, :20], b[:20])
    assert judged == [((33, 40), (24, 1)), ((33, 20), (24, 1))]
    assert pkg.calls == {"op": 5, "kernel": 3, "library": 2} and pkg.fallbacks == {"layout (not contiguous)": 2}
    not_yet = f"layout (a transposed b {pkg._guard.NOT_YET}: no check inside a CUDA graph capture)"
    monkeypatch.setattr(runtime, "_refusal", lambda a, b: judged.append("again") or not_yet)
    with torch.no_grad(), pkg.patch():
        for _ in range(2):
            torch.matmul(a, b.t().contiguous().t())
    assert judged[-2:] == ["again", "again"]


def test_the_linear_routes_verdict_is_kept_by_the_callers_layout(runs, tmp_path, monkeypatch):
    """nn.Linear's route looks its verdict up by the input's and weight's layout as the caller passed them: the guard
    (and the transposed weight's first-call check) runs once per layout, every call is still counted, another input
    shape is judged afresh, and a verdict that says a check could not run yet is asked again next time."""
    pkg = _package(runs, tmp_path, "kept_linear", reads=True)
    runtime = pkg._op
    judged = []
    refusal = runtime._refusal
    monkeypatch.setattr(runtime, "_refusal", lambda a, b: judged.append((tuple(a.shape), b.stride())) or refusal(a, b))
    linear = torch.nn.Linear(40, 24, bias=False, dtype=torch.bfloat16)
    x, wider = torch.randn(2, 33, 40, dtype=torch.bfloat16), torch.randn(3, 33, 40, dtype=torch.bfloat16)
    with torch.no_grad(), pkg.patch():
        outs = [linear(x) for _ in range(3)] + [linear(wider), linear(wider)]
    assert judged == [((66, 40), (1, 40)), ((99, 40), (1, 40))]
    assert pkg.calls == {"op": 5, "kernel": 5} and not pkg.fallbacks
    assert all(torch.equal(out, outs[0]) for out in outs[1:3]) and outs[3].shape == (3, 33, 24)
    not_yet = f"layout (a transposed b {pkg._guard.NOT_YET}: no check inside a CUDA graph capture)"
    monkeypatch.setattr(runtime, "_refusal", lambda a, b: judged.append("again") or not_yet)
    runtime._linear_verdicts.clear()
    with torch.no_grad(), pkg.patch():
        for _ in range(2):
            linear(x)
    assert judged[-2:] == ["again", "again"]
    assert pkg.fallbacks == {not_yet: 2}


def test_inside_a_cuda_graph_capture_only_a_kernel_that_says_it_may_be_captured_runs(runs, tmp_path, monkeypatch):
    """While a CUDA graph is captured, a kernel whose kernel.py does not declare CUDA_GRAPHS = True leaves the call to
    the library (it may keep memory from call to call that the graph would not own); the refusal is asked on each
    call, never kept, so the next call outside the capture reaches the kernel again. (No capture on a CPU: the
    capturing state is a stand-in; the real one is tests/kernels/test_cuda_graphs.py's.)"""
    from types import SimpleNamespace

    pkg = _package(runs, tmp_path, "capture", reads=True)
    guard, kernel = pkg._guard, pkg._loader.entry("gemm")
    cuda_tensor = SimpleNamespace(is_cuda=True)
    monkeypatch.setattr(guard.torch.cuda, "is_current_stream_capturing", lambda: True)
    assert guard.capture_refusal("gemm", cuda_tensor) == guard.CAPTURE
    assert guard.capture_refusal("gemm", torch.zeros(1)) is None  # a CPU tensor is never captured
    kernel.__globals__["CUDA_GRAPHS"] = True
    assert guard.capture_refusal("gemm", cuda_tensor) is None
    del kernel.__globals__["CUDA_GRAPHS"]

    capturing = [True]
    real = guard.capture_refusal
    monkeypatch.setattr(guard, "capture_refusal",
                        lambda entry, t: real(entry, cuda_tensor if capturing[0] else t))
    linear = torch.nn.Linear(40, 24, bias=False, dtype=torch.bfloat16)
    x, a, b = torch.randn(2, 33, 40, dtype=torch.bfloat16), torch.randn(9, 40), torch.randn(40, 24)
    with torch.no_grad(), pkg.patch():
        linear(x), linear(x), torch.matmul(a.bfloat16(), b.bfloat16())
        assert pkg.calls == {"op": 3, "library": 3} and pkg.fallbacks == {guard.CAPTURE: 3}
        capturing[0] = False
        linear(x), torch.matmul(a.bfloat16(), b.bfloat16())
    assert pkg.calls == {"op": 5, "library": 3, "kernel": 2}
