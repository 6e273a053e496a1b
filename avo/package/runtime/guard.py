"""The guard in front of the kernel: an input the kernel was not checked on goes to the library instead.

MANIFEST.json's "guard" section says what the run's check and bench cases covered: the device (and which GPU), the
dtypes, the layout, and per shape dimension a range or a set of values. `refusal` names the first thing an input
falls outside of, or returns None when every part of it was covered.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch

MANIFEST = json.loads(Path(__file__).with_name("MANIFEST.json").read_text())
COVERED = MANIFEST["guard"]


@functools.lru_cache(maxsize=None)
def _device_name(index: int) -> str:
    return torch.cuda.get_device_name(index)


def wants_grad(*tensors: torch.Tensor) -> bool:
    """No backward was evolved: a call that autograd will differentiate stays on the library."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def refusal(tensors: tuple[torch.Tensor, ...], dims: dict) -> str | None:
    """Why these inputs must not reach the kernel, or None when the run's cases covered them."""
    device = tensors[0].device
    if device.type != COVERED["device"] or any(t.device != device for t in tensors):
        return f"device {device.type}"
    names = COVERED["device_names"]
    if names and _device_name(device.index or 0) not in names:
        return f"gpu {_device_name(device.index or 0)}"
    dtype = str(tensors[0].dtype).removeprefix("torch.")
    if dtype not in COVERED["dtypes"] or any(t.dtype != tensors[0].dtype for t in tensors):
        return f"dtype {dtype}"
    if COVERED["contiguous"] and not all(t.is_contiguous() for t in tensors):
        return "layout (not contiguous)"
    for dim, (low, high) in COVERED["ranges"].items():
        if not low <= dims[dim] <= high:
            return f"{dim}={dims[dim]} outside {low}..{high}"
    for dim, values in COVERED["values"].items():
        if dims[dim] not in values:
            return f"{dim}={dims[dim]} not among {values}"
    return None
