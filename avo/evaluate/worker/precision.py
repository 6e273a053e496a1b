"""Precision parity for float32 outputs: which library a candidate's speedup is measured against.

A float32 problem's library runs in fp32 (TF32 off for matmuls), while a candidate's TF32 tensor-core arithmetic
passes the 1e-3 tolerance; the speedup it shows is then mostly one a user gets by setting
`torch.backends.cuda.matmul.allow_tf32 = True`. So a candidate whose error on a float32 case is past what fp32
arithmetic gives is timed against the library with TF32 allowed too (labelled `tf32`); within it, the comparison
stays the library as configured (`fp32`).

"What fp32 gives": FP32_MARGIN times the library's own error against the reference on the same inputs, and at least
FP32_FLOOR. Measured on CPU against float64 (M x K x N from 128x64x64 to 512x4096x1024 and 8x8192x256, N(0, 1)
inputs): fp32 matmul 1.4e-7..2.7e-7, in another summation order 7.7e-8..1.2e-7; inputs rounded to TF32's 10 mantissa
bits 2.7e-4..3.0e-4; bf16 2.8e-3 (past the tolerance); softmax in fp32 9.5e-8. The floor sits 37x above fp32's worst
and 27x below TF32's best. The library's own error counts for ill-conditioned problems (cancellation), and on a GPU,
where the reference is itself fp32, for libraries that use TF32 by default (cuDNN's fp32 convolutions): a candidate
as precise as the library is never labelled tf32.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FP32_FLOOR = 1e-5
FP32_MARGIN = 10.0


def past_fp32(rel_err: float | None, library_rel_err: float | None) -> bool:
    """Whether a float32 case's error is past what fp32 arithmetic gives on it."""
    if rel_err is None:
        return False
    return rel_err > max(FP32_MARGIN * (library_rel_err or 0.0), FP32_FLOOR)


def library_error(task: Any, inputs: tuple, ref: Any) -> float:
    """The library's own relative error against `ref` on `inputs`, run as it is timed."""
    from avo.tasks.base import relative_error

    return relative_error(task.library(*inputs), ref)


def needs_tf32_library(rows: list[Any]) -> bool:
    """Whether any float32 row of a candidate shows error past fp32's: its speedups are then measured against the
    library with TF32 allowed."""
    return any(r.dtype == "float32" and past_fp32(r.rel_err, r.library_rel_err) for r in rows)


@contextmanager
def tf32_allowed() -> Iterator[None]:
    """The library as a user who allows TF32 runs it: matmuls and cuDNN convolutions on TF32 tensor cores."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = True, True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def result_precision(rows: list[Any]) -> str:
    """An EvalResult's `library_precision` from its timed rows: 'tf32' if any was against the TF32 library."""
    seen = {r.library_precision for r in rows} - {None}
    return "tf32" if "tf32" in seen else "fp32" if seen else ""
