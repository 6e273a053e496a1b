"""Git objects of a candidate, written straight into the lineage's loose-object store: its files and avo.json as
a tree, and the commit over it (author: the model; committer: avo). Each object lands atomically, by rename, and
nothing points at it until the lineage moves a ref, so a writer killed here leaves only objects `git fsck` ignores.
The files are read as regular files only (avo.util.safe_files): a link or special file is refused, not followed.
"""

from __future__ import annotations

import io
import stat
import time
from pathlib import Path

from git.objects.fun import tree_to_stream
from gitdb import LooseObjectDB
from gitdb.base import IStream

from avo.run.lineage.records import COMMITTER_EMAIL, COMMITTER_NAME, RECORD_FILE, candidate_files
from avo.util import safe_files


def write_tree(odb: LooseObjectDB, src_dir: Path, record: bytes) -> str:
    """The tree of a candidate folder's files plus its avo.json record; its sha in hex."""
    root: dict = {RECORD_FILE: (_blob(odb, record), 0o100644)}
    for rel, _ in candidate_files(src_dir):
        data, st = safe_files.read_file(src_dir, rel)
        node = root
        *dirs, name = rel.split("/")
        for d in dirs:
            node = node.setdefault(d, {})
        node[name] = (_blob(odb, data), 0o100755 if st.st_mode & stat.S_IXUSR else 0o100644)
    return _store_tree(odb, root).hex()


def write_commit(odb: LooseObjectDB, tree: str, message: str, parents: list[str], model: str) -> str:
    when = f"{int(time.time())} +0000"
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents),
             f"author {model} <{COMMITTER_EMAIL}> {when}",
             f"committer {COMMITTER_NAME} <{COMMITTER_EMAIL}> {when}", "", message]
    return _store(odb, b"commit", "\n".join(lines).encode()).hex()


def _store_tree(odb: LooseObjectDB, node: dict) -> bytes:
    entries = []
    for name, value in node.items():
        if isinstance(value, dict):
            entries.append((_store_tree(odb, value), 0o040000, name))
        else:
            entries.append((value[0], value[1], name))
    # git orders tree entries bytewise, a subtree as if its name ended in "/"
    entries.sort(key=lambda e: e[2].encode() + (b"/" if e[1] == 0o040000 else b""))
    buffer = io.BytesIO()
    tree_to_stream(entries, buffer.write)
    return _store(odb, b"tree", buffer.getvalue())


def _blob(odb: LooseObjectDB, data: bytes) -> bytes:
    return _store(odb, b"blob", data)


def _store(odb: LooseObjectDB, kind: bytes, data: bytes) -> bytes:
    return odb.store(IStream(kind, len(data), io.BytesIO(data))).binsha
