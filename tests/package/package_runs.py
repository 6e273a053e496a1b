"""The shipped example runs (H200 runs, GPU-measured), imported once per test process into a folder of its own."""

from __future__ import annotations

from pathlib import Path

from avo.run.archive import import_run

EXAMPLES = Path(__file__).resolve().parents[2] / "runs" / "examples"
ATTENTION_TRITON = "attention-from-naive-h200"
ATTENTION_CUDA = "attention-from-cuda_fa3-h200"
GEMM_TRITON = "gemm-from-naive-h200"
GEMM_CUDA = "gemm-from-cuda_wgmma-h200"
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
