"""What a candidate commit holds and says: its files, content hash, avo.json record and message with trailers.

Shared by the lineage (which writes and reads these commits) and by anything that must produce the same structure
(the synthetic-history benchmark), so there is one definition of the format.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from avo.evaluate.result import EvalResult
from avo.util import safe_files

RECORD_FILE = "avo.json"
CID_PATTERN = re.compile(r"c\d{4,}")
COMMITTER_NAME, COMMITTER_EMAIL = "avo", "avo@localhost"
_SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ipynb_checkpoints"}
_TRAILER = re.compile(r"(Avo-[A-Za-z-]+): ?(.*)")


def cid_for(number: int) -> str:
    return f"c{number:04d}"


def cid_number(cid: str) -> int:
    return int(cid[1:])


def left_out(rel: str, is_dir: bool) -> bool:
    """Whether a folder entry is no part of a candidate: caches, bytecode, avo.json, and hidden names (so a
    `.git`, `.gitattributes` or `.gitmodules` at any depth never reaches the lineage). Never inspected or opened."""
    name = rel.rsplit("/", 1)[-1]
    if is_dir:
        return name in _SKIPPED_DIRS or name.startswith(".")
    return name.startswith(".") or name.endswith(".pyc") or rel == RECORD_FILE


def candidate_files(src_dir: Path) -> list[tuple[str, os.stat_result]]:
    """(relative posix path, lstat) of what a candidate consists of, sorted: its regular files, what `left_out`
    names left out. A symlink, hard link, FIFO, socket or device among them is refused (safe_files.UnsafeFile)."""
    return safe_files.regular_files(Path(src_dir), left_out)


def content_hash(src_dir: Path, replaced: dict[str, bytes] | None = None) -> str:
    """Hash of a candidate's files (paths, executable bits, bytes): equal for identical sources. `replaced`: the
    bytes to hash instead of some files' own (the hash of the candidate those edits would make)."""
    def read(rel: str) -> tuple[str, bool, bytes]:
        data, st = safe_files.read_file(Path(src_dir), rel)
        return rel, bool(st.st_mode & stat.S_IXUSR), (replaced or {}).get(rel, data)
    return hash_files(read(rel) for rel, _ in candidate_files(src_dir))


def hash_files(files: Iterable[tuple[str, bool, bytes]]) -> str:
    """content_hash of (relative path, executable, bytes) triples given in path order."""
    digest = hashlib.sha256()
    for rel, executable, data in files:
        digest.update(f"{rel}\0{int(executable)}\0{len(data)}\0".encode())
        digest.update(data)
    return "sha256:" + digest.hexdigest()


def record_bytes(record: dict) -> bytes:
    return json.dumps(record, indent=1).encode() + b"\n"


def record_for(cid: str, parent: str | None, result: EvalResult, model: str, rationale: str, created: str,
               content: str) -> dict:
    """The avo.json committed with a candidate: provenance plus a compact evaluation summary."""
    keep = ("case", "suite", "dtype", "correct", "rel_err", "ms", "library_ms", "tflops", "library_tflops", "speedup")
    cases = [{k: v for k, v in case.model_dump().items() if k in keep and v is not None} for case in result.cases]
    return {
        "cid": cid, "parent": parent, "model": model, "rationale": rationale, "created": created,
        "content_hash": content,
        "eval": {
            "status": result.status, "rule": result.rule, "message": result.message[:4000],
            "fitness": result.fitness, "suspicious": result.suspicious,
            "suspicious_reason": result.suspicious_reason, "timing_source": result.timing_source,
            "device": result.device, "gpu": result.gpu, "library": result.library, "seed": result.seed,
            "worker": result.worker, "node": result.node, "cases": cases,
        },
    }


def message_for(cid: str, parent: str | None, result: EvalResult, rationale: str, content: str) -> str:
    """Commit message: one summary line, the rationale, then the trailers `git log` and the scans read back."""
    summary = " ".join(result.summary().split())[:200]
    parts = [f"{cid}: {summary}"]
    if rationale:
        parts.append(rationale)
    parts.append("\n".join([
        f"Avo-Candidate: {cid}", f"Avo-Parent: {parent or 'none'}", f"Avo-Status: {result.status}",
        f"Avo-Fitness: {result.fitness!r}", f"Avo-Content: {content}",
    ]))
    return "\n\n".join(parts) + "\n"


def tidy_rationale(text: str) -> str:
    # paragraphs are separated by exactly one blank line so the message parses back unchanged
    return re.sub(r"\n{3,}", "\n\n", text.replace("\r\n", "\n")).strip()


def model_name(model: str) -> str:
    return re.sub(r"[<>\n\r]", "", model).strip() or "unknown"


def parse_message(message: str) -> tuple[str, str, dict[str, str]]:
    """(summary, rationale, trailers) of a candidate commit message."""
    paragraphs = message.strip().split("\n\n")
    lines = paragraphs[-1].splitlines() if len(paragraphs) > 1 else []
    matches = [_TRAILER.fullmatch(line) for line in lines]
    trailers = {m.group(1): m.group(2) for m in matches if m} if lines and all(matches) else {}
    body = paragraphs[1:-1] if trailers else paragraphs[1:]
    subject = paragraphs[0].split("\n")[0]
    cid = trailers.get("Avo-Candidate", "")
    summary = subject[len(cid) + 2:] if cid and subject.startswith(f"{cid}: ") else subject
    return summary, "\n\n".join(body), trailers
