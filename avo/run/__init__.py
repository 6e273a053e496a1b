"""A run on disk: its directory, lock, transcript, lineage, and export/import.

- `directory.py`: Run: `runs/<id>/` (run.json, evals, workspace, notes), its state and counters; `list_runs`.
- `lock.py`: one process drives a run at a time (an flock the kernel releases on any exit).
- `transcript.py`: the append-only event log, flushed and fsynced per event; a torn last line is dropped.
- `lineage/`: the bare git repository of every candidate.
- `archive.py`: `avo export` / `avo import` (a git bundle of all refs plus the run's files).
"""
