"""Forward attention: o = softmax(q kᵀ · sm_scale, causal mask optional) v, with grouped-query heads.

q is [B, Hq, S, D], k and v are [B, Hkv, S, D] with Hq % Hkv == 0 (query head h reads kv head h // (Hq // Hkv));
any S >= 1, D in {64, 128}, bf16 or fp16. The bench suite is the AVO paper's: D = 128, 32768 tokens per batch
(B = 32768 / S), MHA 16/16 and GQA 32/8 and 32/4, causal and not. The wide suite holds the shapes models run:
D 64 and 128, S 512 to 16384, MHA 16/16 and GQA 32/8, causal and not, also 32768 tokens per batch (48 cases).
"""

from __future__ import annotations

import math
import warnings

from avo.errors import UserError
from avo.tasks.base import Case
from avo.tasks.cases import attention_case as _case
from avo.tasks.workload import Workload, with_workload
from avo.util.shipped import shipped_dir

TOKENS = 32768
BENCH_SEQLENS = (4096, 8192, 16384, 32768)
BENCH_HEADS = ((16, 16), (32, 8), (32, 4))
WIDE_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
WIDE_HEADS = ((16, 16), (32, 8))
WIDE_HEAD_DIMS = (64, 128)

# Relative-norm bounds, measured on CPU (float64 reference) over S in {1, 17, 100, 257, 300, 1000, 2048},
# D 64/128, GQA, causal and not, input magnitude 1 and 6:
#   honest kernel (fp32 scores and row sums, P cast to the input dtype for PV, output rounded):
#     bf16 <= 0.0023, fp16 <= 0.00028 (rounding the exact output alone gives 0.0017 / 0.0002);
#   q, k, v through float8_e4m3fn (with or without a per-tensor scale): >= 0.040 at magnitude 1, 0.18 at 6;
#   only v through e4m3: >= 0.026.
# So 0.01 (bf16) and 0.002 (fp16) leave 4x and 7x headroom over honest kernels and reject any fp8 path.
TOLERANCE = {"bfloat16": 0.01, "float16": 0.002}

# Raw logits of the large-magnitude check case: q and k scaled by 6 give logits with std 36 and row maxima
# past 88, where exp() overflows float32 unless the row maximum is subtracted first.
LARGE_MAGNITUDE = 6.0

# Float32 elements per chunk of scores in the reference (1 GiB): the bench shapes never materialize S x S.
REFERENCE_CHUNK_ELEMENTS = 1 << 28


