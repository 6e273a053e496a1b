"""`patch()`: inside it, the library calls the op can stand in for go through the op; every other call (one with a
mask, dropout, a batched matmul, ...) goes where it always went. The op's ROUTES say which functions it replaces and
which of their calls it takes. A route asks the guard first: in eager mode a call it refuses is made as the caller
made it; while torch.compile traces, the guard's answer is traced too, so a refused call is the library's own node in
the graph and only the others are the op's."""

from __future__ import annotations

import contextlib

from . import _op


@contextlib.contextmanager
def patch():
    """Route matching library calls through the op while the block runs; restored on the way out, error or not."""
    saved = []
    try:
        for owner, attr, route in _op.ROUTES:
            original = getattr(owner, attr)
            saved.append((owner, attr, original))
            setattr(owner, attr, route(original))
        yield
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)
