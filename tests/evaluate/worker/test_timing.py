"""Timing: interleaved rounds, input rotation, spot-check sampling, what the L2 flush reads (CPU); CUDA events, what
the L2 flush evicts and leaves dirty, side streams (GPU)."""

from __future__ import annotations

import time

import pytest
import torch

from avo.evaluate.worker.bench import SpotChecks
from avo.evaluate.worker.timing import Contender, InputRotation, L2Flush, LaunchShield, Measurement, time_interleaved


def sleeper(seconds: float, log: list):
    def run(args):
        log.append(args[0])
        time.sleep(seconds)
        return args[0]
    return run


def test_timing_as_configured_passes_on_every_timing_setting_of_the_config(monkeypatch):
    """The bench stage and the sweeps that time as it does share one mapping from EvalConfig to the timer."""
    from avo.config import EvalConfig
    from avo.evaluate.worker import timing

    seen = {}
    monkeypatch.setattr(timing, "time_interleaved", lambda contenders, **kw: seen.update(kw) or {})
    config = EvalConfig(warmup_ms=7.0, rep_ms=70.0, warmup_calls=3, launch_shield_us=11.0, min_rounds=4,
                        target_error=0.005)
    timing.time_as_configured([], config, device="cuda", l2_bytes=5, paired_with="library", on_output=print)
    assert seen == {"device": "cuda", "l2_bytes": 5, "warmup_ms": 7.0, "rep_ms": 70.0, "warmup_calls": 3,
                    "on_output": print, "shield_us": 11.0, "min_rounds": 4, "target_error": 0.005,
                    "paired_with": "library"}


def test_wall_clock_rounds_alternate_and_measure():
    order: list = []
    seen: list = []
    fast = Contender("fast", lambda i: (("fast", i),), sleeper(0.002, order))
    slow = Contender("slow", lambda i: (("slow", i),), sleeper(0.02, order))
    result = time_interleaved([fast, slow], device="interpret", l2_bytes=0, warmup_ms=0, rep_ms=0,
                              on_output=lambda name, i, args, out: seen.append((name, i)))
    assert [name for name, _ in order] == ["fast", "slow"] + ["fast", "slow", "slow", "fast", "fast", "slow"]
    assert result["fast"].source == "interpreter" and len(result["fast"].samples_ms) == 3
    assert 2 <= result["fast"].ms < 15
    assert result["slow"].ms >= 20
    assert seen.count(("fast", 0)) == 1 and ("slow", 3) in seen


def test_wall_clock_timing_leaves_each_contenders_first_call_out(monkeypatch):
    """36_LSTMHn's library ran 187 ms on its first call of a case and 6 ms after: the first is warm-up, for the
    candidate as for the library. The clock is the contenders' own: each call advances it by its cost."""
    from avo.evaluate.worker import timing

    clock = [0.0]
    monkeypatch.setattr(timing, "_perf_counter", lambda: clock[0])

    def costs(first_ms: float, then_ms: float):
        calls = []

        def run(args):
            clock[0] += (first_ms if not calls else then_ms) / 1e3
            calls.append(args[0])
            return args[0]
        return run, calls

    library, library_calls = costs(187.0, 6.0)
    candidate, candidate_calls = costs(900.0, 3.0)
    result = time_interleaved([Contender("candidate", lambda i: (i,), candidate),
                               Contender("library", lambda i: (i,), library)],
                              device="interpret", l2_bytes=0, warmup_ms=0, rep_ms=0)
    assert library_calls == candidate_calls == [0, 1, 2, 3]  # call 0 untimed, then one per round
    assert result["library"].samples_ms == pytest.approx([6.0] * 3)
    assert result["candidate"].samples_ms == pytest.approx([3.0] * 3)


class _FakeEvent:
    """Stands in for torch.cuda.Event on the CPU: stamps the wall clock when recorded."""

    def __init__(self, enable_timing: bool = False):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def query(self) -> bool:
        return self.t is not None

    def elapsed_time(self, other) -> float:
        return (other.t - self.t) * 1e3


