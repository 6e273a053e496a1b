"""`avo docs`: search and read the kernel-engineering notes, and index the user's own documents."""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict

import typer

from avo.errors import UserError

docs_app = typer.Typer(help="Search and read the kernel-engineering docs; add your own documents to the index.",
                       no_args_is_help=True)


class _WarningLine(logging.Handler):
    """Skipped files and cache trouble show as one line each on the stderr of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"avo: warning: {record.getMessage()}", file=sys.stderr)


def _library():
    from avo.docs import library as docs

    if not any(isinstance(h, _WarningLine) for h in docs.log.handlers):
        docs.log.addHandler(_WarningLine(logging.WARNING))
    return docs.library()


@docs_app.command("search")
def search_command(
    query: str = typer.Argument(..., help="What to look for, in plain words."),
    k: int = typer.Option(5, "-k", "--top", help="How many hits to show."),
    as_json: bool = typer.Option(False, "--json", help="Print the hits as JSON."),
) -> None:
    """Rank docs sections for QUERY (shipped notes and your indexed documents)."""
    if not query.strip():
        raise UserError("the query is empty; say what to look for, e.g. avo docs search 'tma multicast'")
    if k < 1:
        raise UserError(f"-k must be at least 1 (got {k})")
    hits = _library().search(query, k)
    if as_json:
        typer.echo(json.dumps([asdict(h) for h in hits], indent=1))
        return
    if not hits:
        typer.echo(f"no docs match {query!r}")
        return
    for n, hit in enumerate(hits, 1):
        typer.echo(f"{n}. {hit.id}  ({hit.score:.2f})\n   {hit.title}\n   {hit.snippet}")


@docs_app.command("show")
def show_command(doc_id: str = typer.Argument(..., metavar="ID", help="A section id, e.g. hopper#tma-and-mbarrier."),
                 ) -> None:
    """Print a docs section (with its subsections); a file key such as `hopper` prints the whole file."""
    section = _library().read(doc_id)
    typer.echo(f"<!-- {section.id}: {section.source} -->\n{section.text}")


@docs_app.command("index")
def index_command(
    paths: list[str] = typer.Argument(None, metavar="PATH...", help="Files or folders (.md, .txt, .html)."),
    reset: bool = typer.Option(False, "--reset", help="Forget previously indexed documents first."),
) -> None:
    """Add your own documents, such as the CUDA toolkit's HTML docs, to the user index searched with the notes."""
    paths = paths or []
    if not paths and not reset:
        raise UserError("name at least one file or folder to index (or --reset to empty the user index)")
    library = _library()
    index = library.add(paths, reset=reset)
    if index is None:
        typer.echo("user index is empty")
        return
    chunks = library.user_chunks(index)
    files = len({c.source for c in chunks})
    typer.echo(f"user index: {files} files, {len(chunks)} sections; {len(index.skipped)} skipped")


@docs_app.command("list")
def list_command() -> None:
    """Section ids per file."""
    for source, ids in _library().listing().items():
        typer.echo(source)
        for doc_id in ids:
            typer.echo(f"  {doc_id}")


def register(app: typer.Typer) -> None:
    app.add_typer(docs_app, name="docs")
