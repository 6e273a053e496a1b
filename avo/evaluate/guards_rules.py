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
    "runtime.output_type": "the output is not a plain torch.Tensor",
    "runtime.input_mutated": "the inputs changed during the call",
    "runtime.thread": "the candidate started a thread",
    "runtime.timer_patched": "a timer, synchronization or scoring function was replaced",
    "runtime.side_stream": "work was still running on another stream when the clock stopped",
    "runtime.file_access": "the candidate wrote outside its folder or started a process",
}


class Rejection(Exception):
    """A guard's verdict: `rule` is one of RULES, `message` says what was seen and where (file:line or stage)."""

    def __init__(self, rule: str, message: str):
        if not message.startswith(f"{rule}:"):
            message = f"{rule}: {message}"  # every message opens with its rule, as the agent reads it
        super().__init__(message)
        self.rule, self.message = rule, message
