"""The CUDA seeds inside a CUDA graph (torch.cuda.graph, as torch.compile's reduce-overhead captures a model): they
declare CUDA_GRAPHS, so avo package runs them in a capture. On a GPU, a captured call replayed gives the bits an
eager call gives on the same inputs, after the inputs change too, and what the wrappers keep between eager calls
(split GEMMs' workspace, the causal walk's tile counter, prepared launches) is neither taken into the graph nor
changed by it. Attention's plans at causal short sequences draw tiles from a counter (DYNAMIC); GEMM's long-K
shapes split along K into a workspace."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch

from avo.evaluate.worker.loader import load_entry

pytestmark = pytest.mark.gpu
KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _snapshot(state: dict) -> dict:
    """What each cache holds: its keys and which objects it keeps under them."""
    return {name: [(key, id(kept[key]) if isinstance(kept, dict) else None) for key in kept.keys()]
            for name, kept in state.items()}


def _captured_matches_eager(entry, make_inputs, state: dict) -> None:
    """Capture entry(*inputs) once, replay it on two sets of inputs; each replay's output equals an eager call's on
    those inputs bit for bit, and nothing kept in `state` (the wrapper's module-level caches) changed by capturing."""
    static = make_inputs(0)
    entry(*static)  # warm: builds, eager caches
    torch.cuda.synchronize()
    before = _snapshot(state)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = entry(*static)
    assert _snapshot(state) == before, "capturing kept something of the graph's"
    for seed in (1, 2):
        for tensor, fresh in zip(static, make_inputs(seed)):
            if isinstance(tensor, torch.Tensor):
                tensor.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        expected = entry(*static)
        assert torch.equal(out, expected), f"replay {seed} differs from an eager call"


@pytest.mark.parametrize("shape", [(64, 4096, 16384), (1024, 14336, 4096), (256, 10240, 8192), (1024, 10240, 8192),
                                   (4096, 4096, 4096)], ids=["split", "tail", "split-320", "whole-320", "whole"])
def test_the_gemm_seed_replays_from_a_cuda_graph(shape):
    needs.module("cupy")
    gemm = load_entry(KERNELS / "gemm" / "cuda_wgmma", "gemm")
    g = gemm.__globals__
    assert g["CUDA_GRAPHS"] is True
    m, n, k = shape

    def inputs(seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        return (torch.randn((m, k), generator=gen, device="cuda", dtype=torch.bfloat16),
                torch.randn((n, k), generator=gen, device="cuda", dtype=torch.bfloat16).t())  # nn.Linear's weight.t()

    _captured_matches_eager(gemm, inputs, {"workspace": g["_WORKSPACE"], "launches": g["_LAUNCHES"]})


@pytest.mark.parametrize("shape", [(1, 32, 8, 4096, 64), (1, 32, 8, 16384, 64), (4, 16, 16, 2048, 128)],
                         ids=["d64-4096", "d64-16384", "d128-2048"])
def test_the_attention_seed_replays_from_a_cuda_graph_causal(shape):
    needs.module("cupy")
    attention = load_entry(KERNELS / "attention" / "cuda_fa3", "attention")
    g = attention.__globals__
    assert g["CUDA_GRAPHS"] is True
    b, hq, hkv, s, d = shape

    def inputs(seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        q = torch.randn((b, hq, s, d), generator=gen, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn((b, hkv, s, d), generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        return q, k, v, True, d ** -0.5

    _captured_matches_eager(attention, inputs, {"counters": g["_COUNTERS"], "launches": g["_LAUNCHES"]})


def test_the_seeds_run_under_torch_compiles_reduce_overhead():
    """torch.compile(mode="reduce-overhead") calls a function eagerly first with every allocation routed into the
    CUDA graph's memory pool, then records and replays it; a tensor left alive in that pool that the graph does not
    return fails the recording ("tensor(s) in the cudagraph pool not tracked as outputs"). What the seeds keep from
    such a warm-up call (the causal walk's counter, a split GEMM's workspace) is made by avo.cuda.kept_zeros, outside
    every torch pool: made with torch.zeros it failed so at 16384 tokens in the packaged 1B block. Each call, through
    custom ops as avo package wraps them, gives an eager call's bits."""
    needs.module("cupy")
    attention = load_entry(KERNELS / "attention" / "cuda_fa3", "attention")
    gemm = load_entry(KERNELS / "gemm" / "cuda_wgmma", "gemm")
    for entry, kept in ((attention, "_COUNTERS"), (gemm, "_WORKSPACE")):  # made afresh in the warm-up
        entry.__globals__[kept].clear()
        entry.__globals__["_LAUNCHES"].clear()

    @torch.library.custom_op("avo_graph_tests::attention", mutates_args=())
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attention(q, k, v, True, 0.125)

    @torch.library.custom_op("avo_graph_tests::gemm", mutates_args=())
    def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return gemm(a, b)

    attend.register_fake(lambda q, k, v: torch.empty_like(q))
    matmul.register_fake(lambda a, b: a.new_empty((a.shape[0], b.shape[1])))

    def step(q, k, v, a, b):
        return attend(q, k, v) * 2, matmul(a, b) + 1

    def inputs(seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        q = torch.randn((1, 32, 4096, 64), generator=gen, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn((1, 8, 4096, 64), generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        a = torch.randn((64, 16384), generator=gen, device="cuda", dtype=torch.bfloat16)
        return q, k, v, a, torch.randn((16384, 4096), generator=gen, device="cuda", dtype=torch.bfloat16)

    assert gemm.__globals__["plan"](64, 4096, 16384, 132).splits > 1
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for seed in range(4):  # the warm-up, the recording, two replays
        args = inputs(seed)
        got = [out.clone() for out in compiled(*args)]
        assert all(torch.equal(g, e) for g, e in zip(got, step(*args))), f"call {seed} differs from an eager one"
    # the causal walk drew from a kept counter and the GEMM split into a kept workspace: both were made in the warm-up
    assert attention.__globals__["_COUNTERS"] and gemm.__globals__["_WORKSPACE"], "nothing was kept: nothing tested"
