"""The docs tools: `search_docs` (ranked sections of the notes and the user's documents) and `read_doc` (one section
by id), over avo.docs."""

from __future__ import annotations

from dataclasses import asdict

from pydantic import Field

from avo.agent.tools.base import Tool, ToolArgs, ToolContext, ToolError
from avo.docs import library as docs
from avo.errors import UserError

READ_LIMIT = 12000
"""Characters of a section returned at once; longer sections list their subsection ids instead."""


class SearchDocsArgs(ToolArgs):
    query: str = Field(min_length=1, description="What you want to know, in plain words "
                       "(e.g. 'shared memory per SM on H100', 'triton num_stages').")
    k: int = Field(5, ge=1, le=20, description="How many hits to return.")


class ReadDocArgs(ToolArgs):
    id: str = Field(min_length=1, description="A section id from search_docs (e.g. 'hopper#tma-and-mbarrier'), "
                    "or a file key such as 'hopper' for the whole file.")


def search_docs(ctx: ToolContext, args: SearchDocsArgs):
    """Search the kernel-engineering notes (Hopper and Blackwell hardware, PTX, Triton, attention and GEMM
    playbooks, Nsight Compute metrics) and any documents the user indexed. Returns ranked section ids with titles
    and snippets; read a section with read_doc."""
    hits = docs.search(args.query, args.k)
    data = {"query": args.query, "hits": [asdict(h) for h in hits]}
    if not hits:
        return f"No docs match {args.query!r}; try other words.", data
    lines = [f"{n}. {h.id} ({h.title}; score {h.score:.1f})\n   {h.snippet}" for n, h in enumerate(hits, 1)]
    return "\n".join(lines), data


def read_doc(ctx: ToolContext, args: ReadDocArgs):
    """Read one docs section by its id from search_docs, with its subsections; a file key reads the whole file."""
    try:
        section = docs.read(args.id)
    except UserError as exc:
        raise ToolError(str(exc)) from None
    text, truncated = section.text, len(section.text) > READ_LIMIT
    if truncated:
        text = (text[:READ_LIMIT] + "\n\n[cut here; read the subsections by id: "
                + ", ".join(section.ids[1:]) + "]")
    data = {"id": section.id, "title": section.title, "text": section.text, "ids": section.ids,
            "source": section.source, "truncated": truncated}
    return f"{section.title}  [{section.id}]\n\n{text}", data


def tools() -> list[Tool]:
    return [Tool("search_docs", SearchDocsArgs, search_docs), Tool("read_doc", ReadDocArgs, read_doc)]
