"""The CUDA seeds' wrappers keep each call's prepared launch by what it depends on (addresses, shapes, dtype,
arguments, stream): the same call again is one launch and no new preparation; anything else the launch depends on
prepares another; the GEMM's kept launches go when a workspace they point into is replaced. On the CPU, with the
launcher, tensor maps and stream recorded or stubbed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from avo.cuda import CudaModule
from avo.evaluate.worker.loader import load_entry

ROOT = Path(__file__).resolve().parents[2]


def recorded(module: dict, monkeypatch) -> list:
    """Each preparation as (kernel, grid, args) in the returned list; each launch of a prepared one appends 'run'."""
    events = []

    def launcher(self, name, grid, threads, args, shared_mem=0):
        events.append((name, grid, args))
        return lambda: events.append("run")

    monkeypatch.setattr(CudaModule, "launcher", launcher)
    monkeypatch.setitem(module, "tensor_map", lambda tensor, box, swizzle=128: None)
    monkeypatch.setitem(module, "_sm_count", lambda device: 132)
    monkeypatch.setitem(module, "current_stream", lambda device: 7)
    monkeypatch.setitem(module, "capturing", lambda: False)
    return events


def test_attention_prepares_a_launch_once_per_layout_and_argument(monkeypatch):
    module = load_entry(ROOT / "kernels" / "attention" / "cuda_fa3", "attention").__globals__
    events = recorded(module, monkeypatch)
    monkeypatch.setitem(module, "_counter", lambda device: "counter")
    q, k, v = torch.zeros(1, 4, 256, 64), torch.zeros(1, 2, 256, 64), torch.zeros(1, 2, 256, 64)
    q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    out = torch.empty_like(q)
    monkeypatch.setitem(module, "torch", SimpleNamespace(empty=lambda *a, **kw: out))  # o at one address, as on a GPU
    attention = module["attention"]
    for _ in range(3):
        assert attention(q, k, v, True, 0.125) is out
    assert [e == "run" for e in events] == [False, True, True, True]
    attention(q, k, v, False, 0.125)  # another argument
    attention(q, k, v, False, 0.25)
    attention(q.clone(), k, v, False, 0.25)  # another address
    assert sum(e != "run" for e in events) == 4 and events.count("run") == 6
    monkeypatch.setitem(module, "current_stream", lambda device: 8)  # another stream: its own DYNAMIC counter
    attention(q, k, v, True, 0.125)
    assert sum(e != "run" for e in events) == 5
    monkeypatch.setattr(module["_LAUNCHES"], "limit", 2)
    attention(q, k, v, True, 0.5)
    assert len(module["_LAUNCHES"]) == 2, "the oldest kept launches go past the limit"
    kept = list(module["_LAUNCHES"].keys())
    monkeypatch.setitem(module, "capturing", lambda: True)  # inside a CUDA graph capture: prepared, never kept
    attention(q, k, v, True, 0.125), attention(q, k, v, True, 0.125)
    assert sum(e != "run" for e in events) == 8 and list(module["_LAUNCHES"].keys()) == kept


def test_the_causal_walks_counter_is_the_streams_but_a_captures_own(monkeypatch):
    module = load_entry(ROOT / "kernels" / "attention" / "cuda_fa3", "attention").__globals__
    monkeypatch.setitem(module, "_COUNTERS", {})
    monkeypatch.setitem(module, "torch", SimpleNamespace(
        zeros=torch.zeros, int32=torch.int32, cuda=SimpleNamespace(current_stream=lambda device: SimpleNamespace(
            cuda_stream=7))))
    monkeypatch.setitem(module, "capturing", lambda: False)
    first = module["_counter"]("cpu")
    assert module["_counter"]("cpu") is first and len(module["_COUNTERS"]) == 1
    monkeypatch.setitem(module, "capturing", lambda: True)
    captured = module["_counter"]("cpu")
    assert captured is not first and not captured.any() and len(module["_COUNTERS"]) == 1


def test_gemm_prepares_a_launch_once_per_layout_and_drops_them_when_a_workspace_is_replaced(monkeypatch):
    module = load_entry(ROOT / "kernels" / "gemm" / "cuda_wgmma", "gemm").__globals__
    events = recorded(module, monkeypatch)
    a, b = torch.zeros(256, 8192, dtype=torch.bfloat16), torch.zeros(8192, 1024, dtype=torch.bfloat16)
    out = torch.empty(256, 1024, dtype=torch.bfloat16)
    monkeypatch.setitem(module, "torch", SimpleNamespace(  # c at one address, as on a GPU; the workspace's own
        empty=lambda shape, **kw: out if shape == (256, 1024) else torch.empty(shape, **kw), float32=torch.float32,
        int32=torch.int32, zeros=torch.zeros))
    gemm = module["gemm"]
    for _ in range(3):
        gemm(a, b)
    assert sum(e != "run" for e in events) == 1 and events.count("run") == 3
    planned = next(iter(module["_PLANS"].values()))
    assert planned.splits > 1, "this shape was chosen for a split plan: it has a workspace"
    assert len(module["_LAUNCHES"]) == 1
    module["_workspace"]("cpu", 7, 10 ** 7, 10 ** 4)  # a larger shape's call replaces the stream's workspace
    assert not module["_LAUNCHES"], "launches pointing into the old workspace were kept"
    gemm(a, b.t().contiguous().t())  # b read K-major: another launch
    assert sum(e != "run" for e in events) == 2
    kept, workspace = list(module["_LAUNCHES"].keys()), dict(module["_WORKSPACE"])
    monkeypatch.setitem(module, "capturing", lambda: True)  # inside a CUDA graph capture: its own workspace
    gemm(a, b), gemm(a, b)
    assert sum(e != "run" for e in events) == 4 and list(module["_LAUNCHES"].keys()) == kept
    assert module["_WORKSPACE"] == workspace, "a capture's workspace was kept"
    (*_, captured_partials, captured_arrivals, _, _, _, _), kept_pair = events[-2][2], next(iter(workspace.values()))
    assert captured_partials is not kept_pair[0] and captured_arrivals is not kept_pair[1]
