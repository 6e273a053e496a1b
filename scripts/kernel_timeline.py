"""Where a GEMM call's time goes on the device: gemm/cuda_wgmma against torch.matmul (cuBLAS), as CUPTI records each
kernel's start and end (needs a GPU).

    PYTHONPATH=$PWD python3 scripts/kernel_timeline.py --shapes 64x8192x8192,256x8192x8192 [--calls 30]

Every call runs as the evaluator times one: an L2 flush, a launch shield (a 100 µs spin), CUDA events around the
GEMM. The two alternate call by call, under torch.profiler. Printed per shape and contender, medians over the calls:
- `events`: the time between the call's CUDA events (what the evaluator reads);
- `lead`: from the shield's end to the GEMM's first kernel's start (the launch and the device's set-up of the kernel);
- `span`: from the GEMM's first kernel's start to its last one's end;
- the GEMM's kernels, by name.
`events` less `lead` and `span` is what the device spends past the kernel before the end event is stamped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.gemm_config_sweep import _shapes  # noqa: E402

SEED = ROOT / "kernels" / "gemm" / "cuda_wgmma"
SPIN = "spin"  # torch.cuda._sleep's kernel, the launch shield


def device_kernels(prof) -> list[tuple[str, float, float]]:
    """(name, start µs, end µs) of every kernel the profile saw on the device, in order of start."""
    kernels = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type().name == "CUDA" and e.name() and not e.name().startswith("Memcpy") \
                and not e.name().startswith("Memset"):
            start = e.start_ns() / 1e3
            kernels.append((e.name(), start, start + e.duration_ns() / 1e3))
    return sorted(kernels, key=lambda k: k[1])


def per_call(kernels: list, shield_count: int, gemm_kernels: int) -> list[tuple[float, float, list[str]]]:
    """(lead, span, names) of each call: the `gemm_kernels` kernels right after each shield."""
    calls = []
    for i, (name, _, shield_end) in enumerate(kernels):
        if SPIN not in name:
            continue
        mine = kernels[i + 1: i + 1 + gemm_kernels]
        if len(mine) == gemm_kernels:
            calls.append((mine[0][1] - shield_end, mine[-1][2] - mine[0][1], [k[0] for k in mine]))
    if len(calls) != shield_count:
        raise RuntimeError(f"found {len(calls)} calls' kernels for {shield_count} shields")
    return calls


def calls_of(kernels: list, index: int, contenders: int, gemm_kernels: int) -> list[tuple[float, float, list[str]]]:
    """per_call of the contender at `index` of `contenders` that alternated call by call (traced_calls): its calls
    follow every `contenders`-th shield, from its index on."""
    shields = [i for i, kernel in enumerate(kernels) if SPIN in kernel[0]][index::contenders]
    return per_call([k for s in shields for k in kernels[s:s + 1 + gemm_kernels]], len(shields), gemm_kernels)


def traced_calls(contenders: dict, calls: int, flush, shield) -> tuple[dict[str, list[float]], list]:
    """Each contender called `calls` times, alternating call by call, each call as the evaluator times one (L2
    flush, launch shield, CUDA events around it), under torch.profiler: the µs between each call's events, by
    contender, and every kernel the device ran (device_kernels)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    names = list(contenders)
    events = {name: [] for name in names}
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls * len(names)):
            name = names[i % len(names)]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush()
            shield()
            start.record()
            contenders[name]()
            end.record()
            torch.cuda.synchronize()
            events[name].append(start.elapsed_time(end) * 1e3)
    return events, device_kernels(prof)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=_shapes, required=True, help="MxNxK,...")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--seed", type=Path, default=SEED, help="the gemm/cuda_wgmma copy to load")
    args = parser.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from avo.evaluate.worker.loader import load_entry
    from avo.evaluate.worker.timing import L2Flush, LaunchShield
    from avo.gpus import resolve

    gemm = load_entry(args.seed, "gemm")
    flush, shield = L2Flush(resolve("auto", "cuda").l2_mb << 20), LaunchShield(100.0)
    print(torch.cuda.get_device_name())
    for case, m, n, k in args.shapes:
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        contenders = {"avo": lambda: gemm(a, b), "cublas": lambda: torch.matmul(a, b)}
        counts = {}
        for name, fn in contenders.items():  # warm, and count the kernels one call launches
            fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            counts[name] = len(device_kernels(prof))
        events, kernels = traced_calls(contenders, args.calls, flush, shield)
        for j, name in enumerate(contenders):
            mine = calls_of(kernels, j, len(contenders), counts[name])
            lead = statistics.median(c[0] for c in mine)
            span = statistics.median(c[1] for c in mine)
            names = ", ".join(dict.fromkeys(x[:48] for c in mine for x in c[2]))
            print(f"{case} {name:6s} events {statistics.median(events[name]):8.2f} µs  lead {lead:6.2f}  "
                  f"span {span:8.2f}  kernels: {names}", flush=True)


if __name__ == "__main__":
    main()
