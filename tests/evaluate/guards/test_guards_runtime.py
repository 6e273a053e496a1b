"""Unit tests of the runtime guards: the op recorder, the output-type and input checks, and the Sentinel."""

from __future__ import annotations

import os

import importlib.util
import itertools
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import torch

from avo.evaluate import guards
from avo.evaluate.guards import Rejection

REPO = Path(__file__).resolve().parents[3]
CHEATS = Path(__file__).parents[1] / "cheats"


# -- runtime: the op recorder ---------------------------------------------------------------------------------------
def _inputs():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(8, 16, generator=gen), torch.randn(16, 4, generator=gen)


def test_forbidden_ops_are_the_reference_compute_ops_and_their_family():
    a, b = _inputs()
    ops = guards.forbidden_ops(lambda: torch.matmul(a.double(), b.double()))
    assert {"mm", "bmm", "addmm", "convolution", "linear"} <= ops
    assert not ops & {"_to_copy", "empty", "copy_", "view", "t"}
    assert "_softmax" not in ops


@pytest.mark.parametrize("spelling", [
    lambda a, b: getattr(a, "".join(reversed("lumtam")))(b),
    lambda a, b: torch.ops.aten.mm.default(a, b),
    lambda a, b: a.__matmul__(b),
    lambda a, b: torch.einsum("ik,kj->ij", a, b),
    lambda a, b: torch.nn.functional.conv1d(a.t()[None], b.t()[:, :, None])[0].t(),
])
def test_call_watched_rejects_library_work_however_spelled(spelling):
    a, b = _inputs()
    forbidden = guards.forbidden_ops(lambda: torch.matmul(a.double(), b.double()))
    with pytest.raises(Rejection) as info:
        guards.call_watched(lambda: spelling(a, b), forbidden)
    assert info.value.rule == "runtime.library_op"


def test_call_watched_rejects_even_when_the_call_then_raises():
    a, b = _inputs()
    forbidden = guards.forbidden_ops(lambda: torch.matmul(a, b))

    def cheat():
        torch.mm(a, b)
        raise ValueError("pretend the kernel failed")

    with pytest.raises(Rejection):
        guards.call_watched(cheat, forbidden)


def test_pointwise_host_code_is_allowed_but_the_reference_heavy_ops_are_not():
    from avo.tasks import load

    task = load("attention")
    q, k, v, causal, scale = task.make_inputs(task.cases("tiny")[0], 0, "cpu")
    forbidden = guards.forbidden_ops(lambda: task.reference(q, k, v, causal, scale))
    assert {"_softmax", "bmm", "mm", "scaled_dot_product_attention"} <= forbidden
    assert not forbidden & {"mul", "masked_fill", "exp", "gt"}
    guards.call_watched(lambda: (q * scale).masked_fill(q > 3, 0.0).exp(), forbidden)
    with pytest.raises(Rejection):
        guards.call_watched(lambda: torch.softmax(q.float() @ k.float().transpose(-1, -2), -1), forbidden)


def test_call_watched_passes_plumbing_and_returns_the_output():
    a, b = _inputs()
    forbidden = guards.forbidden_ops(lambda: torch.matmul(a, b))
    out = guards.call_watched(lambda: torch.empty(8, 4).copy_(torch.zeros(8, 4)).contiguous(), forbidden)
    assert out.shape == (8, 4)


def _strict(reference=lambda: None) -> frozenset[str]:
    return guards.watched_ops("strict", guards.forbidden_ops(reference))


def test_the_policies_watch_what_they_say():
    a, b = _inputs()
    reference = guards.forbidden_ops(lambda: torch.matmul(a, b))
    assert guards.watched_ops("strict", reference) == reference | {guards.ANY_COMPUTE}
    assert guards.watched_ops("partial", reference) == frozenset()
    assert guards.watched_ops("strict", reference | {guards.ANY_COMPUTE}) == reference | {guards.ANY_COMPUTE}


@pytest.mark.parametrize("rewrite, ops", [
    (lambda x: (e := torch.exp(x - x.amax(1, keepdim=True))) / e.sum(1, keepdim=True),
     "aten.amax, aten.div, aten.exp, aten.sub, aten.sum"),
    (lambda x: x.clamp(min=0), "aten.clamp"),
    (lambda x: torch.zeros_like(x).add_(x), "aten.add_"),
    (lambda x: torch.empty_like(x).copy_(x).mul_(2), "aten.mul_"),
    (lambda x: torch.full((1,), float(x.max())), "aten._local_scalar_dense, aten.max"),
    (lambda x: x.t().gather(0, torch.zeros(1, 8, dtype=torch.long)), "aten.gather"),
])
def test_strict_rejects_any_torch_compute_naming_the_ops(rewrite, ops):
    x = _inputs()[0]
    with pytest.raises(Rejection) as info:
        guards.call_watched(lambda: rewrite(x), _strict(lambda: torch.softmax(x, 1)))
    assert info.value.rule == "runtime.torch_op"
    assert f"dispatched {ops}: under --ops strict" in info.value.message
    guards.call_watched(lambda: rewrite(x), guards.forbidden_ops(lambda: torch.softmax(x, 1)))  # reference ops only


