"""Name resolution for the static guard: what dotted path (e.g. 'torch.matmul') an expression stands for.

One flat table per file, built from imports and simple assignments anywhere in it (a cheat gains nothing by hiding an
alias in a function). Strings are constant-folded (concatenation, f-strings, join, slicing, case changes), so
`getattr(torch, "mat" + "mul")` resolves like `torch.matmul`. Names the file never binds resolve to builtins.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

_BUILTINS = frozenset(dir(builtins))
_REROOTED = frozenset("os sys importlib gc inspect io shutil tempfile".split())
"""Standard modules other modules hold as attributes (`torch.os`, `torch.sys`, `numpy.os`): such a path resolves to
the module itself, so `torch.os.system` is judged as `os.system` and `torch.sys.modules` as `sys.modules`."""
_STR_METHODS = frozenset("lower upper strip lstrip rstrip casefold title capitalize swapcase".split())


class Resolver:
    def __init__(self, tree: ast.Module):
        self.aliases: dict[str, str] = {}
        self.constants: dict[str, str] = {}
        self.bound: set[str] = set()
        self._paths: Any = None
        self._assignments: list[tuple[str, ast.AST]] = []
        for node in ast.walk(tree):
            self._collect(node)
        for _ in range(3):  # aliases of aliases, in any order of appearance
            for name, value in self._assignments:
                dotted, text = self.resolve(value), self.fold(value)
                if dotted:
                    self.aliases[name] = dotted
                if text is not None:
                    self.constants[name] = text

    def bind_paths(self, paths: Any) -> None:
        """Let path variables (`HERE = Path(__file__).parent`) be known to the path reader."""
        self._paths = paths
        for _ in range(2):
            for name, value in self._assignments:
                place = paths.value(value)
                if place[0] != "unknown":
                    paths.variables[name] = place

    def _collect(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and node.value is not None:
                    self._assignments.append((target.id, node.value))
                elif isinstance(target, ast.Tuple | ast.List) and isinstance(node.value, ast.Tuple | ast.List):
                    for t, v in zip(target.elts, node.value.elts, strict=False):
                        if isinstance(t, ast.Name):
                            self._assignments.append((t.id, v))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            self.bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.bound.add(node.name)
        elif isinstance(node, ast.arg):
            self.bound.add(node.arg)

    # -- dotted names -------------------------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id in _BUILTINS and node.id not in self.bound:
                return f"builtins.{node.id}"
            if node.id == "__builtins__":
                return "builtins"
            return None
        if isinstance(node, ast.Attribute):
            if node.attr == "__dict__":
                return self.resolve(node.value)
            base = self.resolve(node.value)
            if base and node.attr in _REROOTED:
                return node.attr
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Subscript):
            base, key = self.resolve(node.value), self.fold(node.slice)
            if base == "sys.modules" and key:
                return key
            if base and key and (isinstance(node.value, ast.Call) or
                                 isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__"):
                return f"{base}.{key}"  # vars(torch)["mm"], torch.__dict__["mm"]
            return None
        if isinstance(node, ast.Call):
            return self._resolve_call(node)
        return None

    def _resolve_call(self, node: ast.Call) -> str | None:
        func = self.resolve(node.func)
        args = node.args
        if func == "builtins.getattr" and len(args) >= 2:
            base, name = self.resolve(args[0]), self.fold(args[1])
            return f"{base}.{name}" if base and name else None
        if func in ("builtins.__import__", "importlib.import_module", "importlib.__import__") and args:
            return self.fold(args[0])
        if func in ("builtins.vars",) and args:
            return self.resolve(args[0])
        if func == "sys.modules.get" and args:
            return self.fold(args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("__getattr__", "__getattribute__") and args:
            base, name = self.resolve(node.func.value), self.fold(args[0])
            return f"{base}.{name}" if base and name else None
        if isinstance(node.func, ast.Call) and self.resolve(node.func.func) == "operator.attrgetter" and args:
            name, base = (self.fold(node.func.args[0]) if node.func.args else None), self.resolve(args[0])
            return f"{base}.{name}" if base and name else None
        return None

    def dynamic_import(self, node: ast.Call) -> str | None:
        """A reason to reject when a module is imported by a name that is not a constant."""
        func = self.resolve(node.func)
        if func in ("builtins.__import__", "importlib.import_module", "importlib.__import__"):
            if not node.args or self.fold(node.args[0]) is None:
                return f"calls {func.split('.')[-1]} with a computed module name"
        if func == "sys.modules.get" or (isinstance(node.func, ast.Attribute) and node.func.attr == "__getattr__"
                                         and node.args and self.fold(node.args[0]) is None):
            return f"looks up {func or node.func.attr} with a computed name"
        return None

    # -- constant strings ---------------------------------------------------------------------------------------
    def fold(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.fold(node.left), self.fold(node.right)
            return left + right if left is not None and right is not None else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            text, times = self.fold(node.left), node.right
            if text is not None and isinstance(times, ast.Constant) and isinstance(times.value, int):
                return text * min(times.value, 64)
            return None
        if isinstance(node, ast.JoinedStr):
            pieces = [self.fold(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
            return "".join(pieces) if all(p is not None for p in pieces) else None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            text = self.fold(node.value)
            bounds = [self._int(b) for b in (node.slice.lower, node.slice.upper, node.slice.step)]
            if text is not None and all(b is not False for b in bounds):
                return text[slice(*bounds)]
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, base = node.func.attr, node.func.value
            if method == "join" and len(node.args) == 1 and isinstance(node.args[0], ast.List | ast.Tuple):
                sep, parts = self.fold(base), [self.fold(e) for e in node.args[0].elts]
                return sep.join(parts) if sep is not None and all(p is not None for p in parts) else None
            if method in _STR_METHODS and not node.args:
                text = self.fold(base)
                return getattr(text, method)() if text is not None else None
            if method == "replace" and len(node.args) == 2:
                text, old, new = self.fold(base), self.fold(node.args[0]), self.fold(node.args[1])
                return text.replace(old, new) if None not in (text, old, new) else None
        return None

    @staticmethod
    def _int(node: ast.AST | None) -> int | None | bool:
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            return -node.operand.value
        return False
