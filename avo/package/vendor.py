"""The candidate's files as the package carries them: `avo.cuda` (the one part of avo a candidate may import) is
replaced by a copy inside the package, with its own imports of avo rewritten the same way, so nothing of the package
imports avo.

    from avo.cuda import load_module, tensor_map   ->   from NAME._cuda import load_module, tensor_map
"""

from __future__ import annotations

import ast
from pathlib import Path

from avo.errors import UserError

VENDORED = {"avo.cuda": "_cuda", "avo.cuda_launch": "_cuda_launch", "avo.cuda_source": "_cuda_source",
            "avo.cuda_tensor_map": "_cuda_tensor_map", "avo.extras": "_extras"}
"""avo's module -> its stand-in in the package: avo/cuda.py, cuda_launch.py, cuda_source.py and cuda_tensor_map.py
copied, extras a small shim."""
COPIED = ("cuda", "cuda_launch", "cuda_source", "cuda_tensor_map")


def rewrite(source: str, package: str, where: str) -> tuple[str, set[str]]:
    """`source` with each `from avo... import` pointed at the package's copy; the top-level modules it imports."""
    tree = ast.parse(source, filename=where)
    lines = source.splitlines(keepends=True)
    edits, imported = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
            if any(alias.name.split(".")[0] == "avo" for alias in node.names):
                raise UserError(f"{where}:{node.lineno}: `import avo...` cannot be carried into the package: "
                                "import from avo.cuda instead")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
            if node.module.split(".")[0] == "avo":
                edits.append((node, _replacement(node, package, where)))
    for node, text in sorted(edits, key=lambda e: e[0].lineno, reverse=True):
        first, last = node.lineno - 1, node.end_lineno - 1
        head, tail = lines[first][:node.col_offset], lines[last][node.end_col_offset:]
        lines[first:last + 1] = [head + text + tail]
    return "".join(lines), imported


def _replacement(node: ast.ImportFrom, package: str, where: str) -> str:
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
    if node.module in VENDORED:
        return f"from {package}.{VENDORED[node.module]} import {names}"
    if node.module == "avo" and all(f"avo.{a.name}" in VENDORED for a in node.names):
        return "from {} import {}".format(package, ", ".join(
            f"{VENDORED['avo.' + a.name]} as {a.asname or a.name}" for a in node.names))
    raise UserError(f"{where}:{node.lineno}: imports {node.module}, which the package cannot carry (a candidate may "
                    "import only avo.cuda)")


def vendor_cuda(dest: Path, package: str) -> None:
    """avo.cuda and the modules it imports (cuda_launch, cuda_source, cuda_tensor_map) copied into `dest` (the
    package's folder), their avo imports rewritten."""
    here = Path(__file__).resolve().parents[1]
    for name in COPIED:
        text, _ = rewrite((here / f"{name}.py").read_text(), package, f"avo/{name}.py")
        (dest / f"{VENDORED['avo.' + name]}.py").write_text(text)


def imports_of(folder: Path) -> set[str]:
    """Top-level modules the Python files under `folder` import (any depth, inside functions too)."""
    found: set[str] = set()
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found
