"""`avo serve`: the web view over the standard library's threading HTTP server. Read-only, GET and HEAD only.

Only fixed routes answer, and their parts must match the run-id and candidate-id patterns: no request path is ever
joined onto a file-system path, so nothing outside the served runs can be read. Percent-escapes, `..` and
backslashes are refused outright (no page needs them). Bound to loopback, requests must also name a loopback host,
so a web page elsewhere cannot read the runs through DNS rebinding.

    /                     the runs                       /run/<id>/         a run
    /run/<id>/<cid>       a candidate                    /static/<file>     stylesheet, live-update script
    /api/version?page=P   a token that changes when what page P shows changes (polled by live.js)
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

from avo.errors import UserError
from avo.run.directory import Run, list_runs
from avo.web import model, pages

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_RUN = re.compile(rf"/run/({_ID})/?")
_CANDIDATE = re.compile(rf"/run/({_ID})/(c\d{{4,}})")
_HOST = re.compile(r"(?:\[::1\]|127\.0\.0\.1|localhost)(?::\d+)?", re.I)
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
PAGES_KEPT = 64
"""Rendered run and candidate pages kept, keyed by path and version (oldest dropped first)."""
STATIC = {"avo.css": ("text/css; charset=utf-8", pages.stylesheet),
          "live.js": ("text/javascript; charset=utf-8", pages.live_script)}


class Site:
    """What is served: the runs named at start, or every run in `runs_dir` as it is at each request."""

    def __init__(self, runs_dir: Path, refs: list[str] | None = None):
        self.runs_dir = Path(runs_dir)
        self.fixed: dict[str, Path] | None = None
        if refs:
            self.fixed = {}
            for ref in refs:
                run = Run.open(ref, self.runs_dir)
                run.close()
                if run.id in self.fixed and self.fixed[run.id] != run.path:
                    raise UserError(f"two runs named '{run.id}' were given; serve them one at a time")
                self.fixed[run.id] = run.path
        self._histories: dict[Path, tuple[tuple, model.History]] = {}
        self._pages: dict[tuple[str, str | None], str] = {}
        self._lock = threading.Lock()

    def runs(self) -> dict[str, Path]:
        if self.fixed is not None:
            return dict(self.fixed)
        return {run.id: run.path for run in list_runs(self.runs_dir)}

    def _stamp(self, path: Path) -> tuple:
        stamp = []
        for name in ("run.json", "transcript.jsonl"):
            try:
                st = (path / name).stat()
                stamp += [st.st_mtime_ns, st.st_size]
            except FileNotFoundError:
                stamp += [0, 0]
        return tuple(stamp)

    def version(self, page: str) -> str | None:
        """Changes whenever what `page` shows may have changed; None for a page that does not exist."""
        runs = self.runs()
        if page == "/":
            key = [(run_id, self._stamp(path)) for run_id, path in sorted(runs.items())]
        else:
            match = _CANDIDATE.fullmatch(page) or _RUN.fullmatch(page)
            if not match or match.group(1) not in runs:
                return None
            key = [self._stamp(runs[match.group(1)])]
        return hashlib.sha256(repr(key).encode()).hexdigest()[:16]

    def history(self, run: Run) -> model.History:
        stamp = self._stamp(run.path)
        with self._lock:
            cached = self._histories.get(run.path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found = model.history(run.events())
        with self._lock:
            self._histories[run.path] = (stamp, found)
        return found

    def respond(self, target: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a request target."""
        path, _, query = target.partition("?")
        if "%" in path or ".." in path or "\\" in path or "//" in path:
            return _text(HTTPStatus.BAD_REQUEST, "refused: this server has no paths with escapes or '..'")
        if path.startswith("/static/"):
            found = STATIC.get(path[len("/static/"):])
            return (200, found[0], found[1]().encode()) if found else _text(HTTPStatus.NOT_FOUND, "not found")
        if path == "/api/version":
            page = (parse_qs(query).get("page") or ["/"])[0]
            version = self.version(page)
            if version is None:
                return _text(HTTPStatus.NOT_FOUND, "no such page")
            return 200, "application/json", json.dumps({"version": version}).encode()
        if path == "/":
            return self._html(pages.runs_page(self._rows(), str(self.runs_dir), self.version("/")))
        match = _CANDIDATE.fullmatch(path) or _RUN.fullmatch(path)
        if not match:
            return _text(HTTPStatus.NOT_FOUND, "not found")
        run_id = match.group(1)
        runs = self.runs()
        if run_id not in runs:
            return _text(HTTPStatus.NOT_FOUND, f"no run '{run_id}' is served here")
        if not path.endswith("/") and match.re is _RUN:
            return HTTPStatus.MOVED_PERMANENTLY, f"/run/{run_id}/", b""
        version = self.version(path)
        with self._lock:
            cached = self._pages.get((path, version))
        if cached is not None:  # several open tabs, or a tab refreshed twice: draw each version of a page once
            return self._html(cached)
        run = Run(runs[run_id])
        try:
            if match.re is _RUN:
                text = pages.run_page(run, version)
            else:
                cid = match.group(2)
                if cid not in run.lineage.cids():
                    return _text(HTTPStatus.NOT_FOUND, f"run {run_id} has no candidate {cid}")
                text = pages.candidate_page(run, cid, self.history(run), version)
        finally:
            run.close()
        with self._lock:
            self._pages[(path, version)] = text
            while len(self._pages) > PAGES_KEPT:
                self._pages.pop(next(iter(self._pages)))
        return self._html(text)

    def _rows(self) -> list[dict]:
        rows = []
        for run_id, path in self.runs().items():
            try:
                run = Run(path)
            except UserError:
                continue
            try:
                rows.append(model.run_row(run))
            except UserError as exc:  # one damaged run must not hide the others
                rows.append({"id": run_id, "task": "?", "gpu": "?", "device": "?", "agent": "?", "state": str(exc),
                             "status": "unreadable", "candidates": "?", "ok": "?", "failed": "?",
                             "best_fitness": None, "started": ""})
            finally:
                run.close()
        return sorted(rows, key=lambda r: (r["started"], r["id"]))

    @staticmethod
    def _html(text: str) -> tuple[int, str, bytes]:
        return 200, "text/html; charset=utf-8", text.encode()


