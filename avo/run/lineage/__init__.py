"""The lineage: one bare git repository per run, one commit per candidate, failures included.

- `repo.py`: Lineage: commit, accept, tags `baseline` and `best`, refs per candidate, log, diff, checkout.
- `records.py`: what a commit holds and says: candidate ids, `avo.json`, the message and its `Avo-*` trailers.
- `objects.py`: a candidate's git objects (tree, commit) written directly.
- `gitcmd.py`: `run_git`, the one way git runs on a lineage: avo's config, fixed settings, no drivers, no secrets.
"""
