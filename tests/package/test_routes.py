"""patch()'s routes in eager mode: a call the guard refuses is made exactly as the caller made it (the original
function, the caller's own arguments: no reshaped matmul in place of F.linear, no explicit scale in place of SDPA's
default), so a shape left to the library costs what it cost unpatched; the call is still counted as the library's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from package_runs import ATTENTION_TRITON, GEMM_TRITON, package_with_kernel

REFUSING = "raise SystemExit('the guard let a call through that it should have refused')\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


class Spy:
    def __init__(self, original):
        self.original, self.seen = original, []

    def __call__(self, *args, **kwargs):
        self.seen.append((args, kwargs))
        return self.original(*args, **kwargs)


def test_a_refused_linear_call_goes_to_f_linear_with_its_own_arguments(runs, tmp_path, monkeypatch):
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "linear_refused", REFUSING)  # its guard: CUDA only
    spy = Spy(F.linear)
    monkeypatch.setattr(F, "linear", spy)
    linear = torch.nn.Linear(40, 24, dtype=torch.bfloat16)
    x = torch.randn(2, 33, 40, dtype=torch.bfloat16)
    with torch.no_grad(), pkg.patch():
        out = linear(x)
    (args, kwargs), = spy.seen
    assert args[0] is x and args[1] is linear.weight and args[2] is linear.bias and not kwargs
    assert out.shape == (2, 33, 24) and pkg.calls == {"op": 1, "library": 1}
    assert pkg.fallbacks == {"device cpu": 1}


def test_a_refused_sdpa_call_goes_to_sdpa_with_its_own_arguments(runs, tmp_path, monkeypatch):
    pkg = package_with_kernel(runs, ATTENTION_TRITON, tmp_path, "sdpa_refused", REFUSING)
    spy = Spy(F.scaled_dot_product_attention)
    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    q = torch.randn(1, 4, 16, 64, dtype=torch.bfloat16)
    k, v = torch.randn(1, 2, 16, 64, dtype=torch.bfloat16), torch.randn(1, 2, 16, 64, dtype=torch.bfloat16)
    with torch.no_grad(), pkg.patch():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    (args, kwargs), = spy.seen
    assert args == (q, k, v) and kwargs["scale"] is None and kwargs["enable_gqa"] is True and kwargs["is_causal"]
    assert out.shape == q.shape and pkg.calls == {"op": 1, "library": 1}


def test_an_sdpa_calls_verdict_is_kept_by_layout_and_causal(runs, tmp_path, monkeypatch):
    """The guard's checks run once per layout of q, k, v and causal flag; every call is still counted."""
    pkg = package_with_kernel(runs, ATTENTION_TRITON, tmp_path, "sdpa_kept", REFUSING)
    judged = []
    refusal = pkg._op._refusal
    monkeypatch.setattr(pkg._op, "_refusal",
                        lambda q, k, v, causal, *traced: judged.append(causal) or refusal(q, k, v, causal, *traced))
    q = torch.randn(1, 4, 16, 64, dtype=torch.bfloat16)
    k, v = torch.randn(1, 2, 16, 64, dtype=torch.bfloat16), torch.randn(1, 2, 16, 64, dtype=torch.bfloat16)
    with torch.no_grad(), pkg.patch():
        for causal in (True, True, True, False, False):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    assert judged == [True, False]
    assert pkg.calls == {"op": 5, "library": 5} and pkg.fallbacks == {"device cpu": 5}


ATTENTION_STAND_IN = '''
import torch


def attention(q, k, v, causal, scale):  # SDPA's own binding: F's may be the route itself
    return torch._C._nn.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
'''
GEMM_STAND_IN = '''
import torch

READS_TRANSPOSED_B = True


def gemm(a, b):
    return (a.float() @ b.float()).to(a.dtype)
'''


