"""Honest: the kernel lives in a sibling module; a tuning table is read from a file next to this one; a config cache
keyed by shape (configs, not outputs); an optional dependency imported under try/except.
Expected: correct."""

import json
from pathlib import Path

import torch

from mm_kernel import launch

try:
    import cupy  # noqa: F401
except ImportError:
    cupy = None


_HERE = Path(__file__).resolve().parent
_TABLE = json.loads((_HERE / "tuning.json").read_text())
_configs = {}


def gemm(a, b):
    key = (a.shape[0] >= 64, b.shape[1] >= 64)
    if key not in _configs:
        _configs[key] = _TABLE["large" if all(key) else "small"]
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    launch(a, b, c, **_configs[key])
    return c
