"""The guards' modules import each other directly, never through a package whose `__init__` imports them back (a
cycle between a package and its own module: which one finishes first depends on which was imported first)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
GUARDS = REPO / "avo" / "evaluate" / "guards"


def _dotted(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path) -> set[str]:
    """The modules `path` imports (`from X import y` counts as X), relative imports resolved."""
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            found.add(".".join([*base, *([node.module] if node.module else [])]))
    return found


def test_no_guard_module_imports_its_own_package_where_that_package_imports_its_modules():
    cycles = []
    for init in sorted(GUARDS.rglob("__init__.py")):
        package = _dotted(init)
        if not any(name.startswith(package + ".") for name in _imported(init)):
            continue  # an `__init__` that imports none of its modules closes no cycle
        for module in sorted(init.parent.glob("*.py")):
            if module.name != "__init__.py" and package in _imported(module):
                cycles.append(f"{module.relative_to(REPO)} imports {package}, whose __init__ imports its modules")
    assert cycles == []


@pytest.mark.parametrize("first", ["avo.evaluate.guards.sentinel", "avo.evaluate.guards.runtime",
                                   "avo.evaluate.guards.audit", "avo.evaluate.guards"])
def test_any_guard_module_can_be_imported_first(first):
    done = subprocess.run([sys.executable, "-c", f"import {first}; from avo.evaluate.guards import Sentinel"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