def _graph_targets(fn, *args) -> list:
    graphs = []

    def backend(gm, example_inputs):
        graphs.append([str(node.target) for node in gm.graph.nodes if node.op == "call_function"])
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, fullgraph=True, backend=backend)(*args)
    assert len(graphs) == 1, graphs
    return graphs[0]


def test_traced_routes_put_the_library_call_itself_in_the_graph_where_the_guard_refuses(runs, tmp_path):
    """Under torch.compile the route's decision is traced: a shape the guard refuses becomes the library's own node
    (what the unpatched graph holds), a shape it lets through the op."""
    slower = {"dims": ["B", "Hq", "Hkv", "S", "D", "causal", "dtype"], "shapes": [[1, 4, 2, 16, 64, True, "bfloat16"]],
              "speedups": [0.9], "reasons": ["gpu"], "host_us": [None], "timed": 2, "enforced": True}
    pkg = package_with_kernel(runs, ATTENTION_TRITON, tmp_path, "sdpa_traced", ATTENTION_STAND_IN, device="cpu",
                              device_names=[], library_faster=slower)
    sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # noqa: E731
    inputs = {s: (torch.randn(1, 4, s, 64, dtype=torch.bfloat16), torch.randn(1, 2, s, 64, dtype=torch.bfloat16),
                  torch.randn(1, 2, s, 64, dtype=torch.bfloat16)) for s in (16, 17)}
    with pkg.patch():
        refused, taken = _graph_targets(sdpa, *inputs[16]), _graph_targets(sdpa, *inputs[17])
    assert not any("sdpa_traced" in t for t in refused) and any("scaled_dot_product_attention" in t for t in refused)
    assert any("sdpa_traced.attention" in t for t in taken), taken

    gemm_slower = {"dims": ["M", "N", "K", "dtype"], "shapes": [[8, 24, 40, "bfloat16"]], "speedups": [0.9],
                   "reasons": ["gpu"], "host_us": [None], "timed": 2, "enforced": True}
    gemm_pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "linear_traced", GEMM_STAND_IN, device="cpu",
                                   device_names=[], library_faster=gemm_slower)
    linear = torch.nn.Linear(40, 24, bias=False, dtype=torch.bfloat16)
    with gemm_pkg.patch():
        refused = _graph_targets(linear, torch.randn(8, 40, dtype=torch.bfloat16))
        taken = _graph_targets(linear, torch.randn(9, 40, dtype=torch.bfloat16))
        matmul_refused = _graph_targets(torch.matmul, torch.randn(8, 40, dtype=torch.bfloat16),
                                        torch.randn(40, 24, dtype=torch.bfloat16))
    assert not any("linear_traced" in t for t in refused) and any("linear" in t for t in refused), refused
    assert any("linear_traced.gemm" in t for t in taken), taken
    assert not any("linear_traced" in t for t in matmul_refused), matmul_refused


@pytest.mark.parametrize("kernel_ms,library_ms", [(2.0, 1.0), (1.0, 2.0)])
def test_a_traced_linear_route_takes_the_transposed_weights_verdict_where_the_op_would(runs, tmp_path, monkeypatch,
                                                                                      kernel_ms, library_ms):
    """Traced, nn.Linear's transposed weight gets the verdict its first call would reach (check and timing, on real
    tensors of its shapes): where the kernel reads it slower, the library's own node is in the graph, not an op that
    would send it there at run time. With symbolic sizes the op decides at run time."""
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, f"traced_t{int(kernel_ms)}", GEMM_STAND_IN, device="cpu",
                              device_names=[])
    monkeypatch.setattr(pkg._guard, "TIMED_ON", ("cpu",))
    timed = []
    monkeypatch.setattr(pkg._guard, "best_times",
                        lambda *calls: timed.append(len(calls)) or [(kernel_ms, 10.0), (library_ms, 10.0)])
    linear = torch.nn.Linear(40, 24, bias=False, dtype=torch.bfloat16)
    x = torch.randn(9, 40, dtype=torch.bfloat16)
    with pkg.patch():
        targets = _graph_targets(linear, x)
    assert timed == [2], "the verdict was reached once, at trace time"
    ours = any(f"traced_t{int(kernel_ms)}.gemm" in t for t in targets)
    assert ours == (kernel_ms < library_ms), targets
    assert ours or any("linear" in t for t in targets), targets

    torch._dynamo.reset()
    with pkg.patch(), torch.no_grad():  # symbolic sizes: no verdict at trace time, the op's at run time
        compiled = torch.compile(linear, fullgraph=True, dynamic=True, backend="eager")
        out = compiled(torch.randn(11, 40, dtype=torch.bfloat16))
    assert out.shape == (11, 24)