def test_strict_names_the_reference_op_first():
    a, b = _inputs()
    with pytest.raises(Rejection) as info:
        guards.call_watched(lambda: torch.mm(a, b).relu(), _strict(lambda: torch.matmul(a, b)))
    assert info.value.rule == "runtime.library_op" and "aten.mm" in info.value.message


def test_strict_lets_allocation_views_and_copies_through():
    x = _inputs()[0]

    def wrapper():
        out = torch.empty(16, 8)
        out.copy_(x.t().contiguous().view(16, 8))
        acc = torch.zeros(4, 4)
        acc.fill_(float("-inf"))
        return out.reshape(2, 64).permute(1, 0).clone().to(torch.float64), acc.zero_(), x[:, :2].unsqueeze(0)

    guards.call_watched(wrapper, _strict())
    assert {"empty", "copy_", "zeros", "fill_", "zero_", "clone", "_to_copy", "view", "permute"} <= guards.OWN_WORK


def test_strict_does_not_blame_the_candidate_for_tritons_own_torch_ops():
    """Triton's autotuner summarizes its timings with torch ops on some versions: code in the triton package is not
    the candidate's; a function the candidate hands to it is."""
    import triton

    x = _inputs()[0]
    inside_triton = str(Path(triton.__file__).resolve().parent / "testing_summary.py")
    scope: dict = {}
    exec(compile("def summarize(fn):\n    fn()\n    return torch.tensor([1.0, 3.0]).median()\n", inside_triton,
                 "exec"), {"torch": torch}, scope)
    guards.call_watched(lambda: scope["summarize"](lambda: None), _strict())
    with pytest.raises(Rejection) as info:
        guards.call_watched(lambda: scope["summarize"](lambda: x.exp()), _strict())
    assert "aten.exp" in info.value.message and "median" not in info.value.message


# -- runtime: output type and inputs --------------------------------------------------------------------------------
class _Sub(torch.Tensor):
    pass


class _Liar(torch.Tensor):
    @property
    def __class__(self):
        return torch.Tensor


@pytest.mark.parametrize("make", [
    lambda: torch.zeros(2, 3).as_subclass(_Sub),
    lambda: torch.zeros(2, 3).as_subclass(_Liar),
    lambda: torch.nn.Parameter(torch.zeros(2)),
    lambda: [torch.zeros(2)],
    lambda: torch.zeros(2, 3).to_sparse(),
    lambda: torch.empty(2, 3, device="meta"),
])
def test_output_type_rejects_anything_but_a_plain_dense_tensor(make):
    with pytest.raises(Rejection) as info:
        guards.check_output_type(make())
    assert info.value.rule == "runtime.output_type"


def test_output_type_accepts_plain_tensors_and_their_views():
    guards.check_output_type(torch.zeros(4, 4))
    guards.check_output_type(torch.zeros(4, 4)[1:].t())


def test_inputs_unchanged_passes_untouched_inputs_even_with_nan():
    a = torch.tensor([1.0, float("nan"), -0.0])
    before = guards.fingerprint((a, True, 0.5))
    guards.check_inputs_unchanged(before, (a, True, 0.5))


@pytest.mark.parametrize("mutate", [
    lambda a: a.add_(1e-3),
    lambda a: a[0, 2].copy_(torch.tensor(0.0)),  # -0.0 -> +0.0: equal as numbers, not as bits
    lambda a: a.t_(),
    lambda a: a.set_(torch.zeros(2, 3)),
    lambda a: a.resize_(6),
])
def test_inputs_unchanged_sees_values_bits_and_metadata(mutate):
    a = torch.tensor([[1.0, 2.0, -0.0], [3.0, 4.0, 5.0]])
    before = guards.fingerprint((a,))
    mutate(a)
    with pytest.raises(Rejection) as info:
        guards.check_inputs_unchanged(before, (a,))
    assert info.value.rule == "runtime.input_mutated"


# -- runtime: the Sentinel ------------------------------------------------------------------------------------------
_counter = itertools.count()


