"""The web view of runs: `avo serve` (a local, read-only web app) and `avo report --html` (one self-contained file).

    model.py      what the pages show, read from a run: rows of the runs page, a candidate's turns, profiles, gains
    svg.py        the fitness charts and the lineage tree, drawn as inline SVG on the server (no chart library)
    diffs.py      a diff as a table, each side's code highlighted by Pygments in its own language
    pages.py      Jinja2 templates (autoescaped) -> HTML strings; which link goes where (server or one file)
    server.py     the standard library's HTTP server: fixed routes, security headers, a version endpoint for live pages
    report.py     the run and all its candidates as one HTML file: no script, no network
    templates/ static/   page templates; the stylesheet and the small script that refreshes a page while a run goes on

Everything a candidate or a model wrote reaches the page only through escaping (Jinja2's autoescape, MarkupSafe's
`escape` in the SVG and diff tables, Pygments' formatter for code); the server's pages also forbid inline script by
their Content-Security-Policy, and the report file forbids script altogether.
"""
