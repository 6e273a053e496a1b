"""One BM25 index of the docs (bm25s): how text is split into words and stemmed, what identifies a file's
version, and the index itself, cached on disk and rebuilt when a source file changes. The library puts the shipped
corpus and the user's documents together over it (library.py)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from avo.docs.chunks import Chunk, chunk_file

log = logging.getLogger("avo.docs")

FORMAT = 1
"""Bump when chunking or tokenizing changes, so cached indexes are rebuilt."""


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    snippet: str
    score: float
    source: str


# ---------------------------------------------------------------- tokenizing

def split_words(text: str) -> list[str]:
    """Words of two or more characters, lower-cased; snake_case and camelCase words also give their parts, so
    `num_warps` matches "number of warps" and `cuTensorMapEncodeTiled` matches "tensor map"."""
    words = []
    for word in re.findall(r"\w+", text):
        parts = [p for p in re.split(r"_|(?<=[a-z])(?=[A-Z])", word) if len(p) >= 2]
        if len(word) >= 2:
            words.append(word.lower())
        if len(parts) > 1:
            words.extend(p.lower() for p in parts)
    return words


def _stemmer():
    try:
        import Stemmer
    except ImportError:  # stemming improves recall; search still works without it
        return None
    return Stemmer.Stemmer("english").stemWord


def _tokenizer():
    from bm25s.tokenization import Tokenizer

    return Tokenizer(lower=False, splitter=split_words, stopwords="en", stemmer=_stemmer())


def _index_text(chunk: Chunk) -> str:
    return f"{chunk.title}\n{chunk.heading}\n{chunk.text}"


def _snippet(text: str, terms: set[str], stems, width: int = 240) -> str:
    """The sentence or line of `text` that shares most words with the query."""
    pieces = [p.strip(" -*|>#") for p in re.split(r"(?<=[.;!?])\s+|\n+", text)]
    pieces = [p.replace("**", "") for p in pieces if len(p) > 2 and not p.startswith(("```", "~~~"))]
    if not pieces:
        return ""
    best = max(range(len(pieces)), key=lambda i: (len(stems(pieces[i]) & terms), -i))
    out = pieces[best]
    if len(out) < width // 2 and best + 1 < len(pieces):
        out = f"{out} {pieces[best + 1]}"
    return out if len(out) <= width else out[: width - 1].rstrip() + "…"


# ---------------------------------------------------------------- one index

def _stamp(path: Path, key: str) -> dict:
    """What identifies a file's version: size, mtime and content hash (None when unreadable)."""
    size = mtime = digest = None
    for stat in (path.stat, path.lstat):  # lstat: a dangling symlink still has an identity
        try:
            st = stat()
            size, mtime = st.st_size, st.st_mtime_ns
            break
        except OSError:
            continue
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        pass
    return {"key": key, "path": str(path), "size": size, "mtime_ns": mtime, "sha256": digest}


def _settings() -> dict:
    import bm25s

    return {"format": FORMAT, "bm25s": bm25s.__version__, "stemmed": _stemmer() is not None}


