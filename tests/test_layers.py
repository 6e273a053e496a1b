"""The layers hold: the import contracts in pyproject.toml, checked with import-linter (which reads imports inside
functions too), and contracts that name every top-level module, so a new one cannot slip past them. And the files
stay small: none over 400 lines, no function over 60."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

import needs

import avo

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = {c["id"]: c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
             ["contracts"]}


def top_level_modules() -> set[str]:
    package = Path(avo.__file__).parent
    names = {p.stem for p in package.glob("*.py")} | {p.parent.name for p in package.glob("*/__init__.py")}
    return {f"avo.{name}" for name in names if name not in ("__init__", "__main__")}


def test_the_import_contracts_hold(capsys):
    cli = needs.module("importlinter.cli")
    enabled = [logger for logger in logging.Logger.manager.loggerDict.values()
               if isinstance(logger, logging.Logger) and not logger.disabled]
    try:
        code = cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    finally:  # it configures logging and so disables every logger that existed: avo's, which later tests here read
        for logger in enabled:
            logger.disabled = False
    report = capsys.readouterr().out
    assert code == cli.EXIT_STATUS_SUCCESS, report
    assert report.count("KEPT") == len(CONTRACTS)


def test_the_contracts_name_every_top_level_module():
    everything = top_level_modules()
    assert set(CONTRACTS["commands-on-top"]["source_modules"]) == everything - {"avo.cli", "avo.commands"}
    assert set(CONTRACTS["util-at-the-bottom"]["forbidden_modules"]) == everything - {"avo.util"}


MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_no_file_over_400_lines_and_no_function_over_60():
    package = Path(avo.__file__).parent
    too_long = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        where = path.relative_to(package.parent)
        if source.count("\n") > MAX_FILE_LINES:
            too_long.append(f"{where}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{where}:{node.lineno} {node.name}: {lines} lines")
    assert not too_long, "\n".join(too_long)
