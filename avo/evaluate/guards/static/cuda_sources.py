"""The static guard on CUDA/C++ sources: tokenized (comments and strings dropped) and searched for host-side calls
that would do natively what the Python rules forbid (library handles, file and process calls, host callbacks)."""

from __future__ import annotations

import re
from pathlib import Path

from avo.evaluate.guards.static import names
from avo.evaluate.guards.static.finding import Finding


_C_NOISE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)


def scan_c(path: Path, rel: str) -> list[Finding]:
    """Host-side calls in CUDA/C++ sources: library handles, file and process calls, host callbacks."""
    text = path.read_text(errors="replace")
    includes = re.findall(r"#\s*include\s*[<\"]([^>\"]+)[>\"]", text)

    def blank(match: re.Match) -> str:  # keep the newlines, so line numbers stay right
        return "".join(c if c == "\n" else " " for c in match.group(0))

    code = _C_NOISE.sub(blank, text)
    findings: list[Finding] = []
    for number, line in enumerate(code.splitlines(), start=1):
        for header in (h for h in includes if h in text.splitlines()[number - 1]):
            stem = header.rsplit(".", 1)[0]
            for key, rule in names.C_FORBIDDEN_HEADERS.items():
                if stem == key or stem.startswith(key) and key in ("cublas", "cudnn", "cufft"):
                    findings.append(Finding(rule, rel, number, f"includes <{header}>"))
        if line.lstrip().startswith("#"):
            continue
        for match in re.finditer(r"([A-Za-z_]\w*)\s*(\()?", line):
            word, called = match.group(1), match.group(2)
            if word.startswith(("cublas", "cudnn")):
                findings.append(Finding("static.library_call", rel, number, f"calls {word} (the library path)"))
            elif called and word in names.C_FILE_CALLS or word in names.C_FILE_TYPES:
                findings.append(Finding("static.file_access", rel, number, f"uses {word} (file access from CUDA/C++)"))
            elif called and word in names.C_PROCESS_CALLS:
                findings.append(Finding("static.forbidden_import", rel, number,
                                        f"calls {word} (processes, threads, host callbacks or native loading)"))
    return findings
