"""Documents cut into sections by heading: Markdown (# to ###), HTML (h1 to h3, via html.parser), plain text (parts).

A chunk's id is `<file key>#<heading slug>`; the first top-level section of a file takes the file key alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".text": "text", ".html": "html",
            ".htm": "html"}
TEXT_PART_CHARS = 1500
"""Plain text has no headings: it is cut into parts of about this size at blank lines."""


@dataclass(frozen=True)
class Chunk:
    id: str
    heading: str
    title: str
    """The heading path, e.g. "Hopper (H100, H200) > TMA and mbarrier"."""
    level: int
    text: str
    """The section's own text, up to its first subheading."""
    source: str


def slug(heading: str) -> str:
    text = re.sub(r"[^\w\s-]", "", heading.lower()).strip()
    return re.sub(r"\s+", "-", text).strip("-") or "section"


class _Sections:
    """Turns a stream of (level, heading) / text events into chunks with unique ids and heading paths."""

    def __init__(self, key: str, source: str, doc_title: str):
        self.key, self.source, self.doc_title = key, source, doc_title
        self.chunks: list[Chunk] = []
        self.used: set[str] = set()
        self.path: list[tuple[int, str]] = []
        self.current: tuple[int, str] | None = None
        self.lines: list[str] = []

    def heading(self, level: int, text: str) -> None:
        self.flush()
        self.current = (level, text)

    def flush(self) -> None:
        body = re.sub(r"\n{3,}", "\n\n", "\n".join(self.lines)).strip()
        self.lines = []
        if self.current is None:
            if not body:
                return
            self.current = (1, self.doc_title)
        level, heading = self.current
        self.current = None
        first = not self.chunks and level == 1
        base = self.key if first else f"{self.key}#{slug(heading)}"
        cid, n = base, 2
        while cid in self.used:
            cid, n = f"{base}-{n}", n + 1
        self.used.add(cid)
        self.path = [(lv, h) for lv, h in self.path if lv < level] + [(level, heading)]
        title = " > ".join(h for _, h in self.path)
        self.chunks.append(Chunk(cid, heading, title, level, body, self.source))


def chunk_markdown(text: str, key: str, source: str) -> list[Chunk]:
    sections = _Sections(key, source, Path(source).name)
    fence = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = None if fence and stripped.startswith(fence) else (fence or stripped[:3])
        match = None if fence else re.match(r"^(#{1,3})\s+(.+?)\s*#*\s*$", line)
        if match:
            sections.heading(len(match.group(1)), match.group(2))
        else:
            sections.lines.append(line)
    sections.flush()
    return sections.chunks


def chunk_text(text: str, key: str, source: str) -> list[Chunk]:
    name = Path(source).name
    parts, current = [], ""
    for paragraph in re.split(r"\n\s*\n", text):
        if current and len(current) + len(paragraph) > TEXT_PART_CHARS:
            parts.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current.strip() or not parts:
        parts.append(current)
    sections = _Sections(key, source, name)
    for n, part in enumerate(parts, 1):
        sections.heading(1 if n == 1 else 2, name if n == 1 else f"part {n}")
        sections.lines.append(part)
    sections.flush()
    return sections.chunks


class _HtmlChunker(HTMLParser):
    SKIP = {"script", "style", "noscript", "template", "svg", "nav", "head"}
    BLOCK = {"p", "div", "li", "ul", "ol", "pre", "tr", "table", "br", "dt", "dd", "h4", "h5", "h6", "section",
             "blockquote", "article"}

    def __init__(self, key: str, source: str):
        super().__init__(convert_charrefs=True)
        self.sections = _Sections(key, source, Path(source).name)
        self.skip_depth = 0
        self.heading_level = 0
        self.heading_text: list[str] = []
        self.title: list[str] | None = None
        self.buffer: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self.title = []
        elif tag in self.SKIP:
            self.skip_depth += 1
        elif tag in ("h1", "h2", "h3") and not self.skip_depth:
            self._flush_text()
            self.heading_level, self.heading_text = int(tag[1]), []
        elif tag in self.BLOCK:
            self.buffer.append("\n")

    def handle_endtag(self, tag):
        if tag == "title" and self.title is not None:
            self.sections.doc_title = " ".join("".join(self.title).split()) or self.sections.doc_title
            self.title = None
        elif tag in self.SKIP:
            self.skip_depth = max(0, self.skip_depth - 1)
        elif self.heading_level and tag == f"h{self.heading_level}":
            heading = " ".join("".join(self.heading_text).split()).rstrip("¶#\uf0c1 ")
            self.sections.heading(self.heading_level, heading or "section")
            self.heading_level = 0
        elif tag in self.BLOCK:
            self.buffer.append("\n")

    def handle_data(self, data):
        if self.title is not None:
            self.title.append(data)
        elif self.skip_depth:
            return
        elif self.heading_level:
            self.heading_text.append(data)
        else:
            self.buffer.append(data)

    def _flush_text(self) -> None:
        lines = (" ".join(line.split()) for line in "".join(self.buffer).splitlines())
        self.sections.lines.append("\n".join(line for line in lines if line))
        self.buffer = []

    def chunks(self) -> list[Chunk]:
        self._flush_text()
        self.sections.flush()
        return self.sections.chunks


def chunk_html(text: str, key: str, source: str) -> list[Chunk]:
    parser = _HtmlChunker(key, source)
    parser.feed(text)
    parser.close()
    return parser.chunks()


def chunk_file(path: Path, key: str) -> list[Chunk]:
    """Chunks of one file; raises ValueError for binary or non-UTF-8 content, OSError if unreadable."""
    data = path.read_bytes()
    if b"\x00" in data[:65536]:
        raise ValueError("binary content (NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    kind = SUFFIXES[path.suffix.lower()]
    chunker = {"markdown": chunk_markdown, "text": chunk_text, "html": chunk_html}[kind]
    return chunker(text, key, str(path))
