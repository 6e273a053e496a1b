"""The shipped example runs (H200 runs, GPU-measured), imported once per test process into a folder of its own."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

from avo.run.archive import import_run

EXAMPLES = Path(__file__).resolve().parents[2] / "runs" / "examples"
ATTENTION_TRITON = "attention-from-naive-h200"
ATTENTION_CUDA = "attention-from-cuda_fa3-h200"
GEMM_TRITON = "gemm-from-naive-h200"
GEMM_CUDA = "gemm-from-cuda_wgmma-h200"
ATTENTION_LLAMA = "attention-from-llama-3.2-1b-h200"
GEMM_LLAMA = "gemm-from-llama-3.2-1b-h200"
KERNELBENCH = "kernelbench-linear-relu-h200"
_IMPORTED: dict[str, str] = {}


def example_run(runs: Path, example: str) -> str:
    """The run id of `example` imported into `runs` (once per process and folder)."""
    key = f"{runs}:{example}"
    if key not in _IMPORTED:
        run = import_run(EXAMPLES / f"{example}.avo.tar", runs)
        _IMPORTED[key] = run.id
        run.close()
    return _IMPORTED[key]


def packaged(runs: Path, example: str, out: Path, name: str) -> Path:
    """The best of `example` (imported into `runs`) packaged as `name` in `out`, a new folder; `out`."""
    from avo.package.build import build
    from avo.run.directory import Run

    run = Run.open(example_run(runs, example), runs)
    try:
        build(run, "best", out, name=name)
    finally:
        run.close()
    return out


def imported(out: Path, name: str):
    """The package `name` written in `out`, imported (`out` on sys.path only while it imports)."""
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(out))


def package_with_kernel(runs: Path, example: str, folder: Path, name: str, kernel_source: str, **guard):
    """The best of `example` packaged as `name` in `folder`, its kernel.py replaced by `kernel_source` and its
    guard's entries updated with `guard` (device="cpu" lets CPU tensors through), imported."""
    package = packaged(runs, example, folder / name, name) / name
    (package / "kernel" / "kernel.py").write_text(kernel_source)
    manifest = json.loads((package / "MANIFEST.json").read_text())
    manifest["guard"].update(guard)
    (package / "MANIFEST.json").write_text(json.dumps(manifest))
    return imported(folder / name, name)


def package_with_seed(runs: Path, example: str, folder: Path, name: str, seed: Path):
    """The best of `example` packaged as `name` in `folder`, its kernel replaced by the seed folder `seed` (its
    avo.cuda imports pointed at the package's copy, as `avo package` does), imported."""
    import shutil

    from avo.package.build import _carry_candidate

    kernel = packaged(runs, example, folder / name, name) / name / "kernel"
    shutil.rmtree(kernel)
    shutil.copytree(seed, kernel, ignore=shutil.ignore_patterns("__pycache__"))
    _carry_candidate(kernel, name)
    return imported(folder / name, name)
