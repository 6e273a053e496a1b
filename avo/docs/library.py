"""The docs the agent reads: notes chunked by heading, indexed with BM25 (bm25s), searched and read by id.

Searches cover the shipped corpus (docs_corpus/) and, once the user has added documents (Markdown, text, HTML) with
`avo docs index`, a user index built over the corpus plus those documents. Each index is cached on disk and rebuilt
when any source file's size, mtime or content hash changes. A chunk's id is `<file key>#<heading slug>`; the file
key alone names the whole file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from avo.util.atomic import write_text_atomic
from avo.util.cache import cache_root
from avo.util.shipped import shipped_dir
from avo.docs.chunks import SUFFIXES, Chunk
from avo.docs.index import Hit, Index

log = logging.getLogger("avo.docs")
"""The docs' logger (index.py logs to it too): `avo docs` shows its warnings as one line each."""


def corpus_dir() -> Path:
    """docs_corpus/ beside the package in a checkout (or editable install); in an installed wheel, the copy under
    `<prefix>/share/avo/docs_corpus` (pyproject's data-files)."""
    return shipped_dir("docs_corpus")


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    text: str
    """The section as Markdown, subsections included."""
    ids: list[str]
    source: str


class Library:
    """The shipped corpus, and the user index built over the corpus plus the user's documents so that one BM25
    collection scores both alike. Indexes are opened lazily and kept while their files' sizes and mtimes hold."""

    def __init__(self, corpus: Path | None = None, cache: Path | None = None):
        self.corpus = Path(corpus) if corpus else corpus_dir()
        self.cache = Path(cache) if cache else cache_root() / "docs"
        tag = hashlib.sha1(str(self.corpus.resolve()).encode()).hexdigest()[:12]
        self.corpus_cache = self.cache / f"corpus-{tag}"
        self.user_cache = self.cache / "user"
        self.sources_file = self.cache / "user-sources.json"
        self._open: dict[str, tuple[list, Index]] = {}

    def corpus_files(self) -> list[tuple[Path, str]]:
        found = sorted(p for p in self.corpus.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file())
        return [(p, p.relative_to(self.corpus).with_suffix("").as_posix()) for p in found]

    def user_sources(self) -> list[str]:
        """The files and folders the user indexed; a damaged list is an error, never an empty one (the user's
        documents would vanish from every search without a word)."""
        from avo.errors import UserError

        try:
            paths = json.loads(self.sources_file.read_text())["paths"]
            if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                raise ValueError("'paths' is not a list of paths")
        except (FileNotFoundError, NotADirectoryError):  # nothing indexed, or no cache folder at all
            return []
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{self.sources_file} is damaged ({exc}): index your documents again with "
                            "avo docs index --reset PATH...") from None
        return paths

    def user_files(self) -> tuple[list[tuple[Path, str]], list[tuple[str, str]]]:
        """Supported files under the indexed paths, with keys unique across both indexes; and what was skipped."""
        taken = {key for _, key in self.corpus_files()}
        files, skipped = [], []
        for source in self.user_sources():
            root = Path(source)
            if root.is_dir():
                found = sorted(p for p in root.rglob("*") if p.suffix.lower() in SUFFIXES
                               and not any(part.startswith(".") for part in p.relative_to(root).parts)
                               and (p.is_file() or p.is_symlink()))
                named = [(p, f"{root.name}/{p.relative_to(root).with_suffix('').as_posix()}") for p in found]
            elif root.exists():
                if root.suffix.lower() not in SUFFIXES:
                    skipped.append((source, f"unsupported file type (use {', '.join(sorted(SUFFIXES))})"))
                    continue
                named = [(root, root.stem)]
            else:
                skipped.append((source, "no longer exists"))
                continue
            for path, key in named:
                key = f"user/{key}" if key in taken else key
                unique, n = key, 2
                while unique in taken:
                    unique, n = f"{key}-{n}", n + 1
                taken.add(unique)
                files.append((path, unique))
        return files, skipped

    def _index(self, name: str, files, cache: Path, skipped=()) -> Index:
        signature = []
        for path, key in files:
            try:
                st = path.stat()
                signature.append((key, str(path), st.st_size, st.st_mtime_ns))
            except OSError:
                signature.append((key, str(path), None, None))
        held = self._open.get(name)
        if held and held[0] == signature:
            return held[1]
        index = Index.open(files, cache, skipped)
        self._open[name] = (signature, index)
        return index

    def corpus_index(self) -> Index:
        return self._index("corpus", self.corpus_files(), self.corpus_cache)

    def user_index(self) -> Index | None:
        """The corpus plus the user's documents, or None when the user indexed nothing."""
        if not self.user_sources():
            return None
        files, skipped = self.user_files()
        return self._index("user", self.corpus_files() + files, self.user_cache, skipped)

    def index(self) -> Index:
        """The index searches use: the user index when there is one, else the corpus alone."""
        return self.user_index() or self.corpus_index()

    def user_chunks(self, index: Index) -> list[Chunk]:
        corpus = {str(path) for path, _ in self.corpus_files()}
        return [c for c in index.chunks if c.source not in corpus]

    def add(self, paths: list[str], reset: bool = False) -> Index | None:
        """Add files or folders to the user index (or start it afresh with `reset`); returns the new user index."""
        from avo.errors import UserError

        sources = [] if reset else self.user_sources()
        for raw in paths:
            path = Path(raw).expanduser()
            if not path.exists():
                raise UserError(f"no such file or folder: {raw}")
            if str(path.resolve()) not in sources:
                sources.append(str(path.resolve()))
        self.cache.mkdir(parents=True, exist_ok=True)
        if not sources:
            self.sources_file.unlink(missing_ok=True)
            shutil.rmtree(self.user_cache, ignore_errors=True)
            self._open.pop("user", None)
            return None
        write_text_atomic(self.sources_file, json.dumps({"paths": sources}, indent=1))
        return self.user_index()

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return self.index().search(query, k)

    def resolve(self, doc_id: str) -> tuple[Index, str]:
        """The index holding `doc_id`; tolerates a file suffix (`hopper.md#tma`) or a bare heading slug."""
        from avo.errors import UserError

        wanted = doc_id.strip()
        key, _, anchor = wanted.partition("#")
        key = re.sub(r"\.(md|markdown|txt|text|html?)$", "", key)
        wanted = f"{key}#{anchor}" if anchor else key
        index = self.index()
        for candidate in (wanted, wanted.lower()):
            if index.section(candidate):
                return index, candidate
        by_slug = [c.id for c in index.chunks if c.id.endswith(f"#{wanted.lstrip('#')}")]
        if len(by_slug) == 1:
            return index, by_slug[0]
        import difflib

        known = [c.id for c in index.chunks]
        close = difflib.get_close_matches(wanted, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see `avo docs list` or search first"
        raise UserError(f"unknown docs id {doc_id!r}{hint}")

    def read(self, doc_id: str) -> Section:
        index, found = self.resolve(doc_id)
        chunks = index.section(found)
        text = "\n\n".join(f"{'#' * max(c.level, 1)} {c.heading}\n\n{c.text}".rstrip() for c in chunks)
        return Section(found, chunks[0].title, text, [c.id for c in chunks], chunks[0].source)

    def listing(self) -> dict[str, list[str]]:
        """Chunk ids per source file, shipped corpus first."""
        out: dict[str, list[str]] = {}
        for chunk in self.index().chunks:
            out.setdefault(chunk.source, []).append(chunk.id)
        return out


_library: Library | None = None


def library() -> Library:
    """The default library (its cache follows AVO_CACHE_DIR)."""
    global _library
    if _library is None or _library.cache != cache_root() / "docs":
        _library = Library()
    return _library


def search(query: str, k: int = 5) -> list[Hit]:
    return library().search(query, k)


def read(doc_id: str) -> Section:
    return library().read(doc_id)
