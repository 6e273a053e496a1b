"""On a GPU: a small Llama-style block (RMSNorm, GQA attention through SDPA, SwiGLU MLP through nn.Linear) under
the packaged kernels' patch() gives the unpatched block's output within the tasks' tolerance, eager and under
torch.compile, with the evolved kernels doing the work (their call counters say so) unless a shape's first call
timed the library faster (the run never timed these shapes: guard.first_call). The forward is timed against
the unpatched block's, the two taken in turn (alternated_rounds: the GPU's clock drifts between one forward and the next
by as much as the packages change), and printed; nothing is asserted about speed.

Two GEMM packages: the shipped run's best as it is (its kernel.py predates reading nn.Linear's weight.t() in place,
so the linear calls go to cuBLAS rather than through a copy of each weight), and the same package holding today's
gemm/cuda_wgmma seed instead (the run's best is that seed, at an older commit), which reads the weight in place.
scripts/package_block_profile.py profiles the same block."""

from __future__ import annotations

import statistics
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest
from package_runs import ATTENTION_CUDA, GEMM_CUDA, imported, package_with_seed, packaged

from avo.tasks import load, relative_error

pytestmark = pytest.mark.gpu

SEED = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"


class Dims(NamedTuple):
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int


LLAMA_8B = Dims(4096, 32, 8, 128, 14336)
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE = LLAMA_8B
BATCH, SEQ = 2, 2048
TIMED = "timed on this GPU)"
"""How a transposed weight's verdict from its first call's timing ends (slower, or saving less than its host time)."""


def block(dims: Dims = LLAMA_8B, batch: int = BATCH, seq: int = SEQ, *, fused: bool = False):
    """A Llama-style block of `dims` for inputs [batch, seq, hidden], bf16 on the GPU, weights seeded. `fused`: q, k
    and v one linear layer, gate and up another, as serving stacks run them (and avo's workloads time them)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    hidden, heads, kv_heads, head_dim, intermediate = dims
    widths = {"q": heads * head_dim, "k": kv_heads * head_dim, "v": kv_heads * head_dim}

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.RMSNorm(hidden), nn.RMSNorm(hidden)
            if fused:
                self.qkv = nn.Linear(hidden, sum(widths.values()), bias=False)
            else:
                self.q, self.k, self.v = (nn.Linear(hidden, width, bias=False) for width in widths.values())
            self.o = nn.Linear(heads * head_dim, hidden, bias=False)
            if fused:
                self.gate_up = nn.Linear(hidden, 2 * intermediate, bias=False)
            else:
                self.gate = nn.Linear(hidden, intermediate, bias=False)
                self.up = nn.Linear(hidden, intermediate, bias=False)
            self.down = nn.Linear(intermediate, hidden, bias=False)

        def heads(self, x, n):
            return x.reshape(batch, seq, n, head_dim).transpose(1, 2).contiguous()

        def forward(self, x):
            h = self.norm1(x)
            q, k, v = self.qkv(h).split(list(widths.values()), -1) if fused else (self.q(h), self.k(h), self.v(h))
            q, k, v = self.heads(q, heads), self.heads(k, kv_heads), self.heads(v, kv_heads)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + self.o(a.transpose(1, 2).reshape(batch, seq, heads * head_dim))
            h = self.norm2(x)
            gate, up = self.gate_up(h).chunk(2, -1) if fused else (self.gate(h), self.up(h))
            return x + self.down(F.silu(gate) * up)

    torch.manual_seed(0)
    block = Block().to("cuda", torch.bfloat16)
    for linear in block.modules():
        if isinstance(linear, nn.Linear):
            torch.nn.init.normal_(linear.weight, std=linear.in_features ** -0.5)
    return block


def forward_ms(fn, x) -> float:
    import torch

    for _ in range(3):
        fn(x)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


ROUNDS = 5


def under(packages, forward, x):
    """forward(x) with every package's patch() applied."""
    with ExitStack() as stack:
        for package in packages:
            stack.enter_context(package.patch())
        return forward(x)


def alternated_rounds(forward, variants: dict, x) -> dict[str, list[float]]:
    """Each variant's forward ms (name -> the packages patched in) per round, the variants taken in turn ROUNDS times
    (each turn forward_ms's median of 10), so a drift of the GPU's clock falls on all of them alike."""
    times = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, chosen in variants.items():
            times[name].append(under(chosen, lambda y: forward_ms(forward, y), x))
    return times


