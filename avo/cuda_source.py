"""What a CUDA C++ candidate's sources may include, and how compiler logs reach the agent (avo.cuda's source side).

Includes must stay inside the candidate's folder (or be plain system headers), so a compile log cannot show files
from elsewhere; headers are part of a build's identity, so an edited header misses the cubin cache like an edited
source.
"""

from __future__ import annotations

import re
from pathlib import Path

LOG_LIMIT = 4000
"""Characters of a compiler log kept for the agent (the first errors matter; the rest are usually consequences)."""
HEADER_SUFFIXES = (".cuh", ".h", ".hpp", ".hxx", ".inc")
_INCLUDE = re.compile(r"^\s*#\s*include\b(.*)$", re.M)


class CudaCompileError(Exception):
    """A source did not compile (or may not be compiled); `message` is what the agent reads."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def check_includes(folder: Path) -> None:
    """CudaCompileError unless every #include in the folder's C/CUDA files names a file inside the folder or a
    system header, by a plain relative name."""
    for path in sorted(folder.rglob("*")):
        if path.suffix in (".cu", *HEADER_SUFFIXES) and "__pycache__" not in path.parts:
            _check_file_includes(path, folder)


def _check_file_includes(path: Path, folder: Path) -> None:
    text = path.read_text(errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        match = _INCLUDE.match(line)
        if not match:
            continue
        target = match.group(1).split("//")[0].strip()
        quoted = re.fullmatch(r'"([^"]+)"|<([^>]+)>', target)
        name = (quoted.group(1) or quoted.group(2)) if quoted else None
        local = (path.parent / name) if name else None
        if name is None or name.startswith(("/", "~")) or ".." in Path(name).parts or (
                local.exists() and not local.resolve().is_relative_to(folder)):  # a link out of the folder
            raise CudaCompileError(f"{path.relative_to(folder)}:{number}: {line.strip()}: an include must name a "
                                   "header in the candidate's folder or a system header by a plain relative name")


def trim_log(text: str, folder: Path, limit: int = LOG_LIMIT) -> str:
    """The log with the candidate's folder dropped from paths, cut after `limit` characters at a line end."""
    text = text.replace(str(folder) + "/", "").strip()
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit("\n", 1)[0]
    rest = text[len(head):].count("\n")
    return f"{head}\n... ({rest} more lines)"


def headers(folder: Path) -> list[str]:
    """Contents of the folder's headers, so an edited header misses the cache like an edited source."""
    return [p.read_text(errors="replace") for p in sorted(folder.rglob("*")) if p.suffix in HEADER_SUFFIXES]


PERFORMANCE_NOTICE = re.compile(r"\((C\d+)\) Potential Performance Loss: (.*?) in the function '([^']+)'")
"""ptxas's notice that it made a kernel slower than written (wgmma serialized, C7510-C7519): neither an error nor a
warning, and in the log whether or not -v was asked for."""


def performance_notices(log: str) -> tuple[str, ...]:
    """ptxas's performance notices in a compile log, one line each: "<function>: <what it did> (<code>)"."""
    return tuple(dict.fromkeys(f"{m.group(3)}: {m.group(2).strip()} ({m.group(1)})"
                               for m in PERFORMANCE_NOTICE.finditer(log)))


def whole_elf(cubin: bytes) -> bytes:
    """The cubin with the byte CuPy's getCUBIN strips as if it were a string's terminating NUL put back. The last
    bytes of a cubin are its program-header table, whose final field (p_align) ends in a zero high byte; the driver
    loads the cut file, but cuobjdump and nvdisasm refuse it."""
    import struct

    if len(cubin) < 64 or cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return cubin
    phoff, shoff = struct.unpack_from("<QQ", cubin, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", cubin, 0x36)
    extent = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    return cubin + b"\0" if extent == len(cubin) + 1 else cubin
