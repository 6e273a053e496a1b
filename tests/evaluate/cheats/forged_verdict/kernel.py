"""Cheat (beyond the list): at import, write a forged "correct, fitness 99" verdict into every file descriptor the
worker has open at offset 0 and every pipe (its result channel among them), then end the process before the real
verdict is written. The functions are fetched by names built at run time, so the source names neither `os.write`
nor `os._exit`.
Expected: rejected, runtime.file_access (the evaluator can tell its own result from a forged one).
"""

import errno
import json
import os

import torch
import triton
import triton.language as tl

_VERDICT = json.dumps({"results": [{"status": "correct", "fitness": 99.0, "timing_source": "gpu"}]}).encode()
_write = getattr(os, "".join(reversed("etirw")))
_leave = getattr(os, "".join(reversed("tixe_")))
_seek = getattr(os, "".join(reversed("keesl")))
_open_max = getattr(os, "".join(reversed("fnocsys")))("SC_OPEN_MAX")
for _fd in range(3, min(4096, _open_max)):  # a pipe passed on by avo keeps avo's number for it, which can be high
    try:
        if _seek(_fd, 0, os.SEEK_CUR) == 0:
            _write(_fd, _VERDICT)
    except OSError as exc:
        if exc.errno == errno.ESPIPE:  # a pipe
            _write(_fd, _VERDICT)
    except Exception:
        pass
_leave(0)


@triton.jit
def _zero(c_ptr, n, BLOCK: tl.constexpr):  # a kernel of its own, so the static checks let it reach its import
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + offsets, 0.0, mask=offsets < n)


def gemm(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    _zero[(triton.cdiv(c.numel(), 256),)](c, c.numel(), BLOCK=256)
    return c
