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
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from avo.doc_chunks import SUFFIXES, Chunk, chunk_file

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


def corpus_dir() -> Path:
    """docs_corpus/ beside the package in a checkout (or editable install); in an installed wheel, the copy under
    `<prefix>/share/avo/docs_corpus` (pyproject's data-files)."""
    import site
    import sys
    import sysconfig

    checkout = Path(__file__).resolve().parent.parent / "docs_corpus"
    prefixes = [sysconfig.get_path("data"), sys.prefix, site.USER_BASE or ""]
    for candidate in [checkout] + [Path(p) / "share" / "avo" / "docs_corpus" for p in prefixes if p]:
        if candidate.is_dir():
            return candidate
    return checkout


def cache_root() -> Path:
    if os.environ.get("AVO_CACHE_DIR"):
        return Path(os.environ["AVO_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "avo"


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
        staging = self.sources_file.with_name(f".{self.sources_file.name}.{os.getpid()}")
        staging.write_text(json.dumps({"paths": sources}, indent=1))
        os.replace(staging, self.sources_file)  # a crash mid-write leaves the old list, not a torn one
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


# ---------------------------------------------------------------- agent tools

READ_LIMIT = 12000
"""Characters of a section returned at once; longer sections list their subsection ids instead."""


class SearchDocsArgs(BaseModel):
    query: str = Field(min_length=1, description="What you want to know, in plain words "
                       "(e.g. 'shared memory per SM on H100', 'triton num_stages').")
    k: int = Field(5, ge=1, le=20, description="How many hits to return.")


class ReadDocArgs(BaseModel):
    id: str = Field(min_length=1, description="A section id from search_docs (e.g. 'hopper#tma-and-mbarrier'), "
                    "or a file key such as 'hopper' for the whole file.")


def search_docs(ctx, args: SearchDocsArgs):
    """Search the kernel-engineering notes (Hopper and Blackwell hardware, PTX, Triton, attention and GEMM
    playbooks, Nsight Compute metrics) and any documents the user indexed. Returns ranked section ids with titles
    and snippets; read a section with read_doc."""
    hits = search(args.query, args.k)
    data = {"query": args.query, "hits": [asdict(h) for h in hits]}
    if not hits:
        return f"No docs match {args.query!r}; try other words.", data
    lines = [f"{n}. {h.id} ({h.title}; score {h.score:.1f})\n   {h.snippet}" for n, h in enumerate(hits, 1)]
    return "\n".join(lines), data


def read_doc(ctx, args: ReadDocArgs):
    """Read one docs section by its id from search_docs, with its subsections; a file key reads the whole file."""
    from avo.agent.toolbase import ToolError
    from avo.errors import UserError

    try:
        section = read(args.id)
    except UserError as exc:
        raise ToolError(str(exc)) from None
    text, truncated = section.text, len(section.text) > READ_LIMIT
    if truncated:
        text = (text[:READ_LIMIT] + "\n\n[cut here; read the subsections by id: "
                + ", ".join(section.ids[1:]) + "]")
    data = {"id": section.id, "title": section.title, "text": section.text, "ids": section.ids,
            "source": section.source, "truncated": truncated}
    return f"{section.title}  [{section.id}]\n\n{text}", data


def tools():
    from avo.agent.toolbase import Tool

    return [Tool("search_docs", SearchDocsArgs, search_docs), Tool("read_doc", ReadDocArgs, read_doc)]