def paired_ratios(rounds: dict[str, list[float]], base: str = "library") -> dict[str, tuple[float, float, float]]:
    """name -> (lowest, median, highest) of base's ms over the variant's, round by round: how far one forward's
    ratio moves between rounds, beside the ratio of the medians."""
    paired = {name: sorted(b / t for b, t in zip(rounds[base], ms)) for name, ms in rounds.items() if name != base}
    return {name: (ratios[0], statistics.median(ratios), ratios[-1]) for name, ratios in paired.items()}


def build_packages(root: Path) -> dict:
    """{"attention", "gemm", "gemm_seed"}: the packaged bests of the shipped CUDA runs, imported, and the GEMM
    package again with today's cuda_wgmma seed as its kernel."""
    return {"attention": imported(packaged(root / "runs", ATTENTION_CUDA, root / "gpu_attention", "gpu_attention"),
                                  "gpu_attention"),
            "gemm": imported(packaged(root / "runs", GEMM_CUDA, root / "gpu_gemm", "gpu_gemm"), "gpu_gemm"),
            "gemm_seed": package_with_seed(root / "runs", GEMM_CUDA, root, "gpu_gemm_seed", SEED)}


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    return build_packages(tmp_path_factory.mktemp("gpu_packages"))


@contextmanager
def patched(packages):
    """Inside: every package's patch(), its counters cleared, and torch.compile's traces dropped (the patched
    functions are traced anew)."""
    import torch

    with ExitStack() as stack:
        for package in packages:
            stack.enter_context(package.patch())
            package.calls.clear()
            package.fallbacks.clear()
        torch._dynamo.reset()
        yield


def report(package) -> str:
    return f"calls {dict(package.calls)}, fallbacks {dict(package.fallbacks)}"


@pytest.mark.parametrize("gemm_kernel", ["example", "seed"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_llama_block_under_patch_matches_the_unpatched_block(packages, compiled, gemm_kernel):
    import torch

    model = block()
    x = torch.randn(BATCH, SEQ, HIDDEN, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    run = torch.compile(model) if compiled else model
    attention, gemm = packages["attention"], packages["gemm" if gemm_kernel == "example" else "gemm_seed"]
    with torch.no_grad():
        expected = run(x)
        with patched((attention, gemm)):
            patched_run = torch.compile(model) if compiled else model
            out = patched_run(x)
        rounds = alternated_rounds(patched_run, {"library": (), "patched": (attention, gemm)}, x)
        library_ms, patched_ms = (statistics.median(rounds[name]) for name in ("library", "patched"))
    error = relative_error(out, expected)
    low, _, high = paired_ratios(rounds)["patched"]
    print(f"\n{'compiled' if compiled else 'eager'} block B={BATCH} S={SEQ}, GEMM kernel of the {gemm_kernel}: "
          f"library {library_ms:.3f} ms, patched {patched_ms:.3f} ms ({library_ms / patched_ms:.3f}x; rounds "
          f"{low:.3f}-{high:.3f}); rel err {error:.2e}; attention {report(attention)}; gemm {report(gemm)}")
    assert error <= min(load("attention").tolerance("bfloat16"), load("gemm").tolerance("bfloat16"))
    # The run never timed this block's attention shape: its first call (eager, or while tracing) timed the kernel
    # against cuDNN here, and the kernel does the work unless that found it slower.
    first_calls = attention._guard._FIRST
    print(f"attention's first calls at shapes the run never timed: {first_calls}")
    assert attention.calls["kernel"] > 0 or any(v is not None for v in first_calls.values()), report(attention)
    transposed = gemm._op._transposed_verdicts
    if compiled:  # each linear route was decided while tracing: a call the guard refuses is cuBLAS's own node in the
        # graph, so none reaches the op only to be sent back, and the op is there only where the kernel runs
        assert gemm.calls["library"] == 0, report(gemm)
        if gemm_kernel == "seed":  # the weight read in place where its first call (here, while tracing) timed it
            # worth it
            assert transposed and all(v is None or TIMED in v for v in transposed.values())
            assert (gemm.calls["kernel"] > 0) == (None in transposed.values()), (transposed, report(gemm))
        else:
            assert not gemm.calls, report(gemm)
    elif gemm_kernel == "seed":  # reads nn.Linear's weight in place: the projections inside the run's K range, each
        # where the first call timed that worth it against the library
        timed_slower = sum(n for r, n in gemm.fallbacks.items() if TIMED in r)
        assert gemm.calls["kernel"] + timed_slower > 0, gemm.fallbacks
        assert not any(r.startswith("layout") and TIMED not in r for r in gemm.fallbacks)
    else:  # predates that: its linear calls go to cuBLAS, not through a copy of each weight
        assert gemm.calls["kernel"] == 0 and gemm.fallbacks
