"""Compare ways of timing one kernel against the library on a few attention bench cases (needs a GPU).

    PYTHONPATH=$PWD python3 scripts/timing_probe.py [--cases N] [--seed-kernel triton_fa2]

For each case, the seed and the library are timed by: triton's do_bench (same inputs every call), the evaluator's
`time_interleaved` (fresh inputs per call, device-wide synchronize after each call), the same with one fixed input
set, and with no synchronize between calls. The mean SM clock and power while each method ran are printed beside it,
so a difference between methods can be traced to the clock or to the method. Also times the pieces of the bench
stage's cost (reference, library output, inputs) on the largest case.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch
from triton.testing import do_bench

from avo.evaluate.worker import timing
from avo.tasks import load
from scripts.bench_seeds import load_seed


class ClockSampler:
    def __init__(self):
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        self.samples: list[tuple[int, float]] = []
        self._stop = threading.Event()

    def __enter__(self):
        self.samples, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        n = self.nvml
        while not self._stop.is_set():
            clock = n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM)
            power = n.nvmlDeviceGetPowerUsage(self.handle) / 1000
            self.samples.append((clock, power))
            time.sleep(0.005)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def text(self) -> str:
        if not self.samples:
            return "-"
        return (f"{statistics.mean(c for c, _ in self.samples):.0f} MHz, "
                f"{statistics.mean(p for _, p in self.samples):.0f} W")


def no_sync_timing(contenders, l2_bytes, rep_calls=20, rounds=5):
    """Like time_interleaved, but calls are queued back to back (one synchronize per block)."""
    flush = timing.L2Flush(l2_bytes)
    out = {c.name: [] for c in contenders}
    counter = 0
    for c in contenders:  # warm-up
        for _ in range(3):
            c.run(c.prepare(counter))
            counter += 1
    for r in range(rounds):
        for c in (contenders if r % 2 == 0 else contenders[::-1]):
            events = []
            for _ in range(rep_calls):
                args = c.prepare(counter)
                counter += 1
                flush()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                c.run(args)
                e.record()
                events.append((s, e))
            torch.cuda.synchronize()
            out[c.name].append(statistics.median(s.elapsed_time(e) for s, e in events))
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=4)
    parser.add_argument("--seed-kernel", default="triton_fa2")
    args = parser.parse_args()
    task = load("attention")
    entry = load_seed("attention", args.seed_kernel).attention
    l2 = 60 << 20
    sampler = ClockSampler()
    cases = task.cases("bench")
    picks = [cases[i] for i in (0, 9, 22, 23)][: args.cases]
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| case | method | library ms | seed ms | ratio | clock, power |")
    print("|---|---|---:|---:|---:|---|")
    for ci, case in enumerate(picks):
        sources = [task.make_inputs(case, 100 + k, "cuda") for k in range(3)]
        fixed = sources[0]
        entry(*fixed)
        task.library(*fixed)
        torch.cuda.synchronize()

        def row(method, lib_ms, seed_ms, s):
            print(f"| {case.name} | {method} | {lib_ms:.3f} | {seed_ms:.3f} | {lib_ms / seed_ms:.3f} | {s.text()} |",
                  flush=True)

        with sampler as s:
            lib = do_bench(lambda: task.library(*fixed), warmup=25, rep=100, return_mode="median")
            mine = do_bench(lambda: entry(*fixed), warmup=25, rep=100, return_mode="median")
        row("do_bench", lib, mine, s)

        rotation = timing.InputRotation(sources, 7 + ci)
        for label, prepare in (("evaluator (rotation)", rotation), ("evaluator (fixed inputs)", lambda i: fixed)):
            contenders = [timing.Contender("seed", prepare, lambda a: entry(*a)),
                          timing.Contender("library", prepare, lambda a: task.library(*a))]
            with sampler as s:
                m = timing.time_interleaved(contenders, device="cuda", l2_bytes=l2, warmup_ms=25, rep_ms=100)
            row(label, m["library"].ms, m["seed"].ms, s)
        contenders = [timing.Contender("seed", rotation, lambda a: entry(*a)),
                      timing.Contender("library", rotation, lambda a: task.library(*a))]
        with sampler as s:
            m = no_sync_timing(contenders, l2)
        row("no per-call sync (rotation)", m["library"], m["seed"], s)
        with sampler as s:
            m = timing.time_interleaved(contenders, device="cuda", l2_bytes=l2, warmup_ms=25, rep_ms=400)
        row("evaluator rep_ms=400", m["library"].ms, m["seed"].ms, s)
        sources = fixed = rotation = contenders = None  # released before the next case
        torch.cuda.empty_cache()

    big = max(cases, key=task.flops)
    inputs = task.make_inputs(big, 1, "cuda")
    torch.cuda.synchronize()
    for label, fn in (("make_inputs", lambda: task.make_inputs(big, 2, "cuda")),
                      ("reference (fp32, chunked)", lambda: task.reference(*inputs)),
                      ("library output", lambda: task.library(*inputs)),
                      ("seed output", lambda: entry(*inputs))):
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        print(f"- {big.name}: {label} {time.perf_counter() - t0:.3f} s")
    inputs = None
    totals = {"make_inputs x3": 0.0, "reference": 0.0, "library": 0.0}
    for case in cases:
        t0 = time.perf_counter()
        sets = [task.make_inputs(case, 3 + k, "cuda") for k in range(3)]
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        task.reference(*sets[0])
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        task.library(*sets[0])
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        totals["make_inputs x3"] += t1 - t0
        totals["reference"] += t2 - t1
        totals["library"] += t3 - t2
        del sets
    print("- whole bench suite, one pass each: " + ", ".join(f"{k} {v:.2f} s" for k, v in totals.items()))


if __name__ == "__main__":
    main()