def test_gpu_path_alternates_contenders_call_by_call(monkeypatch):
    """Both contenders see the same clock and power state: calls alternate one by one, the order flips each round."""
    import avo.evaluate.worker.timing as timing

    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(timing, "L2Flush", lambda l2_bytes: (lambda: None))
    order: list = []
    a = Contender("a", lambda i: (("a", i),), sleeper(0.001, order))
    b = Contender("b", lambda i: (("b", i),), sleeper(0.001, order))
    result = time_interleaved([a, b], device="cuda", l2_bytes=0, warmup_ms=0, rep_ms=0, rounds=2, warmup_calls=2)
    names = [name for name, _ in order]
    warm = names[:4]
    assert warm == ["a", "b", "a", "b"]  # warm-up alternates too: two calls each, as asked
    timed = names[4:]
    assert timed == ["a", "b", "b", "a"]  # rep_ms=0: MIN_CALLS_PER_BLOCK (one) call each per round
    assert result["a"].source == "gpu" and len(result["a"].round_medians_ms) == 2
    assert 0.9 <= result["a"].ms < 20


class _Clock:
    """A clock the contenders advance by the time they "take": stop rules see exact times, whatever the load."""

    now = 0.0

    class Event(_FakeEvent):
        def record(self):
            self.t = _Clock.now

    @staticmethod
    def take(seconds: float) -> None:
        _Clock.now += seconds


