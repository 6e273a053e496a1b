"""Compile a candidate's Triton kernels for a GPU target without a GPU, exactly as its wrapper would launch them.

The wrapper runs once on the CPU with "meta" tensors (shapes, strides and dtypes, no memory) of a bench case.
Triton's own launch path is kept — binding, specialization, constexprs, options, compilation — but the driver is
replaced by one that only names the target, and every launch compiles without running (warm-up mode). So the
kernels inspected are the ones the real call would build, with the same constexprs, num_warps and num_stages.

    python -m avo.profile.triton_capture --candidate DIR --kernel gemm --case 0 --gpu h200 --out result.json
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable
from unittest import mock

from avo.evaluate.cuda_compile import parse_ptxas_verbose
from avo.profile import sass
from avo.tasks.meta import meta_inputs


@dataclass
class Launch:
    kernel: Any
    """triton.compiler.CompiledKernel"""
    name: str
    grid: tuple | None
    constexprs: dict[str, Any]
    launches: int = 1
    notes: list[str] = field(default_factory=list)


class _CompileOnlyDriver:
    """Stands in for Triton's CUDA driver: names the target, has device 0 and stream 0, runs nothing."""

    def __init__(self, target, gpu):
        self.target = target
        props = {"max_shared_mem": gpu.smem_per_block_kb * 1024, "multiprocessor_count": gpu.sms}
        self.utils = SimpleNamespace(get_device_properties=lambda device=0: dict(props))

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


@contextlib.contextmanager
def target_driver(gpu):
    """Inside: Triton's active driver only names `gpu`'s target (compiles work without a GPU; launches cannot)."""
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    major, minor = gpu.compute_capability
    saved_driver = driver._active  # set_active/reset_active would build the real driver, which needs a GPU
    driver.set_active(_CompileOnlyDriver(GPUTarget("cuda", major * 10 + minor, 32), gpu))
    try:
        with mock.patch.object(torch.cuda, "get_device_capability", lambda device=None: (major, minor)):
            yield
    finally:
        driver._active = saved_driver


@contextlib.contextmanager
def compile_only(gpu):
    """Inside: Triton launches compile for `gpu` and are recorded instead of run; yields the list of Launch."""
    import torch
    from triton.runtime import autotuner
    from triton.runtime.jit import JITFunction

    major, minor = gpu.compute_capability
    launches: list[Launch] = []
    by_key: dict[Any, Launch] = {}
    original_run = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        saved = self.device_caches  # a real GPU's compiled kernels must not mix with this target's
        self.device_caches = defaultdict(self.create_binder)
        try:
            kernel = original_run(self, *args, grid=grid, warmup=True, **kwargs)
        finally:
            self.device_caches = saved
        key = getattr(kernel, "hash", None) or id(kernel)
        if key in by_key:
            by_key[key].launches += 1
        else:
            bound = _bound_args(self, args, kwargs)
            constexprs = {p.name: _plain(bound.get(p.name)) for p in self.params if p.is_constexpr}
            by_key[key] = Launch(kernel, kernel.metadata.name, _grid(grid, bound), constexprs)
            launches.append(by_key[key])
        return kernel

    def autotuned_run(self, *args, **kwargs):
        config = self.configs[0]  # benchmarking needs a GPU: inspect the first configuration
        before = len(launches)
        out = self.fn.run(*args, **kwargs, **config.all_kwargs())
        for launch in launches[before:]:
            launch.notes.append(f"autotuned over {len(self.configs)} configs; compiled the first: {config}")
        return out

    def device_properties(device=None):
        return SimpleNamespace(name=gpu.name, major=major, minor=minor, multi_processor_count=gpu.sms,
                               shared_memory_per_block_optin=gpu.smem_per_block_kb * 1024)

    with target_driver(gpu), mock.patch.object(JITFunction, "run", run), \
            mock.patch.object(autotuner.Autotuner, "run", autotuned_run), \
            mock.patch.object(torch.cuda, "get_device_properties", device_properties):
        yield launches


def _bound_args(jit_fn, args: tuple, kwargs: dict) -> dict:
    names = set(jit_fn.arg_names)
    try:
        bound = inspect.signature(jit_fn.fn).bind(*args, **{k: v for k, v in kwargs.items() if k in names})
        bound.apply_defaults()
        return dict(bound.arguments)
    except TypeError:
        return dict(zip(jit_fn.arg_names, args))


def _grid(grid, bound: dict) -> tuple | None:
    try:
        value = grid(bound) if callable(grid) else grid
        return tuple(int(g) for g in value) + (1,) * (3 - len(value))
    except Exception:
        return None


