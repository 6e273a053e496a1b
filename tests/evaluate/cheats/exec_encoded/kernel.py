"""Cheat (beyond the list): execute base64-encoded source through `exec` fetched from a builtins table under a
computed key, so the source shows neither `exec` nor a library call.
Expected: rejected, runtime.library_op (the decoded code's `@` dispatches aten.mm).
"""

import base64

import torch

# "def gemm(a, b):\n    return (a.float() @ b.float()).to(a.dtype)\n"
_SOURCE = "ZGVmIGdlbW0oYSwgYik6CiAgICByZXR1cm4gKGEuZmxvYXQoKSBAIGIuZmxvYXQoKSkudG8oYS5kdHlwZSkK"
_TABLE = getattr(torch, bytes.fromhex("5f5f6275696c74696e735f5f").decode())  # the module's builtins dict
_RUN = _TABLE[bytes.fromhex("65786563").decode()]
_space = {}
_RUN(base64.b64decode(_SOURCE).decode(), _space)
gemm = _space["gemm"]