class Index:
    """A BM25 index over some files' chunks; `open` loads it from its cache folder or builds and saves it."""

    def __init__(self, chunks: list[Chunk], skipped: list[tuple[str, str]], retriever=None, tokenizer=None,
                 rows: list[int] | None = None, from_cache: bool = False):
        self.chunks, self.skipped, self.from_cache = chunks, skipped, from_cache
        self.by_id = {c.id: i for i, c in enumerate(chunks)}
        self.rows = rows if rows is not None else [i for i, c in enumerate(chunks) if c.text.strip()]
        self.tokenizer = tokenizer or _tokenizer()
        self.retriever = retriever
        if retriever is None and self.rows:
            import bm25s

            texts = [_index_text(chunks[i]) for i in self.rows]
            tokens = self.tokenizer.tokenize(texts, show_progress=False, return_as="tuple")
            self.retriever = bm25s.BM25()
            self.retriever.index(tokens, show_progress=False)

    @classmethod
    def open(cls, files: list[tuple[Path, str]], cache: Path,
             skipped: list[tuple[str, str]] = ()) -> "Index":
        expected = {**_settings(), "files": [_stamp(path, key) for path, key in files]}
        try:
            manifest = json.loads((cache / "manifest.json").read_text())
            if {k: manifest.get(k) for k in expected} == expected:
                return cls._load(cache, manifest)
        except (OSError, ValueError, KeyError):
            pass
        index = cls.build(files, skipped)
        index._save(cache, {**expected, "skipped": index.skipped})
        return index

    @classmethod
    def build(cls, files: list[tuple[Path, str]], skipped: list[tuple[str, str]] = ()) -> "Index":
        chunks, skipped = [], list(skipped)
        for path, key in files:
            try:
                chunks.extend(chunk_file(path, key))
            except (OSError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                skipped.append((str(path), reason))
        for path, reason in skipped:
            log.warning("skipped %s: %s", path, reason)
        return cls(chunks, skipped)

    @classmethod
    def _load(cls, cache: Path, manifest: dict) -> "Index":
        import bm25s

        saved = json.loads((cache / "chunks.json").read_text())
        chunks = [Chunk(**c) for c in saved["chunks"]]
        retriever = tokenizer = None
        if saved["rows"]:
            retriever = bm25s.BM25.load(str(cache / "bm25"), show_progress=False)
            tokenizer = _tokenizer()
            tokenizer.load_vocab(str(cache))
        skipped = [tuple(s) for s in manifest.get("skipped", [])]
        return cls(chunks, skipped, retriever, tokenizer, saved["rows"], from_cache=True)

    def _save(self, cache: Path, manifest: dict) -> None:
        """Write to a fresh folder, then swap it in, so a reader never sees half an index."""
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=cache.parent, prefix=f".{cache.name}-"))
            payload = {"chunks": [asdict(c) for c in self.chunks], "rows": self.rows}
            (tmp / "chunks.json").write_text(json.dumps(payload))
            if self.retriever is not None:
                self.retriever.save(str(tmp / "bm25"), show_progress=False)
                self.tokenizer.save_vocab(str(tmp))
            (tmp / "manifest.json").write_text(json.dumps(manifest))
            old = cache.with_name(f".{cache.name}-old-{os.getpid()}")
            if cache.exists():
                cache.rename(old)
            tmp.rename(cache)
            shutil.rmtree(old, ignore_errors=True)
        except OSError as exc:  # an unwritable cache costs speed, not results
            log.warning("could not cache the docs index in %s: %s", cache, exc)

    def _stems(self, text: str) -> set[str]:
        stem = self.tokenizer.stemmer or (lambda w: w)
        stop = set(self.tokenizer.stopwords or ())
        return {stem(w) for w in split_words(text) if w not in stop}

    def search(self, query: str, k: int) -> list[Hit]:
        if self.retriever is None:
            return []
        ids = self.tokenizer.tokenize([query], update_vocab=False, show_progress=False, return_as="ids")
        if not ids or not ids[0]:
            return []
        docs, scores = self.retriever.retrieve(ids, k=min(k, len(self.rows)), show_progress=False,
                                               backend_selection="numpy")
        terms = self._stems(query)
        hits = []
        for row, score in zip(docs[0], scores[0]):
            if score > 0:
                c = self.chunks[self.rows[int(row)]]
                hits.append(Hit(c.id, c.title, _snippet(c.text, terms, self._stems), float(score), c.source))
        return hits

    def section(self, doc_id: str) -> list[Chunk]:
        """The chunk and its subsections; a file key gives the whole file."""
        if doc_id not in self.by_id:
            whole = [c for c in self.chunks if c.id.split("#", 1)[0] == doc_id]
            return whole
        start = self.by_id[doc_id]
        head = self.chunks[start]
        if head.id == head.id.split("#", 1)[0]:
            return [c for c in self.chunks if c.id.split("#", 1)[0] == head.id]
        out = [head]
        for chunk in self.chunks[start + 1:]:
            if chunk.source != head.source or chunk.level <= head.level:
                break
            out.append(chunk)
        return out


# ---------------------------------------------------------------- the shipped corpus plus the user's documents
