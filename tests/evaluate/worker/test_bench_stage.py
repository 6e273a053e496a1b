"""The bench stage's notes on a case's timing (evaluate/worker/bench.py), on measurements made up for the purpose."""

from __future__ import annotations

from types import SimpleNamespace

from avo.evaluate.worker.bench import _note_host_bound
from avo.evaluate.worker.timing import Measurement


def measured(ms: float, host_us: float, source: str = "gpu") -> Measurement:
    if source != "gpu":  # as timing._time_wall makes it: no launch work clocked, no shield
        return Measurement(source=source, round_medians_ms=[ms])
    return Measurement(source=source, round_medians_ms=[ms], host_us=host_us, shield_us=1.5 * host_us)


def test_a_wrapper_whose_host_time_outlasts_its_kernel_gets_a_note():
    cand = SimpleNamespace(result=SimpleNamespace(notes=[]))
    case = SimpleNamespace(name="4096x4096x4096")
    _note_host_bound(cand, case, measured(0.2, 150))  # 150 µs of host work for a 200 µs kernel: fine
    _note_host_bound(cand, case, measured(0.2, 300, source="interpreter"))  # no GPU timing: no shield
    assert cand.result.notes == []
    _note_host_bound(cand, case, measured(0.2, 300))
    assert len(cand.result.notes) == 1
    assert "4096x4096x4096" in cand.result.notes[0] and "300 µs" in cand.result.notes[0]
    assert "200 µs" in cand.result.notes[0]


def test_a_cases_times_keep_the_host_time_of_the_candidate_and_of_the_library():
    from avo.evaluate.result import CaseResult
    from avo.evaluate.worker.bench import _record_times

    row = CaseResult(case="1024x2048x8192", suite="bench")
    _record_times(row, measured(0.05, 81.7), measured(0.052, 28.1), flops=2.0 * 1024 * 2048 * 8192)
    assert (row.host_us, row.library_host_us, row.launch_shield_us) == (81.7, 28.1, 1.5 * 81.7)
    assert abs(row.speedup - 1.04) < 1e-9
    off_gpu = CaseResult(case="tiny", suite="tiny")
    _record_times(off_gpu, measured(2.0, 0, "interpreter"), measured(2.2, 0, "interpreter"), flops=1.0)
    assert off_gpu.host_us is None and off_gpu.library_host_us is None
