"""A candidate's diff as an HTML table whose code is highlighted in its own language (Python, CUDA C++, ...).

Each side's whole file is highlighted once by Pygments, so a line inside a docstring or a multi-line comment is
coloured as such, and the diff's lines are then taken from the side they belong to. Pygments escapes every
character; file names and anything it does not lex are escaped here.
"""

from __future__ import annotations

import re
import subprocess

from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from avo.run.lineage.gitcmd import run_git

HUNK = re.compile(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)")
MAX_FILE_BYTES = 1_000_000
"""Sides larger than this are shown without highlighting (still escaped)."""


def _side(lineage, cid: str, path: str | None) -> list[str]:
    """The file at `path` in candidate `cid`, highlighted, one HTML string per line ([] when absent)."""
    if path is None:
        return []
    try:
        text = run_git(lineage.path, "show", f"refs/avo/{cid}:{path}")
    except (subprocess.CalledProcessError, UnicodeDecodeError):
        return []
    if len(text) > MAX_FILE_BYTES:
        return [str(escape(line)) for line in text.split("\n")]
    try:
        lexer = get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False, ensurenl=False)
    return highlight(text, lexer, HtmlFormatter(nowrap=True)).split("\n")


def _path(header: str) -> str | None:
    name = header[4:].split("\t")[0]
    return None if name == "/dev/null" else name[2:] if name[:2] in ("a/", "b/") else name


def diff_table(lineage, a: str, b: str) -> Markup:
    """The unified diff a -> b (as `avo diff` shows it), one table row per line with both line numbers."""
    text = lineage.diff(a, b)
    if not text.strip():
        return Markup('<p class="muted">(no differences in the files)</p>')
    rows: list[str] = []
    old: list[str] = []
    new: list[str] = []
    old_path = new_path = None
    o = n = 0
    in_header = False  # between "diff --git" and the first hunk, where "--- " and "+++ " name the files
    for line in text.split("\n"):
        if line.startswith("diff --git "):
            old_path = new_path = None
            in_header = True
            rows.append(f'<tr class="file"><td colspan="3">{escape(line[len("diff --git "):])}</td></tr>')
        elif in_header and line.startswith("--- "):
            old_path = _path(line)
        elif in_header and line.startswith("+++ "):
            new_path = _path(line)
            old, new = _side(lineage, a, old_path), _side(lineage, b, new_path)
        elif match := HUNK.match(line):
            in_header = False
            o, n = int(match.group(1)), int(match.group(2))
            rows.append(f'<tr class="hunk"><td class="ln"></td><td class="ln"></td><td class="code">'
                        f'{escape(line)}</td></tr>')
        elif line[:1] in ("+", "-", " ") and rows and (o or n):
            sign = line[0]
            kind, source, number = {"+": ("add", new, n), "-": ("del", old, o), " ": ("ctx", new, n)}[sign]
            code = source[number - 1] if 0 < number <= len(source) else str(escape(line[1:]))
            left = "" if sign == "+" else o
            right = "" if sign == "-" else n
            o, n = o + (sign != "+"), n + (sign != "-")
            rows.append(f'<tr class="{kind}"><td class="ln">{left}</td><td class="ln">{right}</td>'
                        f'<td class="code"><span class="sign">{sign}</span>{code}</td></tr>')
        elif in_header and line.startswith(("Binary files", "new file", "deleted file", "rename ", "similarity",
                                             "old mode", "new mode")):
            rows.append(f'<tr class="meta"><td colspan="3">{escape(line)}</td></tr>')
    return Markup(f'<table class="diff highlight">{"".join(rows)}</table>')