@pytest.fixture
def watched(tmp_path):
    """A candidate folder with a Sentinel on it; `load(source)` imports a kernel.py from that folder."""
    folder = tmp_path / "cand"
    folder.mkdir()
    sentinel = guards.Sentinel(folder)

    def load(source: str):
        path = folder / f"k{next(_counter)}.py"
        path.write_text(textwrap.dedent(source))
        spec = importlib.util.spec_from_file_location(path.stem + "_guard_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    yield sentinel, load, folder
    sentinel.close()


def _verdict(sentinel) -> Rejection | None:
    try:
        sentinel.verify("check")
    except Rejection as exc:
        return exc
    return None


def test_sentinel_is_quiet_when_nothing_happened(watched):
    sentinel, load, _ = watched
    module = load("import torch\n\ndef go():\n    return torch.ones(3) * 2\n")
    module.go()
    assert _verdict(sentinel) is None


@pytest.mark.parametrize("target,attr", [
    (time, "perf_counter"), (time, "monotonic"), (torch.cuda, "synchronize"), (torch.cuda.Event, "elapsed_time"),
    (torch.cuda.Event, "record"), (torch.linalg, "vector_norm"), (torch, "isfinite"), (torch.Tensor, "__sub__"),
])
def test_sentinel_sees_a_replaced_timer_or_scoring_function(watched, target, attr):
    sentinel, _, _ = watched
    had = attr in vars(target)
    original = vars(target).get(attr)
    setattr(target, attr, lambda *a, **k: 0.0)
    try:
        found = _verdict(sentinel)
    finally:
        if had:
            setattr(target, attr, original)
        else:
            delattr(target, attr)
    assert found is not None and found.rule == "runtime.timer_patched" and attr in found.message
    assert _verdict(sentinel) is None


def test_sentinel_sees_a_disguised_replacement_and_a_swapped_module(watched):
    import functools

    sentinel, load, _ = watched
    original = torch.linalg.vector_norm
    fake = functools.wraps(original)(lambda *a, **k: torch.tensor(0.0))
    torch.linalg.vector_norm = fake
    try:
        assert _verdict(sentinel).rule == "runtime.timer_patched"
    finally:
        torch.linalg.vector_norm = original
    real_time = sys.modules["time"]
    sys.modules["time"] = type(sys)("time")
    try:
        assert _verdict(sentinel).rule == "runtime.timer_patched"
    finally:
        sys.modules["time"] = real_time


def test_sentinel_ignores_torch_rebinding_its_own_functions(watched):
    """torch swaps some functions for wrappers of themselves on first use; that is not a candidate's patch."""
    sentinel, _, _ = watched
    original = torch.manual_seed
    torch.manual_seed = torch._disable_dynamo(getattr(original, "__wrapped__", original))
    try:
        assert torch.manual_seed is not original
        assert _verdict(sentinel) is None
    finally:
        torch.manual_seed = original


def test_sentinel_sees_a_thread_even_after_it_ended(watched):
    sentinel, load, _ = watched
    module = load("import threading\n\ndef go():\n    t = threading.Thread(target=lambda: None)\n"
                  "    t.start()\n    t.join()\n")
    module.go()
    found = _verdict(sentinel)
    assert found is not None and found.rule == "runtime.thread" and "k" in found.message


def test_sentinel_sees_a_live_low_level_thread(watched):
    sentinel, load, _ = watched
    module = load("import _thread\nimport time\nstop = []\n\ndef spin():\n    while not stop:\n"
                  "        time.sleep(0.01)\n\ndef go():\n    _thread.start_new_thread(spin, ())\n")
    module.go()
    time.sleep(0.1)
    try:
        found = _verdict(sentinel)
    finally:
        module.stop.append(1)
    assert found is not None and found.rule == "runtime.thread"


def test_sentinel_refuses_and_reports_a_write_outside_the_folder(watched, tmp_path):
    sentinel, load, folder = watched
    # A place outside every allowed folder: the checkout, unless it sits in the temp folder (as a CI clone may).
    temp = os.path.realpath(tempfile.gettempdir())
    base = next(p for p in (REPO, Path.home(), Path("/var/tmp"))
                if not os.path.realpath(p).startswith(temp + os.sep) and os.access(p, os.W_OK))
    outside = base / f".guard-test-{os.getpid()}.txt"
    module = load("def go(path):\n    open(path, 'w').write('x')\n")
    with pytest.raises(Rejection) as info:
        module.go(str(outside))
    assert info.value.rule == "runtime.file_access" and not outside.exists()
    assert _verdict(sentinel).rule == "runtime.file_access"


def test_sentinel_allows_writes_in_the_folder_and_the_temp_folder(watched, tmp_path):
    sentinel, load, folder = watched
    module = load("import tempfile\n\ndef go(path):\n    open(path, 'w').write('x')\n"
                  "    with tempfile.NamedTemporaryFile('w') as f:\n        f.write('y')\n")
    module.go(str(folder / "cache.bin"))
    assert _verdict(sentinel) is None


def test_sentinel_refuses_a_process_started_by_the_candidate(watched, tmp_path):
    sentinel, load, _ = watched
    marker = tmp_path / "spawned"
    module = load("import subprocess\n\ndef go(marker):\n    subprocess.run(['touch', marker])\n")
    with pytest.raises(Rejection):
        module.go(str(marker))
    assert not marker.exists()
    assert _verdict(sentinel).rule == "runtime.file_access"


def test_sentinel_does_not_blame_a_library_for_its_own_processes(watched, tmp_path):
    sentinel, load, _ = watched
    library = tmp_path / "lib" / "fake_library.py"
    library.parent.mkdir()
    library.write_text("import subprocess\n\ndef build():\n    subprocess.run(['true'])\n")
    spec = importlib.util.spec_from_file_location("fake_library", library)
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    module = load("def go(build):\n    build()\n")
    module.go(fake.build)
    assert _verdict(sentinel) is None


def test_every_module_the_sentinel_watches_exists():
    """A watched module that is not loaded is skipped, so a name left behind by a move would watch nothing."""
    import importlib

    from avo.evaluate.guards.sentinel import _WATCHED_MODULES

    for name in _WATCHED_MODULES:
        importlib.import_module(name)
