"""The base class of the evaluator's dispatch modes: the op recorder, the allocation poisoner, the Sentinel's warm-up.

torch wraps each TorchDispatchMode subclass's `__torch_dispatch__` in its dynamo-disabling decorator, whose first
call imports torch._dynamo: about 0.9 s of CPU in every worker process, on the set-up's path of every evaluation.
The wrapper only matters while torch.compile traces with a mode on (it keeps dynamo out of the mode's own frames);
without it, a candidate that calls torch.compile under the recorder still runs and has its ops recorded. Where a
candidate does import torch._dynamo, torch then rebinds a few of its functions (torch.manual_seed) to wrappers of
themselves, which the Sentinel tells from a candidate's replacement (`sentinel._same_function`).
"""

from __future__ import annotations

import functools


@functools.cache
def evaluator_mode() -> type:
    """A TorchDispatchMode subclass whose subclasses keep their `__torch_dispatch__` as written."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class EvaluatorMode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

    return EvaluatorMode
