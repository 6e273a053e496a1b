"""SM clock and board power while gemm/cuda_wgmma and cuBLAS each run back to back (needs a GPU).

    PYTHONPATH=$PWD python3 scripts/power_probe.py --shapes 4096x8192x8192 --variant g16:GROUP_M=16

A GEMM bound by its tensor cores runs an H100 at its board power limit, where the clock, and so the time, follows
the energy each product costs: two kernels with the same products per cycle can differ in speed by their clocks
alone. Each contender (cuBLAS, the seed's plan, each `--variant` of its knobs) runs back to back for `--seconds`
while NVML is sampled; per round and contender this prints µs per call, TFLOPS, the mean SM clock and power over the
last two thirds of the run, and TFLOPS per GHz (the work done per cycle). Rounds alternate the contenders, so that
drift in the board's temperature weighs on each alike.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.gemm_config_sweep import _shapes, _variant, variant  # noqa: E402


def sustained(fn, seconds: float, handle) -> tuple[float, float, float]:
    """(µs per call, mean SM MHz, mean W) of `fn` run back to back for `seconds`."""
    import pynvml
    import torch

    fn()
    torch.cuda.synchronize()
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            samples.append((pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                            pynvml.nvmlDeviceGetPowerUsage(handle) / 1000))
            time.sleep(0.02)

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    sampler, begun, calls = threading.Thread(target=sample), time.monotonic(), 0
    start.record()
    sampler.start()
    while time.monotonic() - begun < seconds:
        for _ in range(20):
            fn()
        calls += 20
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    stop.set()
    sampler.join()
    settled = samples[len(samples) // 3:] or samples
    return (start.elapsed_time(end) / calls * 1e3, sum(c for c, _ in settled) / len(settled),
            sum(p for _, p in settled) / len(settled))


def main() -> None:
    import pynvml
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=_shapes, required=True, help="MxNxK,...")
    parser.add_argument("--variant", type=_variant, action="append", default=[], help="LABEL:KNOB=VALUE,...")
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    root = Path(tempfile.mkdtemp())
    kernels = {"plan": variant("plan", {}, root)}
    kernels |= {label: variant(label, knobs, root) for label, knobs in args.variant}
    print(torch.cuda.get_device_name(), f"power limit {pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000:.0f} W")
    for case, m, n, k in args.shapes:
        x = (torch.randn((m, k), device="cuda", dtype=torch.bfloat16),
             torch.randn((k, n), device="cuda", dtype=torch.bfloat16))
        contenders = {"cublas": lambda x=x: torch.matmul(*x)}
        contenders |= {label: (lambda g=g, x=x: g(*x)) for label, g in kernels.items()}
        for _ in range(args.rounds):
            for label, fn in contenders.items():
                us, mhz, watts = sustained(fn, args.seconds, handle)
                tflops = 2 * m * n * k / us / 1e6
                print(f"{case:18s} {label:8s} {us:9.1f} us {tflops:6.0f} TFLOPS  SM {mhz:5.0f} MHz  {watts:4.0f} W  "
                      f"{tflops / mhz * 1e3:6.1f} TFLOPS/GHz", flush=True)
        del x, contenders
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
