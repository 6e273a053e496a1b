"""scripts/kernel_timeline.py reads each call's GEMM kernels out of a CUPTI trace: the ones right after each launch
shield, their lead (from the shield's end to the first one's start) and span. On the CPU, with traces made up here;
the GPU run's figures are in BENCHMARKS.md."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from script_module import script


def timeline():
    return script("kernel_timeline")


def _event(name: str, start_ns: int, duration_ns: int, device: str = "CUDA") -> SimpleNamespace:
    """The few methods of a kineto event the script reads."""
    return SimpleNamespace(name=lambda: name, start_ns=lambda: start_ns, duration_ns=lambda: duration_ns,
                           device_type=lambda: SimpleNamespace(name=device))


def test_each_calls_kernels_are_the_ones_after_its_shield():
    t = timeline()
    kernels = [("reduce_kernel", 0.0, 10.0), ("spin_kernel", 10.0, 110.0), ("gemm_bf16", 113.0, 160.0),
               ("reduce_kernel", 170.0, 180.0), ("spin_kernel", 180.0, 280.0), ("gemm_bf16", 282.5, 330.0)]
    calls = t.per_call(kernels, 2, 1)
    assert [(lead, span) for lead, span, _ in calls] == [(3.0, 47.0), (2.5, 47.5)]
    assert calls[0][2] == ["gemm_bf16"]
    # a call of two kernels (a split GEMM's reduction, say): the span runs to the second one's end
    two = [("spin_kernel", 0.0, 100.0), ("nvjet_main", 102.0, 140.0), ("splitKreduce", 141.0, 145.0)]
    assert t.per_call(two, 1, 2) == [(2.0, 43.0, ["nvjet_main", "splitKreduce"])]


def test_calls_of_takes_each_contenders_turns_of_the_alternating_shields():
    t = timeline()
    kernels = [("spin_kernel", 0.0, 100.0), ("gemm_bf16", 101.0, 150.0),  # a's call
               ("spin_kernel", 160.0, 260.0), ("nvjet", 262.0, 300.0), ("reduce", 301.0, 305.0),  # b's, 2 kernels
               ("spin_kernel", 310.0, 410.0), ("gemm_bf16", 413.0, 460.0),  # a's
               ("spin_kernel", 470.0, 570.0), ("nvjet", 572.0, 610.0), ("reduce", 611.0, 616.0)]  # b's
    assert [c[:2] for c in t.calls_of(kernels, 0, 2, 1)] == [(1.0, 49.0), (3.0, 47.0)]
    assert [c[:2] for c in t.calls_of(kernels, 1, 2, 2)] == [(2.0, 43.0), (2.0, 44.0)]


def test_a_call_whose_kernels_are_missing_is_an_error_not_a_shorter_median():
    t = timeline()
    kernels = [("spin_kernel", 0.0, 100.0), ("gemm_bf16", 102.0, 150.0), ("spin_kernel", 160.0, 260.0)]
    with pytest.raises(RuntimeError, match="1 calls' kernels for 2 shields"):
        t.per_call(kernels, 2, 1)


def test_device_kernels_are_the_cuda_kernels_in_order_of_start_in_microseconds():
    t = timeline()
    events = [_event("gemm_bf16", 5_000, 2_500), _event("cudaLaunchKernel", 1_000, 100, "CPU"),
              _event("Memset (Device)", 4_000, 100), _event("spin_kernel", 1_000, 3_000)]
    prof = SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events)))
    assert t.device_kernels(prof) == [("spin_kernel", 1.0, 4.0), ("gemm_bf16", 5.0, 7.5)]


def test_traced_calls_alternate_the_contenders_each_after_a_flush_and_a_shield(monkeypatch):
    """The loop both probes time through: contenders called in turn, each call after the flush and the shield and
    between its two events, each contender's event times kept apart (a fake torch.cuda and profiler on the CPU)."""
    import contextlib

    import torch
    import torch.profiler

    t = timeline()
    order = []

    class Event:
        def __init__(self, enable_timing):
            self.at = None

        def record(self):
            self.at = len(order)
            order.append("event")

        def elapsed_time(self, end):  # ms: the steps between the two records
            return (end.at - self.at) / 1e3

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.profiler, "profile", lambda **_: contextlib.nullcontext(SimpleNamespace()))
    monkeypatch.setattr(t, "device_kernels", lambda prof: ["traced"])

    def step(name):
        return lambda: order.append(name)

    events, kernels = t.traced_calls({"a": step("a"), "b": step("b")}, 2, step("flush"), step("shield"))
    call = ["flush", "shield", "event"]
    assert order == call + ["a", "event"] + call + ["b", "event"] + call + ["a", "event"] + call + ["b", "event"]
    assert events == {"a": [2.0, 2.0], "b": [2.0, 2.0]} and kernels == ["traced"]
