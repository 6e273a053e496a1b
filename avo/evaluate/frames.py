"""Tensors between the evaluation worker and avo: a frame is one JSON header line, then `nbytes` raw bytes.

The references of the check suite come to avo this way from a process no candidate ever runs in, and each
candidate's check outputs from the worker, so that the outputs are compared where the candidate cannot reach
(judge.py). The reader trusts nothing it is sent: a header must be a JSON object of at most MAX_HEADER bytes, a
payload at most the size the reader allows, and anything else ends the stream as malformed.
"""

from __future__ import annotations

import json
import os
from typing import Any, BinaryIO

MAX_HEADER = 1 << 16


class Malformed(Exception):
    """The stream is not a sequence of frames (a forgery, or a writer that died mid-frame)."""


def write(fd: int, header: dict, payload: Any = b"") -> None:
    """One frame on `fd` (blocking until the reader has taken it); `payload` is bytes or a buffer."""
    view = memoryview(payload).cast("B")
    message = (json.dumps(dict(header, nbytes=view.nbytes)) + "\n").encode()
    _write_all(fd, memoryview(message))
    _write_all(fd, view)


def _write_all(fd: int, view: memoryview) -> None:
    while view.nbytes:
        view = view[os.write(fd, view):]


def tensor_bytes(tensor: Any) -> Any:
    """A tensor's elements as a flat byte buffer on the host (bfloat16 included, which NumPy does not know)."""
    import torch

    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy() if flat.numel() else b""


def tensor_from(payload: bytes | bytearray, dtype: str, shape: list[int]) -> Any:
    """The tensor a frame's payload holds; Malformed if its size is not that of `shape` in `dtype`."""
    import math

    import torch

    kind = getattr(torch, dtype, None)
    if not isinstance(kind, torch.dtype):
        raise Malformed(f"unknown dtype {dtype!r}")
    count = math.prod(shape)
    if len(payload) != count * kind.itemsize:
        raise Malformed(f"{len(payload)} bytes for a {tuple(shape)} {dtype} tensor")
    if count == 0:
        return torch.empty(shape, dtype=kind)
    return torch.frombuffer(bytearray(payload), dtype=kind).reshape(shape)


def read(stream: BinaryIO, max_payload: int) -> tuple[dict, bytes] | None:
    """The next frame, or None at the end of the stream; Malformed for anything that is not a frame."""
    line = stream.readline(MAX_HEADER + 1)
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise Malformed("a header line longer than allowed, or cut short")
    try:
        header = json.loads(line)
        nbytes = header["nbytes"]
    except (ValueError, KeyError, TypeError):
        raise Malformed("a header that is not a frame's") from None
    if not isinstance(header, dict) or not isinstance(nbytes, int) or not 0 <= nbytes <= max_payload:
        raise Malformed(f"a payload of {nbytes!r} bytes where at most {max_payload} are allowed")
    payload = stream.read(nbytes)
    if len(payload) != nbytes:
        raise Malformed("a payload cut short")
    return header, payload
