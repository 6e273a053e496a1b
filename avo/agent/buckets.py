"""Shape buckets: which entry of a kernel's per-shape table each case takes, read from the kernel's own rule.

A kernel that chooses its configuration per shape defines `bucket(...)`, a plain function of the case's shape
parameters by name (`def bucket(M, N, K):` for gemm, any of B, Hq, Hkv, S, D, causal for attention) returning the
bucket's name, and its wrapper calls it on the shapes it is given. avo never runs the candidate's code outside the
evaluator: this module reads the rule with a small interpreter of its own (if/else, return, local names, arithmetic,
comparisons, `and`/`or`/`not`, min/max/abs, and the module's literal constants), so the agent side knows which cases
fall in which bucket. A rule outside that subset reads as no rule (the kernel is tuned as one).
"""

from __future__ import annotations

import ast
import functools
import operator
from pathlib import Path
from typing import Any, Callable

RULE = "bucket"
MAX_STEPS = 1_000
"""Statements a rule may take for one case (there are no loops; this bounds nested ifs)."""

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod, ast.Div: operator.truediv, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
        ast.Pow: operator.pow}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
        ast.NotEq: operator.ne}
_CALLS = {"min": min, "max": max, "abs": abs}


class RuleError(ValueError):
    """The rule uses something outside the subset avo reads."""


Rule = Callable[[dict], str]


def bucket_rule(source: str) -> Rule | None:
    """The kernel's `bucket` rule as a function of a case's params, or None (no rule, or one avo cannot read)."""
    return _rule(source)


@functools.lru_cache(maxsize=64)
def _rule(source: str) -> Rule | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    constants: dict[str, Any] = {}
    func = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                continue
            if isinstance(value, (int, float, str, bool)):
                constants[node.targets[0].id] = value
        elif isinstance(node, ast.FunctionDef) and node.name == RULE:
            func = node
    if func is None or func.args.vararg or func.args.kwarg or func.args.defaults or func.args.kwonlyargs:
        return None
    names = [a.arg for a in func.args.args]

    def rule(params: dict) -> str:
        missing = [n for n in names if n not in params]
        if missing:
            raise RuleError(f"bucket() takes {missing[0]}, which the case does not have")
        scope = {**constants, **{n: params[n] for n in names}}
        value = _run(func.body, scope, [0])
        if not isinstance(value, str):
            raise RuleError(f"bucket() returned {value!r}, not a bucket name")
        return value

    return rule


def case_buckets(source: str, cases: list) -> dict[str, str]:
    """case name -> bucket for the cases (each with .name and .params) the kernel's rule sorts; {} without a rule
    avo can read, or where it fails on a case."""
    rule = bucket_rule(source)
    if rule is None:
        return {}
    try:
        return {case.name: rule(case.params) for case in cases}
    except (RuleError, ArithmeticError, TypeError, ValueError):
        return {}


HEAD_DIMS = (64, 128)
_PROBE_S = tuple(2 ** k for k in range(6, 18))


def bucket_head_dims(source: str) -> dict[str, int]:
    """bucket -> the largest head dim an attention kernel's rule sends there, probed over the head dims the task
    runs, S from 64 to 128K, causal and not, MHA and GQA ({} without a rule avo can read). The heuristic reads each
    table entry at its own head dim with it (the shared memory and registers an entry's point needs)."""
    rule = bucket_rule(source)
    if rule is None:
        return {}
    found: dict[str, int] = {}
    try:
        for d in HEAD_DIMS:
            for s in _PROBE_S:
                for causal in (False, True):
                    for hkv in (8, 2):
                        name = rule({"B": 1, "Hq": 8, "Hkv": hkv, "S": s, "D": d, "causal": causal})
                        found[name] = max(found.get(name, 0), d)
    except (RuleError, ArithmeticError, TypeError, ValueError):
        return {}
    return found


def annotate(result, source: str, cases_of: Callable[[str], list]) -> None:
    """Set each timed case's `bucket` in `result` from the kernel's rule (`cases_of(suite)` gives a suite's cases)."""
    timed = result.bench_cases()
    suites = {c.suite for c in timed}
    cases = [case for suite in sorted(suites) for case in cases_of(suite)]
    found = case_buckets(source, cases)
    for c in timed:
        c.bucket = found.get(c.case)


def annotate_folder(result, folder: Path, config) -> None:
    """`annotate` for the candidate in `folder`, with the cases of the run's task (`config`: its RunConfig): a
    kernel without a rule is left as it is, and the task is not even loaded."""
    kernel = Path(folder) / "kernel.py"
    source = kernel.read_text(errors="replace") if kernel.is_file() else ""
    if config is None or bucket_rule(source) is None or not result.bench_cases():
        return
    from avo import tasks

    try:
        task = tasks.load(config.kernel, config.evaluation.workload)
    except Exception:  # a task that cannot be loaded here has no buckets to tell
        return
    annotate(result, source, task.cases)


def _run(body: list[ast.stmt], scope: dict, steps: list[int]) -> Any:
    for stmt in body:
        steps[0] += 1
        if steps[0] > MAX_STEPS:
            raise RuleError("bucket() takes too many steps")
        if isinstance(stmt, ast.Return):
            return _eval(stmt.value, scope) if stmt.value is not None else None
        if isinstance(stmt, ast.If):
            branch = stmt.body if _eval(stmt.test, scope) else stmt.orelse
            value = _run(branch, scope, steps)
            if value is not _FELL_THROUGH:
                return value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            scope[stmt.targets[0].id] = _eval(stmt.value, scope)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring
        elif not isinstance(stmt, ast.Pass):
            raise RuleError(f"bucket() uses a {type(stmt).__name__} statement")
    return _FELL_THROUGH


_FELL_THROUGH = object()


def _eval(node: ast.expr, scope: dict) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        if node.id in ("True", "False"):
            return node.id == "True"
        raise RuleError(f"bucket() reads {node.id}, which is no parameter or literal constant")
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = _eval(node.left, scope), _eval(node.right, scope)
        if isinstance(node.op, (ast.Pow, ast.LShift)) and not -64 <= right <= 64:
            raise RuleError("bucket() raises to a power beyond 64")  # 2 ** 10 ** 9 would never end
        return _BIN[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, scope)
        if isinstance(node.op, ast.Not):
            return not value
        if isinstance(node.op, ast.USub):
            return -value
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, scope) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare) and all(type(op) in _CMP for op in node.ops):
        left = _eval(node.left, scope)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, scope)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, scope) if _eval(node.test, scope) else _eval(node.orelse, scope)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS \
            and not node.keywords:
        return _CALLS[node.func.id](*(_eval(a, scope) for a in node.args))
    raise RuleError(f"bucket() uses {type(node).__name__}, which avo does not read")
