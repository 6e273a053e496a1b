"""Run by test_installed.py with a virtualenv's python in isolated mode (-I): imports the installed packages with
avo's agent packages made unimportable, exercises them on CPU tensors, and prints what it saw as one JSON line.

Usage: probe_installed.py ATTENTION_PACKAGE GEMM_PACKAGE
       probe_installed.py --kernel FOLDER PACKAGE ENTRY   (import the package from FOLDER and its kernel's ENTRY)
"""

from __future__ import annotations

import importlib
import json
import sys

BLOCKED = {"avo", "anthropic", "openai", "git", "typer", "rich"}
attempts: list[str] = []


class Unimportable:
    """First on sys.meta_path: any import of a blocked package is recorded and fails."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            attempts.append(name)
            raise ImportError(f"{name} is not importable here")
        return None


sys.meta_path.insert(0, Unimportable())

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def attention_probe(pkg) -> dict:
    q, k, v = torch.randn(1, 4, 17, 64), torch.randn(1, 2, 17, 64), torch.randn(1, 2, 17, 64)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    seen = {"equal": torch.equal(pkg.attention(q, k, v, True), expected), "calls": dict(pkg.calls),
            "fallbacks": dict(pkg.fallbacks)}
    compiled = torch.compile(lambda q, k, v: pkg.attention(q, k, v, True) + 1, fullgraph=True, backend="aot_eager")
    seen["compiled_equal"] = torch.equal(compiled(q, k, v), expected + 1)
    before = pkg.calls["op"]
    mask = torch.ones(17, 17, dtype=torch.bool).tril()
    with pkg.patch():
        routed = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, enable_gqa=True)
    seen["patched_routed"] = pkg.calls["op"] - before
    seen["patched_equal"] = torch.equal(routed, expected)
    seen["restored"] = F.scaled_dot_product_attention is pkg._op._SDPA
    seen["kernel_imports"] = callable(pkg._loader.entry("attention"))
    return seen


def gemm_probe(pkg) -> dict:
    a, b = torch.randn(33, 40, dtype=torch.bfloat16), torch.randn(40, 24, dtype=torch.bfloat16)
    seen = {"equal": torch.equal(pkg.gemm(a, b), torch.matmul(a, b)), "calls": dict(pkg.calls)}
    compiled = torch.compile(lambda a, b: pkg.gemm(a, b) * 2, fullgraph=True, backend="aot_eager")
    seen["compiled_equal"] = torch.equal(compiled(a, b), torch.matmul(a, b) * 2)
    linear = torch.nn.Linear(40, 24, dtype=torch.bfloat16)
    batched = torch.randn(2, 33, 40, dtype=torch.bfloat16)
    before = pkg.calls["op"]
    with torch.no_grad(), pkg.patch():
        torch.matmul(a, b)
        linear(a)
        torch.matmul(batched, b)  # 3-D: not the op's
    with pkg.patch():
        linear(a)  # autograd records it: the library's, not the op's
    seen["patched_routed"] = pkg.calls["op"] - before
    seen["restored"] = torch.matmul is pkg._op._MATMUL
    seen["kernel_imports"] = callable(pkg._loader.entry("gemm"))
    return seen


def kernel_probe(folder: str, name: str, entry: str) -> dict:
    sys.path.insert(0, folder)
    function = importlib.import_module(name)._loader.entry(entry)
    return {"kernel_module": function.__module__, "entry": function.__name__, "blocked_attempts": list(attempts)}


def main() -> None:
    if sys.argv[1] == "--kernel":
        print(json.dumps(kernel_probe(*sys.argv[2:5])))
        return
    attention, gemm = (importlib.import_module(name) for name in sys.argv[1:3])
    seen = {"files": [attention.__file__, gemm.__file__], "attention": attention_probe(attention),
            "gemm": gemm_probe(gemm), "blocked_attempts": list(attempts)}
    try:
        import avo  # noqa: F401
        seen["avo_importable"] = True
    except ImportError:
        seen["avo_importable"] = False
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
