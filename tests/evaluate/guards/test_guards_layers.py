"""The static guard on torch.nn layers kept as parameter holders, and the two policies on library ops (strict,
partial). The runtime side (an aliased call of a holder) is in test_kernelbench_users.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from avo.evaluate import guards
from avo.evaluate.guards import Rejection
from avo.evaluate.guards.static.check import scan

REPO = Path(__file__).resolve().parents[3]
SOLUTIONS = REPO / "examples" / "kernelbench" / "solutions"

HEADER = """\
import torch
import torch.nn as nn
from torch.nn import LayerNorm
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr):
    pass


class ModelNew(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.gemm = nn.Linear(a, b)
        self.norm = LayerNorm(b)
        self.blocks = nn.ModuleList([nn.Conv2d(a, b, 3)])
        self.act = nn.LeakyReLU(0.1)
        self.scale = nn.Parameter(torch.ones(b))

"""


def _folder(tmp_path: Path, forward: str) -> Path:
    folder = tmp_path / "cand"
    folder.mkdir(exist_ok=True)
    (folder / "kernel.py").write_text(HEADER + textwrap.indent(textwrap.dedent(forward), "    "))
    return folder


def test_layers_built_in_init_and_read_in_forward_pass(tmp_path):
    forward = """\
    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        eps = self.norm.eps
        slope = self.act.negative_slope
        _k[(1,)](x)
        return x * self.scale + w.sum() * 0 + eps + slope
    """
    assert scan(_folder(tmp_path, forward), "12_Gemm_Multiply_LeakyReLU") == []


FORWARD_CALLS = [
    ("y = self.gemm(x)", "calls self.gemm, a torch.nn.Linear"),
    ("y = self.gemm.forward(x)", "calls self.gemm, a torch.nn.Linear"),
    ("y = self.norm(x)", "calls self.norm, a torch.nn.LayerNorm"),
    ("y = self.blocks[0](x)", "calls self.blocks, a torch.nn.ModuleList"),
    ("y = self.act(x)", "calls self.act, a torch.nn.LeakyReLU"),
    ("y = nn.Linear(4, 4)(x)", "calls torch.nn.Linear"),
    ("y = nn.Linear.forward(self.gemm, x)", "calls torch.nn.Linear.forward"),
    ("y = torch.nn.functional.linear(x, self.gemm.weight)", "calls torch.nn.functional.linear"),
]


@pytest.mark.parametrize("line, phrase", FORWARD_CALLS, ids=[c[0] for c in FORWARD_CALLS])
def test_calling_a_layer_on_the_forward_path_is_a_library_call(tmp_path, line, phrase):
    folder = _folder(tmp_path, f"def forward(self, x):\n    {line}\n    return y\n")
    findings = scan(folder, "12_Gemm_Multiply_LeakyReLU")
    forward_line = HEADER.count("\n") + 2
    assert [(f.rule, f.line) for f in findings] == [("static.library_call", forward_line)], findings
    assert phrase in findings[0].what


def test_a_layer_class_named_as_a_type_is_not_a_call(tmp_path):
    """1_MLP's users keep nn.Linear layers in an nn.Sequential and pick them out by class in forward."""
    forward = """\
    def forward(self, x: torch.Tensor, last: nn.Linear | None = None) -> torch.Tensor:
        picked: list[nn.Linear] = [m for m in self.blocks if isinstance(m, (nn.Linear, nn.Conv2d))]
        assert issubclass(type(self.gemm), nn.Linear) and isinstance(self.norm, LayerNorm)
        _k[(1,)](x)
        return x + len(picked)
    """
    assert scan(_folder(tmp_path, forward), "1_MLP") == []


def test_a_layer_called_inside_init_of_a_helper_is_still_judged_where_it_is_called(tmp_path):
    folder = _folder(tmp_path, "def forward(self, x):\n    return x\n")
    (folder / "helper.py").write_text("import torch.nn as nn\n\n\ndef make():\n    return nn.Linear(2, 2)\n")
    findings = scan(folder, "gemm")
    assert [(f.rule, f.file, f.line) for f in findings] == [("static.library_call", "helper.py", 5)]


def test_shipped_kernelbench_solutions_pass_the_static_checks():
    folders = sorted(p for p in SOLUTIONS.iterdir() if (p / "kernel.py").is_file())
    assert len(folders) == 6
    for folder in folders:
        guards.check_static(folder, folder.name, "strict")


# -- policies -------------------------------------------------------------------------------------------------------
def test_partial_allows_torch_ops_and_layers_but_not_other_libraries(tmp_path):
    folder = _folder(tmp_path, "def forward(self, x):\n    return torch.relu(self.gemm(x) @ x)\n")
    with pytest.raises(Rejection) as info:
        guards.check_static(folder, "12_Gemm_Multiply_LeakyReLU", "strict")
    assert info.value.rule == "static.library_call"
    guards.check_static(folder, "12_Gemm_Multiply_LeakyReLU", "partial")

    cupy = _folder(tmp_path, "def forward(self, x):\n    import cupy\n    return cupy.matmul(x, x)\n")
    with pytest.raises(Rejection) as info:
        guards.check_static(cupy, "12_Gemm_Multiply_LeakyReLU", "partial")
    assert info.value.rule == "static.library_call" and "cupy.matmul" in info.value.message


def test_partial_still_rejects_fallbacks_and_forbidden_modules(tmp_path):
    fallback = _folder(tmp_path, """\
    def forward(self, x):
        try:
            _k[(1,)](x)
        except Exception:
            return self.gemm(x)
        return x
    """)
    with pytest.raises(Rejection) as info:
        guards.check_static(fallback, "gemm", "partial")
    assert info.value.rule == "static.torch_fallback"
    threads = _folder(tmp_path, "def forward(self, x):\n    import threading\n    return x\n")
    with pytest.raises(Rejection) as info:
        guards.check_static(threads, "gemm", "partial")
    assert info.value.rule == "static.forbidden_import"


@pytest.mark.parametrize("ops", ["partial", "strict"])
def test_both_policies_need_a_kernel_of_its_own(tmp_path, ops):
    folder = tmp_path / "unchanged"
    folder.mkdir()
    (folder / "kernel.py").write_text("import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                                      "    def forward(self, x):\n        return x.relu()\n")
    with pytest.raises(Rejection) as info:
        guards.check_static(folder, "gemm", ops)
    assert info.value.rule == "static.no_kernel" and "no @triton.jit function" in info.value.message
    guards.check_static(folder, "gemm", ops, kernel_required=False)  # a built-in task's: the op recorder judges it
    (folder / "k.cu").write_text("__global__ void k() {}\n")
    guards.check_static(folder, "gemm", ops)
