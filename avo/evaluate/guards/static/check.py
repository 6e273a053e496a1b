"""Static guard: read every source file of a candidate before it is imported and reject forbidden constructs.

Python files are read as ASTs. Every name is resolved to the dotted path it stands for, through imports, aliases
(`from torch import matmul as f`, `mm = torch.mm`), `getattr` with constant (or constant-folded) names, `__import__`,
`importlib.import_module` and `sys.modules[...]`; the dotted path, not the spelling, is judged. CUDA/C++ sources are
tokenized (comments and strings dropped) and searched for host-side calls that would do the same cheats natively
(cuda_sources.py). torch.nn layers built in `__init__` are parameter holders (layers.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

from avo.evaluate.guards.static import layers
from avo.evaluate.guards.static import names, unseen
from avo.evaluate.guards.rules import Rejection, waived
from avo.evaluate.guards.static.cuda_sources import scan_c
from avo.evaluate.guards.static.finding import Finding
from avo.evaluate.guards.static.paths import PathReader
from avo.evaluate.guards.static.resolve import Resolver

C_SUFFIXES = (".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".hxx")
# Code that would run without being read: native extension modules, bytecode, path hooks, importable archives.
_OPAQUE_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".pyc", ".pyo", ".pth", ".egg", ".whl", ".zip", ".pkl",
                    ".pickle")
_SKIP_DIRS = ("__pycache__", ".git")
_OPENERS = {  # function -> indices of its path arguments
    "builtins.open": (0,), "io.open": (0,), "os.open": (0,), "codecs.open": (0,), "glob.glob": (0,),
    "glob.iglob": (0,), "os.listdir": (0,), "os.scandir": (0,), "os.walk": (0,), "os.chdir": (0,),
    "os.remove": (0,), "os.unlink": (0,), "os.mkdir": (0,), "os.makedirs": (0,), "os.rmdir": (0,),
    "os.removedirs": (0,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
    "os.rename": (0, 1), "os.replace": (0, 1), "os.link": (0, 1), "os.symlink": (0, 1), "numpy.save": (0,),
    "numpy.savez": (0,), "numpy.fromfile": (0,), "numpy.loadtxt": (0,), "numpy.savetxt": (0,),
    "numpy.genfromtxt": (0,), "numpy.memmap": (0,), "torch.save": (1,), "cupy.RawModule": (),
}
_PATH_ONLY_METHODS = frozenset(
    "read_text read_bytes write_text write_bytes touch unlink symlink_to hardlink_to iterdir rglob mkdir rmdir".split()
)
_PATH_METHODS = _PATH_ONLY_METHODS | frozenset("open rename replace chmod glob".split())
# Module names that, as an attribute of anything (`queue.threading`, `logging.threading`), reach the module itself.
_SHADOWED_MODULE_ATTRS = frozenset(
    "subprocess socket ctypes cffi threading _thread multiprocessing concurrent asyncio pickle marshal builtins "
    "_posixsubprocess posix".split()
)


def check_static(candidate_dir: Path, task_name: str, ops: str = "strict", kernel_required: bool = True) -> None:
    """Raise Rejection for the first finding the `ops` policy does not waive (kernel.py first, then the other files
    by name; by line within one); with `kernel_required`, defining no kernel is a finding."""
    findings, kernels = _scan_all(Path(candidate_dir), task_name)
    if not kernels and kernel_required:
        findings.append(Finding("static.no_kernel", "kernel.py", 0, "defines no kernel of its own (no @triton.jit "
                                "function, no CUDA source): write at least the part it replaces as a kernel"))
    findings = [f for f in findings if not waived(ops, f.check)]
    if findings:
        first = findings[0]
        more = "; ".join(f.text() for f in findings[1:3])
        extra = f" (also: {more}{' …' if len(findings) > 3 else ''})" if more else ""
        raise Rejection(first.rule, f"{first.rule}: {first.text()}{extra}")


def scan(candidate_dir: Path, task_name: str) -> list[Finding]:
    return _scan_all(Path(candidate_dir), task_name)[0]


def _scan_all(root: Path, task_name: str) -> tuple[list[Finding], int]:
    """Every finding in the candidate's files, and how many kernels (Triton functions, CUDA sources) they define."""
    files = sorted(
        (p for p in root.rglob("*") if p.is_file() and not any(part in _SKIP_DIRS for part in p.parts)),
        key=lambda p: (p.name != "kernel.py", str(p.relative_to(root))),
    )
    findings: list[Finding] = []
    kernels = 0
    for path in files:
        rel = str(path.relative_to(root))
        if path.suffix == ".py":
            found, jitted = _scan_python(path, rel, len(path.relative_to(root).parts) - 1, task_name)
            findings += found
            kernels += jitted
        elif path.suffix in C_SUFFIXES:
            findings += scan_c(path, rel)
            kernels += 1
        elif path.suffix in _OPAQUE_SUFFIXES or ".so." in path.name:
            findings.append(Finding("static.forbidden_import", rel, 0, "is a compiled module, bytecode or archive: "
                                    "a candidate ships sources only (.py, .cu and headers)"))
    return findings, kernels