def test_rounds_stop_early_only_once_every_contender_is_steady(monkeypatch):
    """min_rounds and target_error: steady contenders end after min_rounds; one whose round medians swing (every
    other round ten times slower) keeps the others in all five rounds; target_error 0 always times all rounds."""
    import avo.evaluate.worker.timing as timing

    monkeypatch.setattr(torch.cuda, "Event", _Clock.Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(timing, "L2Flush", lambda l2_bytes: (lambda: None))
    steady = Contender("steady", lambda i: (i,), lambda args: _Clock.take(0.002))
    calls = {"n": 0}

    def swinging(args):
        calls["n"] += 1
        _Clock.take(0.02 if (calls["n"] // 2) % 2 else 0.001)

    swing = Contender("swing", lambda i: (i,), swinging)

    def rounds(contenders, **kw):
        result = time_interleaved(contenders, device="cuda", l2_bytes=0, warmup_ms=0, rep_ms=0, **kw)
        return {name: len(m.round_medians_ms) for name, m in result.items()}

    assert rounds([steady], min_rounds=3, target_error=0.5) == {"steady": 3}
    assert rounds([steady], min_rounds=3, target_error=0.0) == {"steady": 5}
    assert rounds([steady], min_rounds=2, target_error=0.5, rounds=4) == {"steady": 2}
    assert rounds([steady, swing], min_rounds=3, target_error=0.1) == {"steady": 5, "swing": 5}


def test_paired_rounds_stop_when_the_ratio_is_steady_though_both_times_swing(monkeypatch):
    """A drift common to both contenders (every other round both run ten times slower, as a clock change would)
    swings each time but not their ratio: paired with the library the candidate stops at min_rounds; unpaired, the
    same case takes every round."""
    import avo.evaluate.worker.timing as timing

    monkeypatch.setattr(torch.cuda, "Event", _Clock.Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(timing, "L2Flush", lambda l2_bytes: (lambda: None))
    calls = {"n": 0}

    def drifting(base_s):
        def run(args):
            calls["n"] += 1
            slow = (calls["n"] - 1) // 2 % 2 and calls["n"] > 4  # rounds 1, 3: both slow (after two warm-ups each)
            _Clock.take(base_s * (10 if slow else 1))
        return run

    def rounds(**kw):
        calls["n"] = 0
        contenders = [Contender("cand", lambda i: (i,), drifting(0.002)),
                      Contender("lib", lambda i: (i,), drifting(0.003))]
        result = time_interleaved(contenders, device="cuda", l2_bytes=0, warmup_ms=0, rep_ms=0, min_rounds=3,
                                  target_error=0.05, warmup_calls=2, **kw)
        return len(result["cand"].round_medians_ms), result

    paired, result = rounds(paired_with="lib")
    assert paired == 3
    assert timing.ratio_error(result["cand"], result["lib"]) < 0.05 < result["cand"].error
    assert rounds()[0] == 5


def test_ratio_error_is_the_standard_error_of_the_log_ratios():
    from avo.evaluate.worker.timing import ratio_error

    mine = Measurement(source="gpu", round_medians_ms=[1.0, 2.0, 1.0])
    base = Measurement(source="gpu", round_medians_ms=[2.0, 4.0, 2.0])
    assert ratio_error(mine, base) == 0.0
    uneven = Measurement(source="gpu", round_medians_ms=[1.0, 1.1, 0.9])
    assert ratio_error(uneven, Measurement(source="gpu", round_medians_ms=[1.0, 1.0, 1.0])) == pytest.approx(
        0.0580, abs=1e-3)
    assert ratio_error(Measurement(source="gpu", round_medians_ms=[1.0]), base) is None


def test_launch_shield_spins_between_the_flush_and_the_start_event(monkeypatch):
    """Each timed call: flush, an event, spin (shield_us x 2000 cycles), start event, then the call, once the event
    after the flush has passed (so the spin holds the SMs before the call can launch anything); no spin and no wait
    at shield 0."""
    import avo.evaluate.worker.hold as hold
    import avo.evaluate.worker.timing as timing

    log: list = []

    class Event(_FakeEvent):
        def record(self):
            log.append("event")
            super().record()

        def query(self):
            log.append("query")
            return super().query()

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(hold, "spin", lambda cycles: log.append(("spin", cycles)))
    monkeypatch.setattr(timing, "L2Flush", lambda l2_bytes: (lambda: log.append("flush")))
    monkeypatch.setattr(timing, "SHIELD_FIT", 0.0)  # the configured shield alone (a preempted call would grow it)
    run = Contender("a", lambda i: (i,), lambda args: log.append("run"))
    time_interleaved([run], device="cuda", l2_bytes=0, warmup_ms=0, rep_ms=0, rounds=1, shield_us=25)
    calls = [log[i:i + 8] for i in range(0, len(log), 8)]
    assert len(calls) == 2  # one warm-up call (the default least), one timed
    assert all(c == ["flush", "event", ("spin", 50_000), "event", "query", "run", "event", "event"] for c in calls), log
    log.clear()
    time_interleaved([run], device="cuda", l2_bytes=0, warmup_ms=0, rep_ms=0, rounds=1)
    assert not any(isinstance(x, tuple) or x == "query" for x in log)


def test_the_shield_grows_to_cover_launch_work_slower_than_it(monkeypatch):
    """A wrapper whose host work takes 300 µs, under a 25 µs shield: the warm-up measures it, and the timed calls
    spin at least 1.5 times as long, so its launch work is not timed as the kernel's; the measurement says so."""
    import avo.evaluate.worker.hold as hold
    import avo.evaluate.worker.timing as timing

    spins: list = []
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(hold, "spin", spins.append)
    monkeypatch.setattr(timing, "L2Flush", lambda l2_bytes: (lambda: None))

    def slow_wrapper(args):
        began = time.perf_counter()
        while time.perf_counter() - began < 300e-6:
            pass

    run = Contender("slow", lambda i: (i,), slow_wrapper)
    m = time_interleaved([run], device="cuda", l2_bytes=0, warmup_ms=0, rep_ms=0, rounds=1, shield_us=25,
                         warmup_calls=3)["slow"]
    assert spins[:3] == [50_000] * 3  # the warm-up, at the configured shield
    assert timing.SHIELD_FIT * 300 * 2000 <= spins[3] <= timing.SHIELD_MAX_US * 2000
    assert m.host_us >= 300 and int(m.shield_us * 2000) == spins[3]


def test_measurement_median_of_round_medians_and_spread():
    m = Measurement(source="gpu", samples_ms=[1.0, 1.0, 2.0, 2.0], round_medians_ms=[1.0, 3.0, 2.0])
    assert m.ms == 2.0
    assert m.spread == pytest.approx(0.5 / 1.5)
    assert Measurement(source="gpu").spread == 0.0


def test_rotation_gives_every_call_new_content_and_rotates_addresses():
    sources = [(torch.randn(8, 8), torch.randn(8, 4), True, 0.5) for _ in range(3)]
    rotation = InputRotation(sources, seed=1)
    calls = [tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in rotation(i)) for i in range(12)]
    addresses = [rotation(i)[0].data_ptr() for i in range(12)]
    assert len(set(addresses)) == 4 and addresses[0] == addresses[4] and addresses[0] != addresses[1]
    for i in range(12):
        for j in range(i):
            assert not torch.equal(calls[i][0], calls[j][0])
        assert calls[i][2:] == (True, 0.5)
        rebuilt = rotation.rebuild(i)
        assert torch.equal(rebuilt[0], calls[i][0]) and torch.equal(rebuilt[1], calls[i][1])
    assert all(x.data_ptr() not in {s.data_ptr() for s in sources[0][:2]} for x in rotation(0)[:2])


def test_spot_checks_keep_one_random_call_and_type_check_every_output():
    class Lazy(torch.Tensor):
        pass

    spots = SpotChecks(seed=3)
    for i in range(50):
        out = torch.zeros(2).as_subclass(Lazy) if i == 30 else torch.zeros(2)
        spots.observe("candidate0", i, (), out)
        spots.observe("library", i, (), torch.zeros(2).as_subclass(Lazy))
    [(i, out)] = spots.kept("candidate0")
    assert 0 <= i < 50
    index, rejection = spots.bad_type["candidate0"]
    assert index == 30 and rejection.rule == "runtime.output_type"
    assert spots.kept("library") == [] and "library" not in spots.bad_type


def test_spot_check_sample_is_spread_over_the_calls():
    picks = set()
    for seed in range(40):
        spots = SpotChecks(seed)
        for i in range(20):
            spots.observe("c", i, (), i)
        picks.add(spots.sample["c"][0])
    assert len(picks) >= 8


def test_l2_flush_reads_every_element_of_a_buffer_past_the_l2_size():
    flush = L2Flush(1 << 20, device="cpu")
    n = flush.buffer.numel()
    assert n * 4 >= 2 * (1 << 20)
    flush()
    assert int(flush.result) == 1
    for marked in (0, n // 2 + 3, n - 1):
        flush.buffer[marked] = 5
        flush()
        assert int(flush.result) == 5
        flush.buffer[marked] = 1


def _median_ms(before, timed, reps: int = 25) -> float:
    """The median time of `timed` after `before`, a 100 µs spin between them (the evaluator's launch shield), so the
    host's launch of `timed` is never timed as the device's work."""
    shield, times = LaunchShield(100.0), []
    for _ in range(reps):
        before()
        shield()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        timed()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def _l2_bytes() -> int:
    return torch.cuda.get_device_properties(0).L2_cache_size


def _reader(nbytes: int):
    """A call that reads a tensor of `nbytes` once (as the flush reads its buffer), writing one element."""
    x, top = torch.ones(nbytes // 4, dtype=torch.int32, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda")
    return lambda: torch.amax(x, 0, keepdim=True, out=top)


@pytest.mark.gpu
def test_l2_flush_evicts_what_a_call_read():
    """A tensor a third of L2 reads at L2's speed when it was just read, and at DRAM's after a flush."""
    read, flush = _reader(_l2_bytes() // 3), L2Flush(_l2_bytes())
    cached = _median_ms(read, read)
    flushed = _median_ms(flush, read)
    assert flushed > 1.25 * cached, (cached, flushed)


@pytest.mark.gpu
def test_l2_flush_leaves_no_write_backs_in_the_timed_window():
    """Dirty lines written before the flush (the last call's output, the inputs' preparation) are written back
    during the flush, not during the timed call: a DRAM-bound read times the same after them as after a flush
    alone. Without the flush's read they cost the read a write-back of L2's size (the control)."""
    l2 = _l2_bytes()
    read = _reader(4 * l2)  # four times L2's bytes: read from DRAM
    dirt = torch.empty(l2 // 2, dtype=torch.int32, device="cuda")  # twice L2's bytes: leaves all of L2 dirty
    flush = L2Flush(l2)

    def dirty_then_flush():
        dirt.fill_(3)
        flush()

    clean = _median_ms(flush, read)
    after_dirt = _median_ms(dirty_then_flush, read)
    dirty = _median_ms(lambda: dirt.fill_(3), read)
    assert after_dirt < 1.04 * clean, (clean, after_dirt)
    assert dirty > 1.08 * clean, (clean, dirty)


@pytest.mark.gpu
def test_cuda_events_time_a_matmul_steadily():
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    sources = [(a, a.clone()) for _ in range(3)]
    rotation = InputRotation(sources, seed=0)
    mm = Contender("mm", rotation, lambda args: args[0] @ args[1])
    # A GPU just woken from idle raises its clock over the first ~0.1 s of work; in an evaluation the check stage
    # comes first. Here half a second of matmuls does (the timer's steadiness is tested, not the clock's ramp).
    began = time.perf_counter()
    while time.perf_counter() - began < 0.5:
        a @ a
        torch.cuda.synchronize()
    result = time_interleaved([mm], device="cuda", l2_bytes=50 << 20, warmup_ms=25, rep_ms=100)["mm"]
    assert result.source == "gpu" and len(result.round_medians_ms) == 5
    tflops = 2 * 4096**3 / (result.ms * 1e-3) / 1e12
    assert 50 < tflops < 1500
    # Single ~0.2 ms calls after an L2 flush vary by about 5% (0.051 measured on an H200); their median by less, but
    # the first timing in a fresh process also sees the clock settle after idling (an error >= 0.01 was measured
    # here, against 0.002-0.008 per case inside evaluations).
    assert result.spread < 0.1
    assert result.error is not None and result.error < 0.05
    assert 0 <= result.sync_gap_ms < 0.5


@pytest.mark.gpu
def test_side_stream_work_shows_as_a_sync_gap():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    rotation = InputRotation([(a, a.clone())], seed=0)

    def hidden(args):
        out = torch.empty(8192, 8192, device="cuda", dtype=torch.bfloat16)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.matmul(args[0], args[1], out=out)
        return out

    honest = Contender("library", rotation, lambda args: args[0] @ args[1])
    cheat = Contender("cheat", rotation, hidden)
    result = time_interleaved([cheat, honest], device="cuda", l2_bytes=50 << 20, warmup_ms=10, rep_ms=50)
    gap = result["cheat"].sync_gap_ms - result["library"].sync_gap_ms
    assert result["cheat"].ms < 0.5 * result["library"].ms
    assert gap > 0.5 * result["library"].ms


@pytest.mark.gpu
@pytest.mark.parametrize("spin", ["hold", "one thread"])
def test_work_on_a_side_stream_cannot_hide_under_the_launch_shield(monkeypatch, spin):
    """A call that queues the product on a side stream at once and on the current stream only waits for it, under a
    1 ms shield. The shield's spin holds every SM (worker/hold.py): the product runs after the start event and is
    timed at the library's time. Under a spin of one thread (torch.cuda._sleep) it ran beside the spin, finished
    before the start event, and timed at next to nothing: the evidence that this test can fail."""
    import avo.evaluate.worker.hold as hold

    if spin == "one thread":
        monkeypatch.setattr(hold, "spin", torch.cuda._sleep)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    rotation = InputRotation([(a, a.clone())], seed=0)

    def hidden(args):
        out = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
        with torch.cuda.stream(side):
            torch.matmul(args[0], args[1], out=out)
            done = torch.cuda.Event()
            done.record()
        torch.cuda.current_stream().wait_event(done)
        return out

    honest = Contender("library", rotation, lambda args: args[0] @ args[1])
    cheat = Contender("cheat", rotation, hidden)
    timed = time_interleaved([cheat, honest], device="cuda", l2_bytes=_l2_bytes(), warmup_ms=10, rep_ms=50,
                             shield_us=1000)
    ratio = timed["cheat"].ms / timed["library"].ms
    if spin == "hold":
        assert ratio > 0.8, timed
    else:
        assert ratio < 0.3, timed


@pytest.mark.gpu
def test_launch_shield_keeps_host_launch_work_out_of_the_timed_interval():
    """A call whose host side takes 2 ms before its kernel is queued: without a shield the 2 ms are timed, with one
    longer than that they are not."""
    x = torch.randn(1 << 20, device="cuda")

    def slow_launch(args):
        time.sleep(0.002)
        return args[0] * 2

    slow = Contender("slow", lambda i: (x,), slow_launch)
    bare = time_interleaved([slow], device="cuda", l2_bytes=1 << 20, warmup_ms=0, rep_ms=10)["slow"].ms
    shielded = time_interleaved([slow], device="cuda", l2_bytes=1 << 20, warmup_ms=0, rep_ms=10,
                                shield_us=4000)["slow"].ms
    assert bare > 1.8, bare
    assert shielded < 0.3, shielded
