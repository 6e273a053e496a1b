"""Triton's interpreter (`--device interpret`) as avo runs it: the same on a machine with GPUs as without.

- `ENV`: what a process that interprets gets in its environment from its start. Whether Triton interprets is fixed
  when it is first imported, so the variable cannot be set later; and the GPUs are hidden, so nothing in that process
  (torch's CUDA start-up, a library call, a candidate's `.cuda()`) reaches a GPU and its results and timings are
  the CPU's wherever it runs.
- `fix_scalar_index()`: Triton up to 3.6 reads a kernel's runtime scalar as a Python int (`range(0, tl.cdiv(K, B))`,
  the K loop of every GEMM) by `int()` of a one-element array, which NumPy 2.4 refuses ("only 0-dimensional arrays
  can be converted to Python scalars"). Later Triton squeezes the array first; this does the same in older ones.
  The compiled path is untouched: only the interpreter's stand-in for a tensor changes.
"""

from __future__ import annotations

import os

ENV = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}


def interpreting() -> bool:
    """Whether Triton in this process interprets (as Triton itself reads the variable)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def fix_scalar_index() -> bool:
    """Make the interpreter's tensors index as later Triton does, where this one fails to; True when applied now."""
    from triton.runtime import interpreter

    if not scalar_index_broken():
        return False
    original = interpreter._patch_lang_tensor

    def patched(tensor, *args, **kwargs):
        original(tensor, *args, **kwargs)
        # set after the interpreter's own, and undone with it where Triton restores the tensor class after a launch
        tensor.__index__ = _index

    patched.unfixed = original
    interpreter._patch_lang_tensor = patched
    return True


def scalar_index_broken() -> bool:
    """Whether this Triton's interpreter, as it stands in this process, fails on a runtime loop bound with this
    NumPy (False for an interpreter this module does not know the insides of)."""
    from triton.runtime import interpreter

    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is None or hasattr(patch, "unfixed"):
        return False
    return _int_of_one_element_fails() and "squeeze" not in _source(patch)


def _index(self) -> int:
    return int(self.handle.data.squeeze())


def _int_of_one_element_fails() -> bool:
    import numpy as np

    try:
        int(np.zeros(1, dtype=np.int32))
    except TypeError:
        return True
    return False


def _source(fn) -> str:
    import inspect

    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""