def _plain(value):
    value = getattr(value, "value", value)  # tl.constexpr
    return value if isinstance(value, (bool, int, float, str, type(None))) else str(value)


def capture(call: Callable[[], Any], gpu) -> tuple[list[Launch], str | None]:
    """Launches made by `call()` compiled for `gpu`, and the error the call raised, if any."""
    error = None
    with compile_only(gpu) as launches:
        try:
            call()
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc).strip()[:1500]}"
    return launches, error


def analyze(launch: Launch, gpu) -> dict:
    """Registers, spills, shared memory and instruction histograms of one compiled kernel."""
    kernel, meta = launch.kernel, launch.kernel.metadata
    arch = _sm_arch(meta.target.arch)
    with tempfile.TemporaryDirectory(prefix="avo-inspect-") as tmp:
        cubin, ptx = Path(tmp) / "kernel.cubin", Path(tmp) / "kernel.ptx"
        cubin.write_bytes(kernel.asm["cubin"])
        ptx.write_text(kernel.asm["ptx"])
        usage = sass.resource_usage(cubin)
        usage = usage.get(launch.name) or next(iter(usage.values()), {})
        sass_hist = sass.sass_histogram(sass.sass_text(cubin))
        fmad = [] if getattr(meta, "enable_fp_fusion", True) else ["--fmad=false"]
        verbose = sass.run_tool([_ptxas(meta.target.arch), "-v", "--regAllocOptLevel=2", *fmad,
                                 f"--gpu-name={arch}", str(ptx), "-o", str(Path(tmp) / "check.cubin")])
    ptxas = parse_ptxas_verbose(verbose)
    ptxas = ptxas.get(launch.name) or next(iter(ptxas.values()), {})
    registers = usage.get("REG", ptxas.get("registers"))
    threads = meta.num_warps * 32 * getattr(meta, "num_ctas", 1)
    return {
        "name": launch.name,
        "source": "triton",
        "target": arch,
        "grid": launch.grid,
        "launches": launch.launches,
        "num_warps": meta.num_warps,
        "num_stages": meta.num_stages,
        "constexprs": launch.constexprs,
        "registers": registers,
        "spills": {"store_bytes": ptxas.get("spill_store_bytes"), "load_bytes": ptxas.get("spill_load_bytes")},
        "local_bytes": usage.get("LOCAL"),
        "shared_bytes": meta.shared,
        "occupancy": sass.occupancy_estimate(registers, meta.shared, threads, gpu),
        "sass_instructions": sum(sass_hist.values()),
        "families": sass.families(sass_hist),
        "histogram": dict(sass_hist.most_common()),
        "ptx_histogram": dict(sass.ptx_histogram(kernel.asm["ptx"]).most_common()),
        "notes": launch.notes,
    }


def _sm_arch(capability: int) -> str:
    try:
        from triton.backends.nvidia.compiler import sm_arch_from_capability

        return sm_arch_from_capability(capability)
    except Exception:
        return f"sm_{capability}a"


def _ptxas(capability: int) -> str:
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(capability).path


def inspect_case(candidate: Path, task_spec: str, suite: str, index: int, gpu) -> dict:
    from avo.evaluate.worker.loader import load_entry
    from avo.tasks import load

    task = load(task_spec)
    case = task.cases(suite)[index]
    entry = load_entry(candidate, task.entry)
    inputs = meta_inputs(task, case)
    launches, error = capture(lambda: task.call(entry, inputs), gpu)
    if not launches:
        why = f" (the call raised {error})" if error else ""
        return {"ok": False, "case": case.name,
                "error": f"no Triton kernel was compiled when the entry ran on the CPU with meta tensors{why}"}
    return {"ok": True, "case": case.name, "kernels": [analyze(launch, gpu) for launch in launches],
            "note": f"the call raised after launching: {error}" if error else None}


def main(argv: list[str] | None = None) -> int:
    from avo.gpus import PROFILES

    parser = argparse.ArgumentParser(prog="python -m avo.profile.triton_capture")
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--suite", default="bench")
    parser.add_argument("--case", type=int, default=0)
    parser.add_argument("--gpu", default="h200", choices=sorted(PROFILES))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        result = inspect_case(args.candidate, args.kernel, args.suite, args.case, PROFILES[args.gpu])
    except Exception as exc:  # import failures, compile errors: the report says so, the caller decides
        result = {"ok": False, "error": getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"}
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
