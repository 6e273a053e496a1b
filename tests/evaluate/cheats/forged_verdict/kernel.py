"""Cheat (beyond the list): at import, write a forged "correct, fitness 99" verdict into every file descriptor the
worker has open at offset 0 (its result file among them), then end the process before the real verdict is written.
The functions are fetched by names built at run time, so the source names neither `os.write` nor `os._exit`.
Expected: rejected, runtime.file_access (the evaluator can tell its own result file from a forged one).
"""

import json
import os

import torch

_VERDICT = json.dumps({"results": [{"status": "correct", "fitness": 99.0, "timing_source": "gpu"}]}).encode()
_write = getattr(os, "".join(reversed("etirw")))
_leave = getattr(os, "".join(reversed("tixe_")))
_seek = getattr(os, "".join(reversed("keesl")))
for _fd in range(3, 256):
    try:
        if _seek(_fd, 0, os.SEEK_CUR) == 0:
            _write(_fd, _VERDICT)
    except OSError:
        pass
_leave(0)


def gemm(a, b):
    return torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)
