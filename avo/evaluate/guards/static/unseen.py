"""The libraries the run-time op recorder cannot see (names.UNSEEN_ROOTS): CuPy and NumPy compute outside torch's
dispatcher, so a cheat that reached their matmul by a name built at run time (`getattr(cupy, name)`,
`vars(cupy)[name]`, a method of a CuPy array) would run cuBLAS unseen, correct and fast. The static guard therefore
reads every name reached in them: CuPy only through its allowed names (names.CUPY_NAMES), and none of these modules
handed on as a value, where the guard could not follow what is looked up in it."""

from __future__ import annotations

import ast

from avo.evaluate.guards.static import names


def refusal(dotted: str) -> str | None:
    """Why the dotted path `dotted`, rooted in an unseen library, may not be used; None when it may."""
    parts = dotted.split(".")
    if parts[0] == "torch" and parts[-1] in names.TENSOR_TO_NUMPY:
        return _NUMPY
    if parts[0] not in names.UNSEEN_ROOTS:
        return None
    if parts[0] == "numpy" and len(parts) > 1 and parts[1] in names.NUMPY_FROM_DATA:
        return _NUMPY
    if any(p.startswith("__") and p != "__version__" for p in parts[1:]):
        return "introspection of a library the run-time op recorder cannot see"
    if parts[0] != "cupy" or len(parts) == 1:
        return None
    if parts[1] not in names.CUPY_NAMES or parts[1] == "cuda" and len(parts) > 2 and parts[2] not in \
            names.CUPY_CUDA_NAMES:
        return ("CuPy only through RawModule, RawKernel, scalar types and cupy.cuda's streams, events and memory: the "
                "rest runs CuPy's own kernels and cuBLAS, which the run-time op recorder cannot see")
    return None


_NUMPY = ("a NumPy array of a tensor's data: its methods run NumPy's BLAS, which the run-time op recorder cannot "
          "see")


def method_refusal(attr: str) -> str | None:
    """Why the method `attr`, called on an object the guard cannot name (a tensor), may not be used, or None."""
    return _NUMPY if attr in names.TENSOR_TO_NUMPY else None


def module_like(dotted: str) -> bool:
    """Whether `dotted`, rooted in an unseen library, may stand for a module (or a function): a lower-case last part
    that is not a scalar type. Classes (RawKernel, Stream) and scalar types may be passed on."""
    last = dotted.rsplit(".", 1)[-1]
    return dotted.split(".")[0] in names.UNSEEN_ROOTS and last[:1].islower() and last not in names.SCALAR_TYPES


def parents(tree: ast.AST) -> dict[int, ast.AST]:
    """Each node's parent, by id."""
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def passed_on(node: ast.AST, parent: ast.AST | None, resolve, fold) -> bool:
    """Whether the module `node` stands for is handed on as a value: anything but an attribute read, a call of it,
    a getattr with a name the guard reads, a test (`is None`, `if cupy`), isinstance, a bare expression or an alias
    (`cp = cupy`: the resolver follows aliases, so their uses are judged as the module's)."""
    if parent is None or isinstance(parent, ast.Expr | ast.Compare):
        return False
    if isinstance(parent, ast.Attribute):
        return parent.value is not node
    if isinstance(parent, ast.UnaryOp):
        return not isinstance(parent.op, ast.Not)
    if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert):
        return parent.test is not node
    if isinstance(parent, ast.Assign):
        return not all(isinstance(t, ast.Name) for t in parent.targets)
    if isinstance(parent, ast.AnnAssign | ast.NamedExpr):
        return not isinstance(parent.target, ast.Name)
    if isinstance(parent, ast.Call):
        if parent.func is node:
            return False
        func = resolve(parent.func)
        if func in ("builtins.isinstance", "builtins.issubclass"):
            return False
        return not (func == "builtins.getattr" and len(parent.args) >= 2 and parent.args[0] is node
                    and fold(parent.args[1]) is not None)
    return True


def constant_array(func: str | None, call: ast.Call) -> bool:
    """Whether `call` makes a NumPy array of constants only (`np.array([1, 2, 3])`: no tensor's data in it)."""
    parts = (func or "").split(".")
    return (len(parts) == 2 and parts[0] == "numpy" and parts[1] in names.NUMPY_FROM_DATA and bool(call.args)
            and all(literal(a) for a in call.args) and not call.keywords)


def literal(node: ast.AST) -> bool:
    """Whether `node` is made of constants only (`np.array([1, 2, 3])` holds no tensor's data)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.List | ast.Tuple):
        return all(literal(e) for e in node.elts)
    return isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)
