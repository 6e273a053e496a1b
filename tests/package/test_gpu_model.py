"""On a GPU: the packaged bests of the two shipped runs evolved for Llama-3.2-1B's shapes (attention and GEMM, batch 1
at 1024, 4096 and 16384 tokens), under patch() in a block of that model's dimensions (qkv and gate+up fused, as the
workload times them) at those token counts. The output matches the unpatched block within the tasks' tolerance; each
call goes where the guard says (the kernel at the timed shapes it won, the library where the library measured faster);
and the forward is timed against the unpatched block's, alternating the two, eager and under torch.compile. The
figures are printed for BENCHMARKS.md; nothing is asserted about speed."""

from __future__ import annotations

import statistics

import pytest
from package_runs import ATTENTION_LLAMA, GEMM_LLAMA, imported, packaged
from test_gpu import TIMED, Dims, alternated_rounds, block, paired_ratios, under

from avo.tasks import load, relative_error

pytestmark = pytest.mark.gpu

LLAMA_1B = Dims(2048, 32, 8, 64, 8192)


def build_model_packages(root) -> dict:
    """{"attention", "gemm"}: the packaged bests of the two Llama-3.2-1B runs, imported."""
    names = {"attention": ATTENTION_LLAMA, "gemm": GEMM_LLAMA}
    return {key: imported(packaged(root / "runs", example, root / f"llama1b_{key}", f"llama1b_{key}"),
                          f"llama1b_{key}") for key, example in names.items()}


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    return build_model_packages(tmp_path_factory.mktemp("model_packages"))


def _line(rounds: dict) -> str:
    """Each variant's median ms and the library's over it, then the round-by-round ratios' range (paired_ratios)."""
    ms = {name: statistics.median(times) for name, times in rounds.items()}
    spread = paired_ratios(rounds)
    return ", ".join(f"{name} {t:.3f} ms ({ms['library'] / t:.3f}x" +
                     (f"; rounds {spread[name][0]:.3f}-{spread[name][2]:.3f})" if name in spread else ")")
                     for name, t in ms.items())


@pytest.mark.parametrize("seq", [1024, 4096, 16384])
def test_the_models_block_under_its_runs_packages(packages, seq):
    import torch

    model = block(LLAMA_1B, 1, seq, fused=True)
    x = torch.randn(1, seq, LLAMA_1B.hidden, device="cuda", dtype=torch.bfloat16)
    attention, gemm = packages["attention"], packages["gemm"]
    variants = {"library": (), "attention": (attention,), "attention+gemm": (attention, gemm)}
    tolerance = min(load("attention").tolerance("bfloat16"), load("gemm").tolerance("bfloat16"))
    with torch.no_grad():
        expected = model(x)
        for package in (attention, gemm):
            package.calls.clear()
            package.fallbacks.clear()
        error = relative_error(under((attention, gemm), model, x), expected)
        calls = {key: (dict(package.calls), dict(package.fallbacks)) for key, package in packages.items()}
        eager = alternated_rounds(model, variants, x)
        torch._dynamo.reset()
        compiled_model = torch.compile(model)
        compiled_error = relative_error(under((attention, gemm), compiled_model, x), expected)
        compiled = alternated_rounds(compiled_model, variants, x)
    print(f"\nLlama-3.2-1B block B=1 S={seq}: rel err {error:.2e} / compiled {compiled_error:.2e}"
          f"\n  eager: {_line(eager)}\n  compiled: {_line(compiled)}"
          f"\n  attention {calls['attention']}\n  gemm {calls['gemm']}")
    assert error <= tolerance and compiled_error <= tolerance
    # The attention call goes where the package's manifest says: the library at the timed shapes it lists (S 1024,
    # 0.980x on the GPU; S 4096, 1.022x but 4 µs of GPU time saved for 14 µs of host time added), else the kernel.
    # On another GPU of the run's compute capability (guard.ANOTHER_GPU) each shape's first call here decides.
    att_calls, att_fallbacks = calls['attention']
    kin = attention._guard._gpu_refusal(0) == attention._guard.ANOTHER_GPU
    if kin:
        print(f"  first calls on this GPU: attention {attention._guard._FIRST}, gemm {gemm._guard._FIRST}")
        assert att_calls.get("op") == 1 and all(r.endswith(TIMED) for r in att_fallbacks), calls['attention']
    elif [1, 32, 8, seq, 64, True, "bfloat16"] in attention.MANIFEST["guard"]["library_faster"]["shapes"]:
        assert att_calls.get("library") == 1 and att_fallbacks, calls['attention']
        assert all(r.startswith(("measured slower", "saves less GPU time")) for r in att_fallbacks), att_fallbacks
    else:
        assert att_calls.get("kernel") == 1 and not att_fallbacks, calls['attention']
    # The GEMM run's best won only gate+up (N = 16384); qkv, o and down stay cuBLAS's at these token counts. gate+up
    # reaches the kernel where its first call timed the kernel reading the weight in place worth it: more GPU time
    # saved than host time added against cuBLAS.
    gemm_calls, gemm_fallbacks = calls['gemm']
    assert gemm_calls.get("kernel", 0) + gemm_calls.get("library", 0) == 4 and (kin or gemm_calls.get("kernel", 0) <= 1)
    assert all(r.startswith("measured slower") or r.startswith("layout (") and r.endswith(TIMED)
               or kin and r.endswith(TIMED) for r in gemm_fallbacks), gemm_fallbacks
