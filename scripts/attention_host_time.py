"""Where an attention call's host time goes, on a GPU: the time to queue one call (behind a GPU spin, so only the host
is clocked) of cuDNN's SDPA, of attention/cuda_fa3's wrapper, and of SDPA routed by the package of the shipped
Llama-3.2-1B run (patch()), each step of the wrapper's call timed alone, and how many tensor maps are encoded anew
(a cache miss: the driver's encoder instead of a dictionary lookup) per call that reaches the kernel in forwards of
Llama-3.2-1B's block, at --count-seq (default 16384, a shape the package keeps for its kernel: where it sends every
call to cuDNN there is nothing to count, and the script says so). At B 1, 32/8 heads of 64, causal, S as given
(default 4096, where the kernel is faster on the GPU than cuDNN and the block still slower than unpatched:
BENCHMARKS.md, fifth session of 2026-12-04).

    python scripts/attention_host_time.py [--seq 4096] [--count-seq 16384] [--profile]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests" / "package"), str(ROOT / "tests")]

from gemm_host_time import load, per_call_us, profiled  # noqa: E402  (the same clock as the GEMM wrapper's figures)


def counting_encodes(*module_names: str) -> list[int]:
    """Each named module's `_encode` (avo.cuda_tensor_map, or a package's vendored copy of it) wrapped to count its
    calls; returns the counter, a one-element list shared by all of them."""
    import importlib

    count = [0]
    for name in module_names:
        maps = importlib.import_module(name)

        def counted(*args, _encode=maps._encode, **kwargs):
            count[0] += 1
            return _encode(*args, **kwargs)

        maps._encode = counted
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--count-seq", type=int, default=16384, help="S of the block whose tensor-map misses count")
    parser.add_argument("--profile", action="store_true", help="cProfile of the routed call, by own time")
    args = parser.parse_args()
    from test_gpu import block
    from test_gpu_model import LLAMA_1B, build_model_packages

    from avo.cuda import current_stream
    from avo.cuda_tensor_map import _encode, tensor_map

    wrapper = load(ROOT / "kernels" / "attention" / "cuda_fa3", "attention")
    q = torch.randn(1, 32, args.seq, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 8, args.seq, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    package = build_model_packages(Path(tempfile.mkdtemp()))["attention"]
    # The package's kernel encodes through its own copy of avo.cuda_tensor_map (avo/package/vendor.py).
    encodes = counting_encodes(f"{package.__name__}._cuda_tensor_map")
    sdpa = F.scaled_dot_product_attention
    g = wrapper.__globals__
    planned = g["plan"](1, 32, 8, args.seq, 64, True)
    o = wrapper(q, k, v, True, 0.125)
    with torch.no_grad():
        steps = {
            "cuDNN SDPA": lambda: sdpa(q, k, v, is_causal=True, enable_gqa=True),
            "cuda_fa3 attention()": lambda: wrapper(q, k, v, True, 0.125),
            "cuda_fa3 launch() (unprepared)": lambda: g["launch"](planned, q, k, v, o, True, 0.125),
            "prepared launch()": g["launcher"](planned, q, k, v, o, True, 0.125),
            "current_stream": lambda: current_stream(0),
            "torch.empty for o": lambda: torch.empty_like(q),
            "4 tensor_map lookups": lambda: [tensor_map(t.view(-1, args.seq, 64), box=(1, 64, 64))
                                             for t in (q, k, v, o)],
            "1 tensor map encoded (a miss)": lambda: _encode(q.view(-1, args.seq, 64), (1, 64, 64), 128),
        }
        with package.patch():
            steps["SDPA routed by patch()"] = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                                     enable_gqa=True)
            print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; B 1, 32/8 heads, S {args.seq}, D 64, "
                  f"causal, bf16: host µs to queue one call (median of 5 rounds)")
            for label, step in steps.items():
                print(f"{label:32s} {per_call_us(step):8.1f}")
            if args.profile:
                profiled(steps["SDPA routed by patch()"])
        model = block(LLAMA_1B, 1, args.count_seq, fused=True)
        x = torch.randn(1, args.count_seq, LLAMA_1B.hidden, device="cuda", dtype=torch.bfloat16)
        with package.patch():
            for _ in range(3):
                model(x)
            torch.cuda.synchronize()
            before, kernel_before = encodes[0], package.calls["kernel"]
            for _ in range(20):
                model(x)
            torch.cuda.synchronize()
        kernel_calls = package.calls["kernel"] - kernel_before
        if kernel_calls == 0:
            print(f"tensor maps encoded per kernel call of the block at S {args.count_seq}: not counted, the package "
                  f"sent every call there to the library ({dict(package.fallbacks)})")
        else:
            print(f"tensor maps encoded per kernel call of the block at S {args.count_seq} (a miss each): "
                  f"{(encodes[0] - before) / kernel_calls:.2f} over {kernel_calls} calls")


if __name__ == "__main__":
    main()