def _text(status: int, message: str) -> tuple[int, str, bytes]:
    return int(status), "text/plain; charset=utf-8", (message + "\n").encode()


def handler_for(site: Site, *, loopback_only: bool, quiet: bool = True) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "avo"
        sys_version = ""

        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            self._answer(body=True)

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(body=False)

        def _answer(self, body: bool) -> None:
            if loopback_only and not _HOST.fullmatch(self.headers.get("Host", "")):
                status, kind, data = _text(HTTPStatus.MISDIRECTED_REQUEST, "refused: not a loopback host name")
            else:
                try:
                    status, kind, data = site.respond(self.path)
                except UserError as exc:
                    status, kind, data = _text(HTTPStatus.NOT_FOUND, str(exc))
                except Exception as exc:  # a page that cannot be drawn must not take the server down
                    print(f"avo serve: {self.path}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    status, kind, data = _text(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {exc}")
            self.send_response(status)
            if status == HTTPStatus.MOVED_PERMANENTLY:
                self.send_header("Location", kind)
                kind = "text/plain"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for name, value in HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            if body:
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the browser left (a new page, a closed tab)
                    pass

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
            if not quiet:
                super().log_message(format, *args)

    return Handler


def make_server(site: Site, host: str = "127.0.0.1", port: int = 8765, quiet: bool = True) -> ThreadingHTTPServer:
    kind = type("Server", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6}) if ":" in host else \
        ThreadingHTTPServer
    try:
        server = kind((host, port), handler_for(site, loopback_only=host in LOOPBACK, quiet=quiet))
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (choose another --port)") from None
    server.daemon_threads = True
    return server