def attention_reference(q, k, v, causal: bool, sm_scale: float, *, chunk_elements: int = REFERENCE_CHUNK_ELEMENTS):
    """Exact attention in float32 (CUDA) or float64 (CPU), one block of query rows at a time.

    Query heads are grouped under their kv head (a view, no copy), so a chunk of rows of all query heads is one
    batched matmul against k; for causal chunks only the keys up to the chunk's last row are read.

    On CUDA with bf16/fp16 inputs the matmuls run on TF32 tensor cores at float32 accuracy (tested: within 1e-5 of
    the float32 CUDA-core result, against tolerances of 2e-3 and more): q, k and v
    hold at most 11 significant bits, which TF32 represents exactly, and TF32 products accumulate in float32; the
    probabilities are split into a bf16-exact high part and a remainder below 2^-8 of it (whose TF32 rounding costs
    under 2^-19), multiplied by v separately. Other inputs keep TF32 off. (Several times faster than float32 on the
    CUDA cores, which took seconds per call on the 32k-token bench shapes.)
    """
    import torch

    compute = torch.float64 if q.device.type == "cpu" else torch.float32
    split = q.device.type == "cuda" and all(x.dtype in (torch.bfloat16, torch.float16) for x in (q, k, v))
    b, hq, s, d = q.shape
    hkv = k.shape[1]
    group = hq // hkv
    out = torch.empty((b, hq, s, d), dtype=compute, device=q.device)
    rows = max(1, min(s, chunk_elements // max(1, b * hq * s)))
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = split
    try:
        qg = q.view(b, hkv, group, s, d)
        og = out.view(b, hkv, group, s, d)
        kf, vf = k.to(compute), v.to(compute)
        for start in range(0, s, rows):
            stop = min(s, start + rows)
            keys = stop if causal else s
            kc, vc = kf[:, :, :keys], vf[:, :, :keys]
            qc = qg[:, :, :, start:stop].to(compute).reshape(b, hkv, group * (stop - start), d)
            scores = torch.matmul(qc, kc.transpose(-1, -2)).mul_(sm_scale)
            if causal:
                row_pos = torch.arange(start, stop, device=q.device).repeat(group)
                key_pos = torch.arange(keys, device=q.device)
                scores.masked_fill_(key_pos[None, :] > row_pos[:, None], float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            del scores
            if split:
                high = probs.to(torch.bfloat16).to(compute)
                chunk = torch.matmul(high, vc)
                chunk += torch.matmul(probs.sub_(high), vc)
                del high
            else:
                chunk = torch.matmul(probs, vc)
            del probs
            og[:, :, :, start:stop] = chunk.view(b, hkv, group, stop - start, d)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return out


class AttentionTask:
    name = "attention"
    entry = "attention"
    compile_ahead = True
    """Its wrappers run on meta tensors, so their Triton kernels can be compiled ahead
    (evaluate/worker/precompile.py)."""

    def __init__(self, workload: Workload | None = None) -> None:
        self._library_paths: dict[tuple, str] = {}
        self._last_library = ""
        self.workload = workload
        """The user's cases, timed instead of the bench suite (tasks/workload.py)."""

    def cases(self, suite: str) -> list[Case]:
        return with_workload(self.workload, suite, self.suite_cases)

    def suite_cases(self, suite: str) -> list[Case]:
        """The built-in suites, whatever the workload."""
        if suite == "bench":
            return [
                _case(TOKENS // s, hq, hkv, s, 128, causal)
                for hq, hkv in BENCH_HEADS
                for s in BENCH_SEQLENS
                for causal in (False, True)
            ]
        if suite == "wide":
            return [
                _case(TOKENS // s, hq, hkv, s, d, causal)
                for d in WIDE_HEAD_DIMS
                for hq, hkv in WIDE_HEADS
                for s in WIDE_SEQLENS
                for causal in (False, True)
            ]
        if suite == "check":
            # No S below is a multiple of 16, so every tile size meets a ragged edge.
            return [
                _case(1, 4, 4, 1, 64, False),
                _case(2, 4, 2, 1, 128, True),
                _case(2, 4, 4, 17, 64, True, "float16"),
                _case(1, 8, 2, 100, 128, False),
                _case(2, 6, 3, 257, 64, False, "float16"),
                _case(1, 8, 1, 257, 128, True),
                _case(1, 4, 4, 1000, 64, True),
                _case(1, 8, 2, 1000, 128, False, "float16"),
                _case(1, 8, 4, 1000, 128, True),
                _case(1, 4, 2, 300, 128, False, magnitude=LARGE_MAGNITUDE),
                _case(1, 4, 2, 300, 128, True, "float16", magnitude=LARGE_MAGNITUDE),
            ]
        if suite == "tiny":
            # fp16 on purpose: Triton 3.9's interpreter computes tl.dot wrongly on bf16 operands (fp16 is right).
            return [
                _case(1, 2, 2, 1, 64, False, "float16"),
                _case(1, 2, 1, 17, 64, True, "float16"),
                _case(2, 4, 2, 40, 64, False, "float16"),
                _case(1, 2, 2, 33, 128, True, "float16"),
                _case(1, 2, 1, 70, 64, False, "float16", magnitude=LARGE_MAGNITUDE),
                # Longer than the seeds' query tiles: off-diagonal blocks, a diagonal part and a ragged tail.
                _case(1, 2, 1, 300, 64, True, "float16"),
                _case(1, 2, 2, 200, 64, False, "float16"),
            ]
        raise UserError(f"unknown suite '{suite}': use check, bench, wide or tiny")

    def make_inputs(self, case: Case, seed: int, device: str) -> tuple:
        import torch

        p = case.params
        dtype = getattr(torch, case.dtype)
        gen = torch.Generator(device=device).manual_seed(seed)
        q = torch.randn((p["B"], p["Hq"], p["S"], p["D"]), generator=gen, device=device, dtype=dtype)
        k = torch.randn((p["B"], p["Hkv"], p["S"], p["D"]), generator=gen, device=device, dtype=dtype)
        v = torch.randn((p["B"], p["Hkv"], p["S"], p["D"]), generator=gen, device=device, dtype=dtype)
        if p["magnitude"] != 1.0:
            q.mul_(p["magnitude"])
            k.mul_(p["magnitude"])
        return q, k, v, p["causal"], 1.0 / math.sqrt(p["D"])

    def call(self, entry, inputs: tuple):
        return entry(*inputs)

    def reference(self, q, k, v, causal, sm_scale):
        return attention_reference(q, k, v, causal, sm_scale)

    def timed_reference(self, q, k, v, causal, sm_scale):
        """What outputs on the bench shapes are checked against: on a GPU the library's output (within 0.003 of the
        exact reference there, against a tolerance of 0.01; the exact one took 0.6 s per call at 32k tokens in
        float32), on the CPU the exact reference. A timed output that is stale or cached is off by far more."""
        if q.device.type != "cuda":
            return self.reference(q, k, v, causal, sm_scale)
        return self.library(q, k, v, causal, sm_scale).float()

    def library(self, q, k, v, causal, sm_scale):
        """SDPA as a user would call it: cuDNN on a GPU when it takes the shape, else torch's own choice."""
        import torch.nn.functional as F

        gqa = q.shape[1] != k.shape[1]
        if q.device.type != "cuda":
            self._last_library = f"torch sdpa ({q.device.type})"
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale, enable_gqa=gqa)
        key = (q.shape[1], k.shape[1], q.shape[2], q.shape[3], q.dtype, causal)
        path = self._library_paths.get(key)
        if path:
            self._last_library = path
            return self._sdpa(path, q, k, v, causal, sm_scale, gqa)
        attempts = ["cudnn sdpa", "cudnn sdpa (k/v repeated for GQA)", "torch sdpa (default)"]
        # A backend that declines a shape explains why in UserWarnings before raising: expected while probing.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            for attempt in attempts:
                if attempt == "cudnn sdpa (k/v repeated for GQA)" and not gqa:
                    continue
                try:
                    out = self._sdpa(attempt, q, k, v, causal, sm_scale, gqa)
                except RuntimeError:
                    continue
                self._library_paths[key] = self._last_library = attempt
                return out
        raise RuntimeError("no SDPA backend accepted this shape")

    @staticmethod
    def _sdpa(attempt: str, q, k, v, causal: bool, sm_scale: float, gqa: bool):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if attempt == "cudnn sdpa":
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale, enable_gqa=gqa)
        if attempt.startswith("cudnn"):
            group = q.shape[1] // k.shape[1]
            kr, vr = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(q, kr, vr, is_causal=causal, scale=sm_scale)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale, enable_gqa=gqa)

    def library_name(self) -> str:
        if self._last_library:
            return self._last_library
        try:
            import torch

            if torch.cuda.is_available() and torch.backends.cuda.cudnn_sdp_enabled():
                return "cudnn sdpa"
        except Exception:
            pass
        return "torch sdpa"

    def flops(self, case: Case) -> float:
        p = case.params
        total = 4.0 * p["B"] * p["Hq"] * p["S"] * p["S"] * p["D"]
        return total / 2 if p["causal"] else total

    def bytes(self, case: Case) -> float:
        p = case.params
        elem = 2 if case.dtype in ("bfloat16", "float16") else 4
        return float(elem * p["S"] * p["D"] * p["B"] * (2 * p["Hq"] + 2 * p["Hkv"]))

    def tolerance(self, dtype: str) -> float:
        if dtype not in TOLERANCE:
            raise UserError(f"attention has no tolerance for dtype '{dtype}': use bfloat16 or float16")
        return TOLERANCE[dtype]

    def output_like(self, case: Case, inputs: tuple) -> tuple[tuple[int, ...], str]:
        p = case.params
        return (p["B"], p["Hq"], p["S"], p["D"]), case.dtype

    def default_seed(self) -> str:
        return str(shipped_dir("kernels") / "attention" / "triton_fa2")
