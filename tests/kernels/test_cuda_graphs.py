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


@pytest.mark.parametrize("shape", [(64, 4096, 16384), (1024, 10240, 8192), (256, 10240, 8192), (4096, 4096, 4096)],
                         ids=["split", "tail", "tail-128", "whole"])
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
