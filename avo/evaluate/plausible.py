"""The parent's own check of a GPU result: no case may run faster than the GPU physically can.

A case's time bounds what the kernel could have done in it: its FLOPs over the time may not exceed the GPU's
fastest tensor-core peak (fp8's, whatever the dtype: a bound, not an estimate), nor its bytes over the time the HBM
bandwidth, each with a margin for datasheet rounding and clocks. The bandwidth bound holds only where the case's
data does not fit in L2 (a smaller working set can be served from L2, faster than HBM). The worker's own figures are
not trusted: FLOPs and bytes come from the task here, in the parent, from the case's name. Interpreter timings are
wall-clock and are never checked.
"""

from __future__ import annotations

from avo.evaluate.result import EvalResult
from avo.gpus import GpuProfile

MARGIN = 1.10
"""How far past a datasheet peak a measurement may come before it is impossible rather than lucky."""


def impossible(result: EvalResult, task, gpu: GpuProfile, suite: str) -> str | None:
    """Why `result` (GPU-timed, of `suite`) is physically impossible on `gpu`, or None."""
    if result.timing_source != "gpu" or not suite:
        return None
    cases = {case.name: case for case in task.cases(suite)}
    peak_flops = max(gpu.peak_bf16_tflops, gpu.peak_fp16_tflops, gpu.peak_fp8_tflops) * 1e12
    for row in result.bench_cases():
        case = cases.get(row.case)
        if case is None or not row.ms or row.ms <= 0:
            continue
        seconds = row.ms * 1e-3
        flops, moved = task.flops(case), task.bytes(case)
        if flops / seconds > peak_flops * MARGIN:
            return (f"{row.case}: {row.ms:.4g} ms would be {flops / seconds / 1e12:.0f} TFLOPS, past the "
                    f"{gpu.name}'s peak of {peak_flops / 1e12:.0f}: the timing cannot be real")
        if moved > gpu.l2_mb * 2**20 and moved / seconds > gpu.hbm_gbps * 1e9 * MARGIN:
            return (f"{row.case}: {row.ms:.4g} ms would move {moved / seconds / 1e9:.0f} GB/s, past the "
                    f"{gpu.name}'s HBM bandwidth of {gpu.hbm_gbps:.0f} GB/s: the timing cannot be real")
    return None