def test_a_linear_route_under_fake_tensors_leaves_the_transposed_verdict_to_the_op(runs, tmp_path):
    """Under a dispatch mode (here fake tensors, as shape propagation uses) nothing is run to reach a verdict: the op
    (whose fake implementation gives the shape) takes the call."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "fake_route", GEMM_STAND_IN, device="cpu", device_names=[])
    linear = torch.nn.Linear(40, 24, bias=False, dtype=torch.bfloat16)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode, pkg.patch(), torch.no_grad():
        out = linear(mode.from_tensor(torch.randn(9, 40, dtype=torch.bfloat16)))
    assert out.shape == (9, 24) and not pkg._op._transposed_verdicts


def test_inside_a_cuda_graph_capture_sdpa_goes_to_the_library_unless_the_kernel_may_be_captured(runs, tmp_path,
                                                                                               monkeypatch):
    """The attention route asks guard.capture_refusal on each call the kernel would take (a stand-in capturing state
    on the CPU; the real capture is tests/kernels/test_cuda_graphs.py's)."""
    from types import SimpleNamespace

    pkg = package_with_kernel(runs, ATTENTION_TRITON, tmp_path, "sdpa_capture", ATTENTION_STAND_IN, device="cpu",
                              device_names=[])
    guard, real = pkg._guard, pkg._guard.capture_refusal
    monkeypatch.setattr(guard.torch.cuda, "is_current_stream_capturing", lambda: True)
    monkeypatch.setattr(guard, "capture_refusal", lambda entry, t: real(entry, SimpleNamespace(is_cuda=True)))
    q = torch.randn(1, 4, 16, 64, dtype=torch.bfloat16)
    k, v = torch.randn(1, 2, 16, 64, dtype=torch.bfloat16), torch.randn(1, 2, 16, 64, dtype=torch.bfloat16)
    with torch.no_grad(), pkg.patch():
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        pkg._loader.entry("attention").__globals__["CUDA_GRAPHS"] = True
        ours = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert pkg.calls == {"op": 2, "library": 1, "kernel": 1} and pkg.fallbacks == {guard.CAPTURE: 1}
    assert torch.allclose(ours.float(), expected.float(), atol=2e-2)


def test_grouped_heads_without_enable_gqa_go_to_sdpa_whatever_an_earlier_calls_verdict(runs, tmp_path):
    """The verdict is kept by layout and enable_gqa alike: the same q, k, v that the kernel took with enable_gqa go to
    SDPA without it, which refuses them as it does unpatched (Hq 4 against Hkv 2)."""
    pkg = package_with_kernel(runs, ATTENTION_TRITON, tmp_path, "sdpa_gqa_flag", ATTENTION_STAND_IN, device="cpu",
                              device_names=[])
    q = torch.randn(1, 4, 16, 64, dtype=torch.bfloat16)
    k, v = torch.randn(1, 2, 16, 64, dtype=torch.bfloat16), torch.randn(1, 2, 16, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        with pytest.raises(RuntimeError) as unpatched:
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with pkg.patch():
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            with pytest.raises(RuntimeError) as patched:
                F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert str(patched.value) == str(unpatched.value)
    assert pkg.calls == {"op": 2, "kernel": 1, "library": 1}
    assert pkg.fallbacks == {"shape (Hq differs from Hkv without enable_gqa)": 1}
