"""On a GPU: a small Llama-style block (RMSNorm, GQA attention through SDPA, SwiGLU MLP through nn.Linear) under
the packaged kernels' patch() gives the unpatched block's output within the tasks' tolerance, eager and under
torch.compile, with the evolved kernels doing the work (their call counters say so). Each forward is timed and
printed; nothing is asserted about speed."""

from __future__ import annotations

import importlib
import sys
from contextlib import ExitStack

import pytest
from package_runs import ATTENTION_CUDA, GEMM_CUDA, example_run

from avo.package.build import build
from avo.run.directory import Run
from avo.tasks import load, relative_error

pytestmark = pytest.mark.gpu

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE = 4096, 32, 8, 128, 14336
BATCH, SEQ = 2, 2048


def _block():
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.RMSNorm(HIDDEN), nn.RMSNorm(HIDDEN)
            self.q = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
            self.k = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
            self.v = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
            self.o = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
            self.gate = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
            self.up = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
            self.down = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

        def heads(self, x, n):
            return x.view(BATCH, SEQ, n, HEAD_DIM).transpose(1, 2).contiguous()

        def forward(self, x):
            h = self.norm1(x)
            q, k, v = self.heads(self.q(h), HEADS), self.heads(self.k(h), KV_HEADS), self.heads(self.v(h), KV_HEADS)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + self.o(a.transpose(1, 2).reshape(BATCH, SEQ, HEADS * HEAD_DIM))
            h = self.norm2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    torch.manual_seed(0)
    block = Block().to("cuda", torch.bfloat16)
    for linear in (block.q, block.k, block.v, block.o, block.gate, block.up, block.down):
        torch.nn.init.normal_(linear.weight, std=linear.in_features ** -0.5)
    return block


def _ms(fn, x) -> float:
    import torch

    for _ in range(3):
        fn(x)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu_packages")
    names = []
    for example, name in ((ATTENTION_CUDA, "gpu_attention"), (GEMM_CUDA, "gpu_gemm")):
        run = Run.open(example_run(root / "runs", example), root / "runs")
        try:
            build(run, "best", root / name, name=name)
        finally:
            run.close()
        sys.path.insert(0, str(root / name))
        names.append(name)
    return [importlib.import_module(name) for name in names]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_llama_block_under_patch_matches_the_unpatched_block(packages, compiled):
    import torch

    block = _block()
    x = torch.randn(BATCH, SEQ, HIDDEN, device="cuda", dtype=torch.bfloat16)
    run = torch.compile(block) if compiled else block
    with torch.no_grad():
        expected = run(x)
        library_ms = _ms(run, x)
        with ExitStack() as stack:
            for package in packages:
                stack.enter_context(package.patch())
                package.calls.clear()
                package.fallbacks.clear()
            torch._dynamo.reset()  # the patched functions are traced anew
            patched_run = torch.compile(block) if compiled else block
            out = patched_run(x)
            patched_ms = _ms(patched_run, x)
    error = relative_error(out, expected)
    attention, gemm = packages
    print(f"\n{'compiled' if compiled else 'eager'} block B={BATCH} S={SEQ}: library {library_ms:.3f} ms, patched "
          f"{patched_ms:.3f} ms ({library_ms / patched_ms:.3f}x); rel err {error:.2e}; attention calls "
          f"{dict(attention.calls)}, gemm calls {dict(gemm.calls)}, gemm fallbacks {dict(gemm.fallbacks)}")
    assert error <= min(load("attention").tolerance("bfloat16"), load("gemm").tolerance("bfloat16"))
    assert attention.calls["kernel"] > 0 and gemm.calls["kernel"] > 0
