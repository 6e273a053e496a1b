"""`avo report`: a run's figures and summary, from its lineage, evaluations and transcript.

- `build.py`: what a report shows (points, budget, provenance, per-case rows), gathered once; `write_report`.
- `plots.py`: fitness, per-case and status figures (matplotlib, Agg canvas), each naming its provenance.
- `markdown.py`: report.md.
The HTML pages of the same data are in avo/web/.
"""
