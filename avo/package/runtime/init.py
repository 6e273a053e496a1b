"""An evolved kernel as a torch op: README.md beside this package says how to use it; MANIFEST.json inside it says
what was measured (run, candidate, commit, per-case speedups, GPU, library and versions) and what the guard lets
through to the kernel.

    import NAME
    out = NAME.attention(q, k, v, causal)   # or NAME.gemm(a, b): the kernel where the run checked it, else the library
    with NAME.patch():                      # or route the library calls a model already makes
        model(x)
"""

from __future__ import annotations

from ._guard import MANIFEST
from ._op import *  # noqa: F403  (the task's function and custom op, the call counters, the library path)
from ._op import __all__ as _op_names
from ._patch import patch

__all__ = ["MANIFEST", "patch", *_op_names]
