"""ReLU, as a KernelBench problem whose set-up builds a C module through Triton's build cache, as Triton builds its
driver stub: the trusted build a sandboxed worker should find done. In a sandboxed worker (its own
TRITON_CACHE_DIR) it first notes the files its cache held, in `cache-seen` in the worker's temp folder."""

import os
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
from triton.runtime.build import compile_module_from_src

SOURCE = r"""
#include <Python.h>
static struct PyModuleDef probe = {PyModuleDef_HEAD_INIT, "avo_trusted_probe", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_avo_trusted_probe(void) { return PyModule_Create(&probe); }
"""

if os.environ.get("TRITON_CACHE_DIR"):
    seen = Path(tempfile.gettempdir()) / "cache-seen"
    if not seen.exists():
        held = sorted(p.name for p in Path(os.environ["TRITON_CACHE_DIR"]).rglob("*") if p.is_file())
        seen.write_text("".join(f"{name}\n" for name in held))
    compile_module_from_src(SOURCE, "avo_trusted_probe")


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
