"""torch.nn layers as parameter holders, for the static guard.

A ModelNew written the way KernelBench users write it keeps Model's layers (`self.gemm = nn.Linear(...)`) so that
Model's parameters copy in by name, and reads `self.gemm.weight` in its own kernel. Building a layer in `__init__` is
therefore allowed; calling it (`self.gemm(x)`, `self.gemm.forward(x)`, `self.blocks[0](x)`) anywhere else is the
library path. Calls the checker cannot see (an alias, `getattr`, a loop over `self.children()`) reach the same aten
ops, which the runtime op recorder catches.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

NOT_LAYERS = frozenset("Module Parameter ParameterList ParameterDict Buffer UninitializedParameter".split())
"""Capitalized torch.nn names that hold or organise parameters but compute nothing."""


def is_layer_class(dotted: str) -> bool:
    """`torch.nn.Linear`, `torch.nn.modules.conv.Conv2d`: a torch.nn module class that computes something."""
    parts = dotted.split(".")
    return (len(parts) >= 3 and parts[:2] == ["torch", "nn"] and "functional" not in parts
            and parts[-1][:1].isupper() and parts[-1] not in NOT_LAYERS)


def find_holders(tree: ast.Module, resolve: Callable[[ast.AST], str | None]) -> dict[str, str]:
    """`self.<name>` -> the torch.nn class built into it by any `__init__` in the file."""
    holders: dict[str, str] = {}
    for function in ast.walk(tree):
        if not (isinstance(function, ast.FunctionDef) and function.name == "__init__" and function.args.args):
            continue
        me = function.args.args[0].arg
        for node in ast.walk(function):
            if not (isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call)):
                continue
            built = resolve(node.value.func) or ""
            if not is_layer_class(built):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me:
                    holders[target.attr] = built
    return holders


def holder_called(call: ast.Call, holders: dict[str, str]) -> tuple[str, str] | None:
    """(`self.gemm`, 'torch.nn.Linear') when `call` runs a holder layer: `self.gemm(x)`, `self.gemm.forward(x)`,
    `self.gemm.__call__(x)`, `self.layers[0](x)`."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("forward", "__call__", "_call_impl"):
        func = func.value
    if isinstance(func, ast.Subscript):
        func = func.value
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in holders:
        return f"{func.value.id}.{func.attr}", holders[func.attr]
    return None
