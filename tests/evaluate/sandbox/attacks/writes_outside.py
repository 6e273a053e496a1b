# Attack 4: writes outside the candidate's folder, from finalizers on the output tensor, through a shell a torch
# helper starts (so no Python-level file hook sees them): a file in /tmp, one in the home folder's .cache, one
# inside the run's lineage, and the run's notes.md replaced.
import weakref

import torch.utils.collect_env as _collect_env

_TARGETS = ["@TMP_FILE@", "@HOME@/.cache/@TAG@", "@LINEAGE@/@TAG@", "@NOTES@"]


def _scribble():
    _collect_env.run("; ".join(f"echo written from the candidate > {path}" for path in _TARGETS))


def _watched(c):
    weakref.finalize(c, _scribble)
    return c
