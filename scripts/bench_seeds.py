"""Check the shipped seed kernels and time them against the library on the bench suites (needs a GPU).

    PYTHONPATH=$PWD python3 scripts/bench_seeds.py [--task attention|gemm] [--sweep]

Each seed is first checked against the task's reference on a few check cases and on one bench case, and against
the library's output on every bench case. Times are triton.testing.do_bench medians (L2 flushed between
repetitions), library and seeds timed one after another on the same inputs. `--sweep` also times a few tile
configurations of the tuned seeds on a subset of the bench cases.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path

import torch
import triton
from triton.testing import do_bench

from avo.tasks import load, relative_error

ROOT = Path(__file__).resolve().parents[1]
SEEDS = {"gemm": ("triton_tiled", "triton_naive"), "attention": ("triton_fa2", "triton_naive")}
SWEEPS = {
    ("gemm", "triton_tiled"): [
        dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_WARPS=8, NUM_STAGES=3),
        dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_WARPS=8, NUM_STAGES=4),
        dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_WARPS=8, NUM_STAGES=4),
        dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_WARPS=4, NUM_STAGES=4),
        dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_WARPS=8, NUM_STAGES=3),
        dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16, NUM_WARPS=8, NUM_STAGES=3),
    ],
    ("attention", "triton_fa2"): [
        dict(BLOCK_M=128, BLOCK_N=64, NUM_WARPS=8, NUM_STAGES=3),
        dict(BLOCK_M=128, BLOCK_N=64, NUM_WARPS=8, NUM_STAGES=2),
        dict(BLOCK_M=128, BLOCK_N=64, NUM_WARPS=8, NUM_STAGES=4),
        dict(BLOCK_M=128, BLOCK_N=128, NUM_WARPS=8, NUM_STAGES=2),
        dict(BLOCK_M=128, BLOCK_N=128, NUM_WARPS=8, NUM_STAGES=3),
    ],
}


def load_seed(task_name: str, seed: str):
    path = ROOT / "kernels" / task_name / seed / "kernel.py"
    spec = importlib.util.spec_from_file_location(f"seed_{task_name}_{seed}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def geomean(values):
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else 0.0


def time_ms(fn) -> float:
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def check_cases(task):
    """The check cases in the bench dtype and head size: few extra compilations (tests/ cover the whole suite)."""
    cases = task.cases("check")
    if task.name == "attention":
        return [c for c in cases if c.dtype == "bfloat16" and c.params["D"] == 128]
    return [c for c in cases if c.dtype == "bfloat16"]


def run_checks(task, modules) -> bool:
    ok = True
    print(f"\n## {task.name}: correctness (relative error vs the float32 reference)\n")
    print("| case | tolerance | library | " + " | ".join(modules) + " | library path |")
    print("|---|---|---|" + "---|" * len(modules) + "---|")
    cases = check_cases(task) + [min(task.cases("bench"), key=task.flops)]
    for case in cases:
        inputs = task.make_inputs(case, 1, "cuda")
        ref = task.reference(*inputs)
        tol = task.tolerance(case.dtype)
        errs = [relative_error(task.library(*inputs), ref)]
        errs += [relative_error(task.call(getattr(m, task.entry), inputs), ref) for m in modules.values()]
        ok &= all(e <= tol for e in errs)
        cells = " | ".join(f"{e:.2e}{'' if e <= tol else ' FAIL'}" for e in errs)
        print(f"| {case.name} | {tol:g} | {cells} | {task.library_name()} |", flush=True)
        del inputs, ref
    return ok


def run_bench(task, modules) -> tuple[dict[str, list[float]], bool]:
    names = list(modules)
    print(f"\n## {task.name}: bench suite (TFLOPS, do_bench median; ratio = library time / seed time)\n")
    print("| case | library | " + " | ".join(f"{n} | ratio" for n in names) + " |")
    print("|---|---|" + "---|---|" * len(names))
    ratios: dict[str, list[float]] = {n: [] for n in names}
    ok = True
    for case in task.cases("bench"):
        inputs = task.make_inputs(case, 0, "cuda")
        lib_out = task.library(*inputs)
        lib_ms = time_ms(lambda: task.library(*inputs))
        flops = task.flops(case)
        cells = []
        for name, module in modules.items():
            entry = getattr(module, task.entry)
            err = relative_error(task.call(entry, inputs), lib_out)
            bad = err > task.tolerance(case.dtype)
            ok &= not bad
            ms = time_ms(lambda: task.call(entry, inputs))
            ratios[name].append(lib_ms / ms)
            cells.append(f"{flops / ms / 1e9:.0f}{' WRONG' if bad else ''} | {lib_ms / ms:.2f}")
        print(f"| {case.name} | {flops / lib_ms / 1e9:.0f} | " + " | ".join(cells) + " |", flush=True)
        inputs = lib_out = None  # released before the next case
        torch.cuda.empty_cache()
    print("\ngeomean ratio to " + task.library_name() + ": "
          + ", ".join(f"{n} {geomean(r):.3f}x" for n, r in ratios.items()))
    return ratios, ok


def run_sweep(task, seed: str, module, configs) -> None:
    cases = task.cases("bench")
    if task.name == "attention":
        cases = [c for c in cases if c.params["Hq"] == 32 and c.params["Hkv"] == 8 and c.params["S"] in (4096, 16384)]
    defaults = {k: getattr(module, k) for k in configs[0]}
    print(f"\n## sweep {task.name}/{seed} on {', '.join(c.name for c in cases)}\n")
    lib_ms = {}
    for config in configs:
        for key, value in config.items():
            setattr(module, key, value)
        ratios, tflops = [], []
        try:
            for case in cases:
                inputs = task.make_inputs(case, 0, "cuda")
                if case.name not in lib_ms:
                    lib_ms[case.name] = time_ms(lambda: task.library(*inputs))
                entry = getattr(module, task.entry)
                out = task.call(entry, inputs)
                if relative_error(out, task.library(*inputs)) > task.tolerance(case.dtype):
                    raise RuntimeError(f"wrong result on {case.name}")
                ms = time_ms(lambda: task.call(entry, inputs))
                ratios.append(lib_ms[case.name] / ms)
                tflops.append(f"{task.flops(case) / ms / 1e9:.0f}")
                inputs = out = None
            line = f"{geomean(ratios):.3f}x  (TFLOPS {' '.join(tflops)})"
        except Exception as exc:  # a config that does not fit (shared memory) is reported, not fatal
            line = f"failed: {str(exc).splitlines()[0][:120]}"
        print(f"- {config}: {line}", flush=True)
    for key, value in defaults.items():
        setattr(module, key, value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(SEEDS), action="append")
    parser.add_argument("--sweep", action="store_true", help="also time a few tile configurations of the tuned seeds")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_seeds.py needs an NVIDIA GPU (torch sees none)", file=sys.stderr)
        return 2
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}")
    all_ok = True
    summary = []
    for task_name in args.task or ["gemm", "attention"]:
        task = load(task_name)
        modules = {seed: load_seed(task_name, seed) for seed in SEEDS[task_name]}
        all_ok &= run_checks(task, modules)
        ratios, ok = run_bench(task, modules)
        all_ok &= ok
        summary += [f"{task_name}/{n}: {geomean(r):.3f}x {task.library_name()}" for n, r in ratios.items()]
        if args.sweep:
            for seed, module in modules.items():
                if (task_name, seed) in SWEEPS:
                    run_sweep(task, seed, module, SWEEPS[task_name, seed])
    print("\n## summary (geomean of per-case ratios)\n")
    print("\n".join(f"- {line}" for line in summary))
    print("all checks passed" if all_ok else "SOME CHECKS FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
