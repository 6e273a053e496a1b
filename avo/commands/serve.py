"""`avo serve [RUN ...]`: the runs as a local, read-only web app that follows live runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from avo.errors import UserError


def serve(
    runs: Optional[List[str]] = typer.Argument(None, help="Runs to show (id, path or 'latest'); default: every run "
                                                          "in --runs-dir, new ones included."),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Folder holding the runs."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on. Anything but loopback lets others "
                                                         "on the network read the runs."),
    port: int = typer.Option(8765, "--port", help="Port to listen on (0: any free port)."),
    verbose: bool = typer.Option(False, "--verbose", help="Log every request."),
) -> None:
    """Runs, their fitness over time, the lineage tree and every candidate (diffs, cases, turns) in a browser."""
    from avo.web.server import LOOPBACK, Site, make_server

    if not 0 <= port <= 65535:
        raise UserError(f"--port {port} is not a port: use 0 to 65535")
    if not runs and not runs_dir.is_dir():
        raise UserError(f"no runs folder {runs_dir} (start a run with: avo evolve, or pass --runs-dir)")
    site = Site(runs_dir, runs or None)
    server = make_server(site, host, port, quiet=not verbose)
    if host not in LOOPBACK:
        print(f"avo: warning: listening on {host}: anyone who can reach this machine can read these runs (code, "
              "rationales, transcripts)", file=sys.stderr)
    shown = f"{len(site.fixed)} run(s)" if site.fixed is not None else f"the runs in {runs_dir}"
    address = f"[{host}]" if ":" in host else host
    print(f"serving {shown} at http://{address}:{server.server_address[1]}/ (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
