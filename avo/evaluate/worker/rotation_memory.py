"""How many input sets the bench stage can keep in rotation on the GPU (timing.InputRotation).

n source sets live beside n + 1 slots the timed calls read, so the rotation holds 2n + 1 copies of the inputs; the
calls' outputs (candidate, library, the spot-checked one and the reference) come on top. A KernelBench problem with
6.4 GB of inputs (23_Softmax at 4096 x 393216 fp32) needs 45 GB for the usual three sets: on a GPU with less free,
the rotation shrinks, down to one set (two slots still alternate, each call's inputs scaled by a factor of its own,
so no result can be cached by address or content), and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass

HEADROOM_BYTES = 2 << 30
"""Left free for the allocator's own slack, the L2 flush buffer and the kernels' workspaces."""
OUTPUT_COPIES = 4
"""Outputs alive while timing: the candidate's, the library's, a spot-checked timed one and its reference."""


@dataclass(frozen=True)
class RotationSize:
    sets: int
    wanted: int
    input_bytes: int
    free_bytes: int | None

    @property
    def reduced(self) -> bool:
        return self.sets < self.wanted

    def note(self, case: str) -> str:
        """One line for the result, saying the rotation was reduced and why."""
        return (f"case {case}: input rotation reduced from {self.wanted} to {self.sets} set(s) to fit GPU memory "
                f"({_gib(self.input_bytes)} per set, {_gib(self.free_bytes or 0)} free)")


def rotation_sets(wanted: int, input_bytes: int, output_bytes: int, free_bytes: int | None) -> RotationSize:
    """The most input sets (at least 1, at most `wanted`) whose rotation, with the outputs and headroom, fits in
    `free_bytes` (None: not on a GPU, no limit). `free_bytes` is measured with one source set already made."""
    wanted = max(1, wanted)
    if free_bytes is None or input_bytes <= 0:
        return RotationSize(wanted, wanted, input_bytes, free_bytes)
    # The first source set exists already; each set adds a slot (and all but the first a source), plus one slot.
    spare = free_bytes - HEADROOM_BYTES - OUTPUT_COPIES * output_bytes - 2 * input_bytes
    more = spare // (2 * input_bytes) if spare > 0 else 0
    return RotationSize(int(max(1, min(wanted, 1 + more))), wanted, input_bytes, free_bytes)


def tensor_bytes(values: tuple) -> int:
    import torch

    return sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor))


def output_bytes(shape: tuple[int, ...], dtype: str) -> int:
    import math

    import torch

    return math.prod(shape) * torch.empty((), dtype=getattr(torch, dtype)).element_size()


def free_gpu_bytes(device: str) -> int | None:
    if device != "cuda":
        return None
    import torch

    return int(torch.cuda.mem_get_info()[0])


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"
