"""A covered shape the run never timed (its guard's ranges hold the shapes between the timed ones, and a model's may be
none of them) is checked and timed by its first call, the kernel against the library on the caller's own inputs, and
judged as the run's checked and timed shapes were: the library takes it where the kernel's answer is off by more than
the run's tolerance, or the kernel was slower on the GPU, or saved less GPU time per call than it added host time.
Once per shape; never inside a CUDA graph capture; not with --keep-slower. On CPU, with the guard opened to CPU
tensors, CPU tensors counted as timed and a stand-in timer."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from package_runs import ATTENTION_TRITON, GEMM_TRITON, package_with_kernel

GEMM = '''
import torch

seen = []


def gemm(a, b):
    seen.append((a.shape[0], b.shape[1], a.shape[1]))
    return (a.float() @ b.float()).to(a.dtype)
'''
ATTENTION = '''
import torch

seen = []


def attention(q, k, v, causal, scale):  # SDPA's own binding: F's may be the route itself
    seen.append(q.shape[2])
    return torch._C._nn.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
'''
TIMED = {"dims": ["M", "N", "K", "dtype"], "shapes": [], "speedups": [], "reasons": [], "host_us": [], "timed": 1,
         "timed_shapes": [[8, 24, 40, "bfloat16"]], "enforced": True}
SLOWER = "measured slower than the library at this shape on its first call (0.500x, timed on this GPU)"
SAVES_LESS = ("saves less GPU time than it adds host time at this shape on its first call (10.0 µs against 20.0; "
              "timed on this GPU)")
_VERDICTS = {  # the stand-in timer's (ms, host µs) for the kernel and the library -> the fallback reason, or None
    ((2.0, 10.0), (1.0, 10.0)): SLOWER,
    ((1.0, 10.0), (2.0, 10.0)): None,
    ((1.0, 30.0), (1.01, 10.0)): SAVES_LESS,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


def _timer(pkg, monkeypatch, times) -> list:
    """CPU tensors count as timed, and the timer answers `times`; the list of the timings asked for."""
    timed = []
    monkeypatch.setattr(pkg._guard, "TIMED_ON", ("cpu",))
    monkeypatch.setattr(pkg._guard, "best_times", lambda *calls: timed.append(len(calls)) or list(times))
    return timed


def _gemms(pkg, *shapes):
    with torch.no_grad():
        for m, n, k in shapes:
            a, b = torch.randn(m, k, dtype=torch.bfloat16), torch.randn(k, n, dtype=torch.bfloat16)
            assert torch.allclose(pkg.gemm(a, b).float(), a.float() @ b.float(), atol=0.1, rtol=0.02)
    return pkg._loader.entry("gemm").__globals__["seen"]


@pytest.mark.parametrize("times", list(_VERDICTS), ids=["slower", "faster", "saves-less-than-host"])
def test_an_untimed_shape_goes_where_its_first_call_timed_it(runs, tmp_path, monkeypatch, times):
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, f"first_{list(_VERDICTS).index(times)}", GEMM,
                              device="cpu", device_names=[], library_faster=TIMED)
    timed = _timer(pkg, monkeypatch, times)
    seen = _gemms(pkg, (8, 24, 40), (8, 24, 40))
    assert timed == [] and seen == [(8, 24, 40)] * 2  # the run timed this one: the kernel's, as the run judged it
    _gemms(pkg, (9, 24, 40), (9, 24, 40))
    assert timed == [2], "timed once, the kernel and the library, on the shape's first call"
    if _VERDICTS[times] is None:
        assert pkg.calls == {"op": 4, "kernel": 4} and not pkg.fallbacks
    else:
        assert pkg.calls == {"op": 4, "kernel": 2, "library": 2} and pkg.fallbacks == {_VERDICTS[times]: 2}


def test_an_untimed_shape_whose_answer_differs_from_the_librarys_goes_to_the_library(runs, tmp_path, monkeypatch):
    """The run never checked the shape either: the first call compares the kernel's answer with the library's, within
    the tolerance the run checked it with, before any timing. The run's own shapes are the kernel's, as checked."""
    wrong = GEMM.replace("@ b.float()).to(", "@ b.float() * 1.1).to(")  # 10% off: past the run's 0.01
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "first_wrong", wrong, device="cpu", device_names=[],
                              library_faster=TIMED)
    timed = _timer(pkg, monkeypatch, ((1.0, 10.0), (2.0, 10.0)))
    with torch.no_grad():
        a, b = torch.randn(9, 40, dtype=torch.bfloat16), torch.randn(40, 24, dtype=torch.bfloat16)
        assert torch.equal(pkg.gemm(a, b), torch.matmul(a, b)) and torch.equal(pkg.gemm(a, b), torch.matmul(a, b))
        pkg.gemm(torch.randn(8, 40, dtype=torch.bfloat16), b)
    assert timed == [] and pkg.calls == {"op": 3, "library": 2, "kernel": 1}
    (reason, count), = pkg.fallbacks.items()
    found = re.fullmatch(r"the kernel's answer differed from the library's at this shape on its first call "
                         r"\(relative error (\S+), tolerance 0\.01\)", reason)
    assert count == 2 and found and 0.08 < float(found[1]) < 0.12, reason  # 10% off, bf16's rounding apart


def test_keep_slower_and_a_manifest_without_timed_shapes_time_nothing(runs, tmp_path, monkeypatch):
    for name, faster in (("first_kept", {**TIMED, "enforced": False}),
                         ("first_old", {key: value for key, value in TIMED.items() if key != "timed_shapes"})):
        pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, name, GEMM, device="cpu", device_names=[],
                                  library_faster=faster)
        timed = _timer(pkg, monkeypatch, ((2.0, 10.0), (1.0, 10.0)))
        assert _gemms(pkg, (9, 24, 40)) == [(9, 24, 40)] and timed == [] and not pkg.fallbacks


def test_inside_a_cuda_graph_capture_an_untimed_shape_waits_for_its_timing_on_the_library(runs, tmp_path,
                                                                                          monkeypatch):
    """Nothing is timed inside a capture: the library takes the call, and the verdict is not kept, so the next call
    outside one times the shape."""
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "first_capture", GEMM, device="cpu", device_names=[],
                              library_faster=TIMED)
    timed = _timer(pkg, monkeypatch, ((1.0, 10.0), (2.0, 10.0)))
    capturing = [True]
    monkeypatch.setattr(pkg._guard.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(pkg._guard.torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    monkeypatch.setattr(pkg._guard, "capture_refusal", lambda entry, tensor: None)  # the kernel may be captured
    assert _gemms(pkg, (9, 24, 40)) == [] and timed == []
    assert list(pkg.fallbacks) == ["untimed shape (not yet checked: no timing inside a CUDA graph capture)"]
    capturing[0] = False
    assert _gemms(pkg, (9, 24, 40)) == [(9, 24, 40)] * 2 and timed == [2]  # the first call's check, then the call


def test_an_untimed_attention_shape_is_timed_on_its_first_call_too(runs, tmp_path, monkeypatch):
    timed_shape = [1, 4, 2, 16, 64, True, "bfloat16"]
    faster = {"dims": ["B", "Hq", "Hkv", "S", "D", "causal", "dtype"], "shapes": [], "speedups": [], "reasons": [],
              "host_us": [], "timed": 1, "timed_shapes": [timed_shape], "enforced": True}
    pkg = package_with_kernel(runs, ATTENTION_TRITON, tmp_path, "first_sdpa", ATTENTION, device="cpu",
                              device_names=[], library_faster=faster)
    timed = _timer(pkg, monkeypatch, ((2.0, 10.0), (1.0, 10.0)))
    with torch.no_grad(), pkg.patch():
        for s in (16, 16, 17, 17):
            q = torch.randn(1, 4, s, 64, dtype=torch.bfloat16)
            k, v = torch.randn(1, 2, s, 64, dtype=torch.bfloat16), torch.randn(1, 2, s, 64, dtype=torch.bfloat16)
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    # S 17: the first call's check of the kernel's answer against SDPA's (the timer is a stand-in), then SDPA's
    assert timed == [2] and pkg._loader.entry("attention").__globals__["seen"] == [16, 16, 17]
    assert pkg.calls == {"op": 4, "kernel": 2, "library": 2} and pkg.fallbacks == {SLOWER: 2}


def test_a_traced_call_at_an_untimed_shape_is_the_library_node_where_its_first_call_would_be(runs, tmp_path,
                                                                                           monkeypatch):
    """While torch.compile traces, the shape's first call is made then, on real tensors of its shapes: where the
    kernel was slower, the graph holds torch's own matmul, as unpatched."""
    from test_routes import _graph_targets

    for name, times, ours in (("traced_slow", ((2.0, 10.0), (1.0, 10.0)), False),
                              ("traced_fast", ((1.0, 10.0), (2.0, 10.0)), True)):
        pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, name, GEMM, device="cpu", device_names=[],
                                  library_faster=TIMED)
        timed = _timer(pkg, monkeypatch, times)
        with pkg.patch():
            targets = _graph_targets(torch.matmul, torch.randn(9, 40, dtype=torch.bfloat16),
                                     torch.randn(40, 24, dtype=torch.bfloat16))
        assert timed == [2], "the verdict was reached once, at trace time"
        assert any(f"{name}.gemm" in t for t in targets) == ours, targets
        assert ours or any("matmul" in t or "mm" in t for t in targets), targets


