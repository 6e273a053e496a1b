"""Rejection: how a guard says no. One rule id per kind of cheat; the message names the file and line (or the stage)."""

from __future__ import annotations

RULES: dict[str, str] = {
    "static.library_call": "calls the task's reference or library path (cuBLAS, cuDNN, SDPA, softmax, @), however "
    "spelled",
    "static.forbidden_import": "imports a module a kernel has no business with (processes, sockets, ctypes, threads, "
    "pickle, the evaluator) or reaches modules by a computed name",
    "static.file_access": "reads or writes a path outside the candidate's folder",
    "static.runtime_compile": "compiles code at run time other than through CuPy RawModule/RawKernel or Triton",
    "static.torch_fallback": "an except handler falls back to a torch op",
    "runtime.library_op": "a compute op of the task's reference was dispatched during the candidate's call",
    "runtime.torch_op": "under ops=strict, a torch compute op (anything but allocation, views and copies) was "
    "dispatched during the candidate's call",
    "runtime.output_type": "the output is not a plain torch.Tensor",
    "runtime.input_mutated": "the inputs changed during the call",
    "runtime.thread": "the candidate started a thread",
    "runtime.timer_patched": "a timer, synchronization or scoring function was replaced",
    "runtime.side_stream": "work was still running on another stream when the clock stopped",
    "runtime.file_access": "the candidate wrote outside its folder or started a process",
    "static.no_kernel": "the candidate defines no kernel of its own (no @triton.jit function, no CUDA source)",
}

OPS_POLICIES: dict[str, str] = {
    "strict": "every compute op is the candidate's own",
    "partial": "torch compute ops allowed for the parts the candidate does not replace",
}
"""How much of the task's compute a candidate must do itself (`ops=` in a KernelBench spec, `--ops`)."""

WAIVED: dict[str, frozenset[str]] = {
    # Strict waives nothing: no torch compute op may run in the candidate's call (runtime.OWN_WORK lists what may),
    # and it must define a kernel of its own, so it is never looser than partial.
    "strict": frozenset(),
    # KernelBench's warning-level setting: torch ops and nn layers on the forward path are allowed (the candidate
    # is still scored against the whole Model), but it must define a kernel of its own, or Model unchanged would
    # pass. Library packages outside torch stay forbidden (cuBLAS through CuPy, flash-attn: the op recorder cannot
    # see them), and so do fallbacks in except handlers and the timer, stream, thread, lazy-output and caching
    # cheats: those are rules of their own, never waived.
    "partial": frozenset({"static.library_call:torch", "runtime.library_op", "runtime.torch_op"}),
}
"""Per policy: the checks it waives, as `rule` or `rule:kind` (a static finding's kind, e.g. 'torch')."""


def waived(ops: str, check: str) -> bool:
    """Whether policy `ops` lets `check` (a rule id, or `rule:kind`) pass."""
    return check in WAIVED[ops]


class Rejection(Exception):
    """A guard's verdict: `rule` is one of RULES, `message` says what was seen and where (file:line or stage)."""

    def __init__(self, rule: str, message: str):
        if not message.startswith(f"{rule}:"):
            message = f"{rule}: {message}"  # every message opens with its rule, as the agent reads it
        super().__init__(message)
        self.rule, self.message = rule, message
