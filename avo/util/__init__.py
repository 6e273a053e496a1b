"""Small helpers every layer may use; nothing here imports the rest of avo.

- `atomic.py`: files that readers see whole (write to a temp file beside it, fsync, rename).
- `cache.py`: the cache folder (`$AVO_CACHE_DIR`, `$XDG_CACHE_HOME/avo`, `~/.cache/avo`).
- `format.py`: numbers in tables and log lines, and what a missing one reads as.
- `procs.py`: child processes in a session of their own that die with avo, killed as a group on timeout; temp
  folders swept after a crash.
- `safe_files.py`: files of folders a candidate could touch, read and written as regular files only (links and
  special files refused, never followed or opened).
- `secrets.py`: which environment variables are secrets: kept from candidates, redacted from transcripts, never
  passed on by the shell tool.
"""