def test_the_first_calls_comparison_takes_odd_outputs(runs, tmp_path):
    """The difference is taken in the kernel's own output where it can be; a wrong shape, a NaN, an fp32 output or a
    broadcast view are judged, never raised on."""
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "first_error", GEMM, device="cpu", device_names=[],
                              library_faster=TIMED)
    error, x = pkg._guard._error, torch.randn(4, 5, dtype=torch.bfloat16)
    assert error(x.clone(), x) == 0.0 and error(x.float(), x) == 0.0
    assert 0.09 < error(x * 1.1, x) < 0.11
    assert error(torch.randn(5, 4, dtype=torch.bfloat16), x) == float("inf")
    assert error(torch.full((4, 5), float("nan"), dtype=torch.bfloat16), x) == float("inf")
    row = x[:1].clone()
    assert error(row.expand(4, 5), x) > 0 and torch.equal(row, x[:1])  # the view's storage is left as it was


@pytest.mark.parametrize("gpu", ["run", "kin", "kin_kept", "other"])
def test_on_another_gpu_of_the_runs_capability_every_shape_is_judged_by_its_first_call(runs, tmp_path, monkeypatch,
                                                                                      gpu):
    """The run's timings hold on its own GPU only. Another GPU of its compute capability runs the same code, so each
    covered shape there is checked and timed by its first call, those the run timed included (the run sent 8x24x40
    to the library, 9x24x40 it never timed). Packaged with --keep-slower, which judges nothing, and on a GPU of
    another capability, every call goes to the library."""
    name, capability = {"run": ("NVIDIA H200", (9, 0)), "other": ("NVIDIA A100-SXM4-80GB", (8, 0))}.get(
        gpu, ("NVIDIA H100 80GB HBM3", (9, 0)))
    slower = {**TIMED, "shapes": [[8, 24, 40, "bfloat16"]], "speedups": [0.9], "reasons": ["gpu"], "host_us": [None],
              "enforced": gpu != "kin_kept"}
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, f"first_gpu_{gpu}", GEMM, device="cpu",
                              device_names=["NVIDIA H200"], capabilities=[[9, 0]], library_faster=slower)
    timed = _timer(pkg, monkeypatch, ((1.0, 10.0), (2.0, 10.0)))  # the kernel twice as fast on this GPU
    monkeypatch.setattr(pkg._guard.torch.cuda, "get_device_name", lambda index=None: name)
    monkeypatch.setattr(pkg._guard.torch.cuda, "get_device_capability", lambda index=None: capability)
    seen = _gemms(pkg, (8, 24, 40), (8, 24, 40), (9, 24, 40), (9, 24, 40))
    if gpu == "run":
        assert timed == [2] and seen == [(9, 24, 40)] * 3  # the run's verdict at 8x24x40; 9x24x40's first call
        assert pkg.fallbacks == {"measured slower than the library at this shape (0.900x)": 2}
    elif gpu == "kin":
        assert timed == [2, 2] and seen == [(8, 24, 40)] * 3 + [(9, 24, 40)] * 3 and not pkg.fallbacks
    else:
        ran = f"compute capability {'.'.join(map(str, capability))}; the run measured on NVIDIA H200"
        assert timed == [] and seen == [] and pkg.fallbacks == {f"gpu {name} ({ran})": 4}


