"""Host time that patch()'s routes add to a call the guard leaves on the library: nn.Linear and SDPA, each timed
unpatched and under the packages of the two shipped Llama-3.2-1B runs (µs per call, the best of 7 repeats, the two
taken in turn). On the CPU the calls are tiny, so the figures are the host's alone; on a GPU (`--device cuda`) they
are Llama-3.2-1B's projections and attention at `--tokens` (1024 by default, where the guard sends every one of them
to the library), each call's host time to queue.

    python3 scripts/route_host_time.py
    python3 scripts/route_host_time.py --device cuda --tokens 1024
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "package")]


def per_call_us(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--number", type=int, default=2000, help="calls per repeat")
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F
    from test_gpu_model import LLAMA_1B, build_model_packages

    packages = build_model_packages(Path(tempfile.mkdtemp(prefix="avo-routes-")))
    dtype, cuda = torch.bfloat16, args.device == "cuda"
    hidden, heads, kv_heads, head_dim, _ = LLAMA_1B
    tokens, width = (args.tokens, hidden) if cuda else (2, 8)
    heads, kv_heads, head_dim = (heads, kv_heads, head_dim) if cuda else (2, 1, 8)
    linear = torch.nn.Linear(width, width, bias=False, device=args.device, dtype=dtype)
    x = torch.randn(1, tokens, width, device=args.device, dtype=dtype)
    q = torch.randn(1, heads, tokens, head_dim, device=args.device, dtype=dtype)
    k = torch.randn(1, kv_heads, tokens, head_dim, device=args.device, dtype=dtype)
    calls = {"nn.Linear": (packages["gemm"], lambda: linear(x)),
             "SDPA": (packages["attention"], lambda: F.scaled_dot_product_attention(q, k, k, is_causal=True,
                                                                                     enable_gqa=True))}
    print(f"{torch.cuda.get_device_name() if cuda else 'CPU'}, torch {torch.__version__}, {args.device} tensors "
          f"{'at ' + str(tokens) + ' tokens' if cuda else '(tiny)'}")
    with torch.no_grad():
        for name, (package, call) in calls.items():
            times = {"unpatched": [], "patched": []}
            for _ in range(3):
                times["unpatched"].append(per_call_us(call, args.number))
                with package.patch():
                    call()  # the first call's checks
                    times["patched"].append(per_call_us(call, args.number))
                if cuda:
                    torch.cuda.synchronize()
            base, routed = min(times["unpatched"]), min(times["patched"])
            print(f"{name:10s} unpatched {base:6.2f} µs, patched {routed:6.2f} µs: the route adds "
                  f"{routed - base:5.2f} µs ({dict(package.fallbacks)})")


if __name__ == "__main__":
    main()
