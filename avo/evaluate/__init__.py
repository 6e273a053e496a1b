"""Is a candidate correct, and how fast: scored in an isolated child process (see harness.py)."""