def test_a_first_calls_timing_keeps_the_hosts_queueing_off_the_gpus_clock(runs, tmp_path, monkeypatch):
    """Before each timed round the device spins for longer than the host took to queue a call, so the round's
    events time the GPU's work, not a wrapper's host time (as the run's evaluator does): the spin, then the start
    event, the calls, the end event; a warm-up call before each spin gauges its length."""
    pkg = package_with_kernel(runs, GEMM_TRITON, tmp_path, "first_spin", GEMM, device="cpu", device_names=[],
                              library_faster=TIMED)
    guard, log = pkg._guard, []

    class Event:
        def __init__(self, enable_timing):
            self.at = None

        def record(self):
            log.append("event")
            self.at = len(log)

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return float(end.at - self.at)

    monkeypatch.setattr(guard.torch.cuda, "Event", Event)
    monkeypatch.setattr(guard.torch.cuda, "_sleep", lambda cycles: log.append(("spin", cycles)))
    ticks = iter(range(0, 10**9, 50))  # the host clock: 50 µs between any two readings
    monkeypatch.setattr(guard.time, "perf_counter", lambda: next(ticks) * 1e-6)
    times = guard.best_times(lambda: log.append("ours"), lambda: log.append("library"))
    rounds = [log[i:i + 9] for i in range(0, len(log), 9)]
    assert len(rounds) == guard.TIMING_ROUNDS * 2 and len(log) == 9 * len(rounds)
    for n, round_ in enumerate(rounds):
        name = ("ours", "library")[n % 2]
        assert round_[0] == name and round_[2] == "event" and round_[3:8] == [name] * 5 and round_[8] == "event"
        # the warm-up call took 50 µs of host time: a spin of 2 x 5 x 50 µs
        spin, cycles = round_[1]
        assert spin == "spin" and abs(cycles - guard.SPIN_FIT * guard.TIMING_CALLS * 50 * guard.SPIN_CYCLES_PER_US) <= 1
    # the events' stand-in time per call; the host's µs per call (one 50 µs tick over the five calls)
    assert times == [(pytest.approx(6.0 / guard.TIMING_CALLS), pytest.approx(10.0))] * 2
