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