def _scan_python(path: Path, rel: str, depth: int, task_name: str) -> tuple[list[Finding], int]:
    """The file's findings, and how many Triton kernels it defines."""
    try:
        tree = ast.parse(path.read_text(errors="replace"), filename=rel)
    except SyntaxError:
        return [], 1  # the loader reports it as a compile error, with the compiler's own message
    checker = _PythonChecker(tree, rel, depth, task_name)
    checker.visit(tree)
    unique: dict[tuple[int, str], Finding] = {}
    for finding in checker.findings:  # the first word on a line is the most precise one (visit order)
        unique.setdefault((finding.line, finding.rule), finding)
    return sorted(unique.values(), key=lambda f: f.line), checker.kernels


class _PythonChecker(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, rel: str, depth: int, task_name: str):
        self.rel = rel
        self.library = names.LIBRARY_NAMES.get(task_name, names.LIBRARY_NAMES["gemm"])
        self.methods = self.library & names.TENSOR_METHODS
        self.whole_modules = names.WHOLE_MODULES.get(task_name, ())
        self.resolver = Resolver(tree)
        self.paths = PathReader(self.resolver.resolve, self.resolver.fold, depth)
        self.resolver.bind_paths(self.paths)
        self.findings: list[Finding] = []
        self.in_jit = 0
        self.in_handler = 0
        self.functions: list[str] = []
        self.kernels = 0
        self.holders = layers.find_holders(tree, self.resolver.resolve)
        self.parents = unseen.parents(tree)
        self.built: set[int] = set()
        """Nodes that build a torch.nn layer inside an `__init__` (a parameter holder), name a layer class as a type
        (`isinstance(m, nn.Linear)`, an annotation), or build a NumPy array of constants: not library calls."""

    def _add(self, rule: str, node: ast.AST, what: str, kind: str = "") -> None:
        if self.in_handler and rule == "static.library_call":
            rule, what = "static.torch_fallback", f"{what} in an except handler (a fallback to the library)"
        self.findings.append(Finding(rule, self.rel, getattr(node, "lineno", 0), what, kind))

    def _in_init(self) -> bool:
        return bool(self.functions) and self.functions[-1] == "__init__"

    # -- dotted names -------------------------------------------------------------------------------------------
    def _judge(self, dotted: str, node: ast.AST, verb: str = "uses") -> None:
        parts = dotted.split(".")
        prefixes = [".".join(parts[: i + 1]) for i in range(len(parts))]
        if dotted in names.SANCTIONED or id(node) in self.built:
            return
        torch = "torch" if parts[0] in ("torch", "operator") else ""
        if any(p in names.RUNTIME_COMPILE for p in prefixes):
            self._add("static.runtime_compile", node, f"{verb} {dotted} (compiles code at run time; only Triton and "
                                                       "CuPy RawModule/RawKernel are allowed)")
        elif any(p in names.FORBIDDEN_FUNCTIONS for p in prefixes):
            self._add("static.forbidden_import", node, f"{verb} {dotted} (not allowed in a kernel)")
        elif parts[0] != "builtins" and any(p in names.FORBIDDEN_MODULES for p in prefixes):
            self._add("static.forbidden_import", node, f"{verb} {dotted} (module not allowed in a kernel)")
        elif any(p in _SHADOWED_MODULE_ATTRS for p in parts[1:]):
            self._add("static.forbidden_import", node, f"{verb} {dotted} (reaches a module not allowed in a kernel)")
        elif any(p in names.LIBRARY_PACKAGES for p in prefixes) or any(p in self.whole_modules for p in prefixes):
            self._add("static.library_call", node, f"{verb} {dotted} (the task's library path)", torch)
        elif parts[0] in names.LIBRARY_ROOTS and any(p in self.library for p in parts[1:]):
            self._add("static.library_call", node, f"{verb} {dotted} (the task's library path)", torch)
        elif any(p in names.ESCAPE_ATTRIBUTES for p in parts[1:]):
            self._add("static.forbidden_import", node, f"{verb} {dotted} (introspection that escapes name checks)")
        elif self.in_handler and parts[0] == "torch" and not _harmless_torch(dotted):
            self._add("static.torch_fallback", node, f"{verb} {dotted} in an except handler (a fallback to torch)")
        elif (why := unseen.refusal(dotted)) is not None:
            self._add("static.library_call", node, f"{verb} {dotted} ({why})")

    def _judge_value(self, dotted: str, node: ast.Name | ast.Attribute) -> None:
        """A module of a library the op recorder cannot see, handed on as a value (unseen.passed_on)."""
        if unseen.module_like(dotted) and unseen.passed_on(node, self.parents.get(id(node)), self.resolver.resolve,
                                                           self.resolver.fold):
            self._add("static.library_call", node, f"passes {dotted} on as a value (what is looked up in it there is "
                      "out of the guard's sight, and the run-time op recorder cannot see this library's work)")

    def _judge_method(self, attr: str, node: ast.AST) -> None:
        """`x.attr` where x is not a known module: a tensor method, or a way out of the checker."""
        if attr in names.ESCAPE_ATTRIBUTES:
            self._add("static.forbidden_import", node, f"uses .{attr} (introspection that escapes name checks)")
        elif attr in _SHADOWED_MODULE_ATTRS:
            self._add("static.forbidden_import", node, f"reaches the {attr} module through another module")
        elif attr in self.methods and not self.in_jit:
            self._add("static.library_call", node, f"calls .{attr}() on a tensor (the task's library path)", "torch")
        elif (why := unseen.method_refusal(attr)) is not None and not self.in_jit:
            self._add("static.library_call", node, f"calls .{attr}() ({why})")

    # -- visitors -----------------------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._judge(alias.name, node, "imports")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            return
        module = node.module or ""
        self._judge(module, node, "imports")
        for alias in node.names:
            if not layers.is_layer_class(f"{module}.{alias.name}"):  # a layer class is judged where it is used
                self._judge(f"{module}.{alias.name}", node, "imports")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in names.ESCAPE_ATTRIBUTES:
            self._add("static.forbidden_import", node, f"uses {node.id} (introspection that escapes name checks)")
        if isinstance(node.ctx, ast.Load):
            dotted = self.resolver.resolve(node)
            if dotted and "." in dotted:
                self._judge(dotted, node)
            if dotted:
                self._judge_value(dotted, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self.resolver.resolve(node)
        if dotted:
            self._judge(dotted, node)
            self._judge_value(dotted, node)
            if not isinstance(node.value, ast.Name | ast.Attribute):
                self.visit(node.value)
            return
        self._judge_method(node.attr, node)
        self.visit(node.value)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        dotted = self.resolver.resolve(node)
        if dotted:
            self._judge(dotted, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = self.resolver.resolve(node.func)
        dynamic = self.resolver.dynamic_import(node)
        if dynamic:
            self._add("static.forbidden_import", node, dynamic)
        dotted = self.resolver.resolve(node)
        if func and layers.is_layer_class(func) and self._in_init():
            self.built |= {id(node), id(node.func)}
        if unseen.constant_array(func, node):
            self.built |= {id(node), id(node.func)}  # an array of constants, no tensor's data in it
        if func in ("builtins.isinstance", "builtins.issubclass") and len(node.args) == 2:
            self._as_type(node.args[1])
        held = layers.holder_called(node, self.holders)
        if held and not self._in_init():
            self._add("static.library_call", node, f"calls {held[0]}, a {held[1]} (the task's library path): "
                      "keep the layer to hold its parameters and compute with them in your own kernel", "torch")
        if func and "." in func:
            self._judge(func, node, "calls")
        if dotted and func in ("builtins.getattr", "operator.attrgetter"):
            self._judge(dotted, node, "reaches")
        elif func == "builtins.getattr" and len(node.args) >= 2:
            name = self.resolver.fold(node.args[1])
            if name:
                self._judge_method(name, node)
        elif dotted:
            self._judge(dotted, node, "imports")
        if func in _OPENERS:
            self._check_paths(node, func, [node.args[i] for i in _OPENERS[func] if i < len(node.args)])
        elif func and func.startswith("shutil."):
            self._check_paths(node, func, node.args[:2])
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _PATH_METHODS:
            self._check_path_method(node)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_jit:
            self._add("static.library_call", node, "uses the @ operator on tensors (the task's library path)",
                      "torch")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_jit:
            self._add("static.library_call", node, "uses the @= operator on tensors (the task's library path)",
                      "torch")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._as_type(node.annotation)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        a = node.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None and arg.annotation is not None:
                self._as_type(arg.annotation)
        if node.returns is not None:
            self._as_type(node.returns)
        jit = any(self._is_jit(d) for d in node.decorator_list)
        self.in_jit += jit
        self.kernels += jit
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()
        self.in_jit -= jit

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Try(self, node: ast.Try) -> None:
        for stmt in (*node.body, *node.orelse, *node.finalbody):
            self.visit(stmt)
        for handler in node.handlers:
            if handler.type is not None:
                self.visit(handler.type)
            self.in_handler += 1
            for stmt in handler.body:
                self.visit(stmt)
            self.in_handler -= 1

    visit_TryStar = visit_Try

    def _as_type(self, expr: ast.AST) -> None:
        """Layer classes named in `expr` only as types (a tuple, a union, `list[...]`): comparing against a class runs
        none of its code. A call inside (`nn.Linear(2, 2)`) is judged as a call still."""
        pending = [expr]
        while pending:
            node = pending.pop()
            if isinstance(node, ast.Name | ast.Attribute):
                if layers.is_layer_class(self.resolver.resolve(node) or ""):
                    self.built.add(id(node))
            elif isinstance(node, ast.Tuple | ast.List | ast.Subscript | ast.BinOp):
                pending += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]

    def _is_jit(self, decorator: ast.AST) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        dotted = self.resolver.resolve(target) or ""
        return dotted.startswith("triton") and dotted.rsplit(".", 1)[-1] in ("jit", "autotune", "heuristics")

    # -- file access --------------------------------------------------------------------------------------------
    def _check_paths(self, node: ast.Call, func: str, args: list[ast.AST]) -> None:
        args = args + [k.value for k in node.keywords if k.arg in ("file", "path", "src", "dst", "name", "f")]
        for arg in args:
            self._judge_path(self.paths.value(arg), node, func)

    def _check_path_method(self, node: ast.Call) -> None:
        method, base = node.func.attr, node.func.value
        value = self.paths.value(base)
        if value[0] == "unknown" and method not in _PATH_ONLY_METHODS:
            return  # str.replace, file.open-like methods of other objects
        self._judge_path(value, node, f"Path.{method}")
        if method in ("rename", "replace", "symlink_to", "hardlink_to") and node.args:
            self._judge_path(self.paths.value(node.args[0]), node, f"Path.{method}")

    def _judge_path(self, value: tuple, node: ast.AST, func: str) -> None:
        if value[0] == "out":
            self._add("static.file_access", node, f"calls {func} on {value[1]}, outside the candidate's folder")
        elif value[0] == "unknown":
            self._add("static.file_access", node, f"calls {func} on a path not known to be inside the candidate's "
                                                   "folder (build it from __file__ and constant names)")


def _harmless_torch(dotted: str) -> bool:
    tail = dotted.split(".", 1)[1] if "." in dotted else ""
    return dotted == "torch" or tail in names.TORCH_DTYPES or dotted.startswith(names.ALLOWED_IN_HANDLER)
