"""Matrix multiply: c = a @ b with a [M, K], b [K, N], bf16 in and out, fp32 accumulation, any M, N, K >= 1.

The bench suite holds four shapes from LLM layers: 4096³, 8192³, 8192×14336×4096 and 16384×4096×4096 (M×N×K).
The wide suite holds the shapes models run: M from 64 to 16384 tokens against the four linear layers of a 70B-class
model (hidden 8192, 64 query heads, 8 KV heads of 128, intermediate 28672), 20 shapes.
"""

from __future__ import annotations

from avo.errors import UserError
from avo.tasks.base import Case
from avo.tasks.cases import gemm_case as _case
from avo.tasks.workload import Workload, with_workload
from avo.util.shipped import shipped_dir

# Relative-norm bounds, measured on CPU (float64 reference) over M, N, K from 1 to 8192 (odd, tall, skinny):
#   honest kernel (fp32 accumulation in any order, output rounded): bf16 <= 0.0017, fp16 <= 0.00026;
#   a and b through float8_e4m3fn: >= 0.036 (one 1x1x1 product aside); only a through e4m3: >= 0.025;
#   fp16 inputs rounded to bf16 on an fp16 task: 0.0024.
# So 0.01 (bf16) and 0.002 (fp16) leave 6x and 7x headroom over honest kernels and reject any fp8 path.
TOLERANCE = {"bfloat16": 0.01, "float16": 0.002}

WIDE_TOKENS = (64, 256, 1024, 4096, 16384)
# N x K of a 70B-class model's linear layers: qkv (64 + 2 * 8 heads of 128), o, gate and up (fused), down.
WIDE_LAYERS = ((10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672))


class GemmTask:
    name = "gemm"
    entry = "gemm"
    compile_ahead = True
    """Its wrappers run on meta tensors, so their Triton kernels can be compiled ahead
    (evaluate/worker/precompile.py)."""

    def __init__(self, workload: Workload | None = None) -> None:
        self.workload = workload
        """The user's cases, timed instead of the bench suite (tasks/workload.py)."""

    def cases(self, suite: str) -> list[Case]:
        return with_workload(self.workload, suite, self.suite_cases)

    def suite_cases(self, suite: str) -> list[Case]:
        """The built-in suites, whatever the workload."""
        if suite == "bench":
            return [_case(4096, 4096, 4096), _case(8192, 8192, 8192), _case(8192, 14336, 4096),
                    _case(16384, 4096, 4096)]
        if suite == "wide":
            return [_case(m, n, k) for m in WIDE_TOKENS for n, k in WIDE_LAYERS]
        if suite == "check":
            # M×N×K; none of the odd sizes is a multiple of any tile edge, and K crosses several K-tiles.
            return [
                _case(1, 1, 1),
                _case(7, 33, 17),
                _case(33, 127, 255),
                _case(127, 255, 1000),
                _case(255, 1000, 127),
                _case(1000, 7, 4100),
                _case(4096, 33, 100),
                _case(1, 4096, 1000),
                _case(1000, 1000, 1000, "float16"),
                _case(512, 768, 2048),
                # Long K with few tiles: where a kernel splits K and reduces partial tiles (few rows, and more).
                _case(33, 520, 16392),
                _case(130, 264, 16392),
            ]
        if suite == "tiny":
            # fp16 on purpose: Triton 3.9's interpreter computes tl.dot wrongly on bf16 operands (fp16 is right).
            return [
                _case(1, 1, 1, "float16"),
                _case(7, 33, 17, "float16"),
                _case(65, 40, 100, "float16"),
                _case(130, 257, 70, "float16"),
            ]
        raise UserError(f"unknown suite '{suite}': use check, bench, wide or tiny")

    def make_inputs(self, case: Case, seed: int, device: str) -> tuple:
        import torch

        p = case.params
        dtype = getattr(torch, case.dtype)
        gen = torch.Generator(device=device).manual_seed(seed)
        a = torch.randn((p["M"], p["K"]), generator=gen, device=device, dtype=dtype)
        b = torch.randn((p["K"], p["N"]), generator=gen, device=device, dtype=dtype)
        return a, b

    def call(self, entry, inputs: tuple):
        return entry(*inputs)

    def reference(self, a, b):
        """a @ b in float32 with TF32 off on a GPU, float64 on the CPU."""
        import torch

        compute = torch.float64 if a.device.type == "cpu" else torch.float32
        tf32 = torch.backends.cuda.matmul.allow_tf32
        if tf32:
            torch.backends.cuda.matmul.allow_tf32 = False
        try:
            return torch.matmul(a.to(compute), b.to(compute))
        finally:
            if tf32:
                torch.backends.cuda.matmul.allow_tf32 = True

    def library(self, a, b):
        import torch

        return torch.matmul(a, b)

    def library_name(self) -> str:
        try:
            import torch

            if torch.cuda.is_available():
                return "cublas (torch.matmul)"
        except Exception:
            pass
        return "torch.matmul (cpu)"

    def flops(self, case: Case) -> float:
        p = case.params
        return 2.0 * p["M"] * p["N"] * p["K"]

    def bytes(self, case: Case) -> float:
        p = case.params
        elem = 2 if case.dtype in ("bfloat16", "float16") else 4
        return float(elem * (p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"]))

    def tolerance(self, dtype: str) -> float:
        if dtype not in TOLERANCE:
            raise UserError(f"gemm has no tolerance for dtype '{dtype}': use bfloat16 or float16")
        return TOLERANCE[dtype]

    def output_like(self, case: Case, inputs: tuple) -> tuple[tuple[int, ...], str]:
        p = case.params
        return (p["M"], p["N"]), case.dtype

    def default_seed(self) -> str:
        return str(shipped_dir("kernels") / "gemm" / "triton_tiled")
