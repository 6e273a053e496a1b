"""Correctness and speed of GEMM or attention seed variants on a GPU, each variant in its own child process (a hang
or a fault costs that variant only). Speed is triton.testing.do_bench against the library (torch.matmul; SDPA on
cuDNN), one shape after another; the evaluator's figures come from `avo bench`.

    python scripts/gpu_seed_dev.py kernels/gemm/cuda_wgmma [KNOB=VALUE,...] ...
    python scripts/gpu_seed_dev.py kernels/attention/cuda_fa3 [KNOB=VALUE,...] ...

KNOB=VALUE pairs rewrite the `# avo: tune` knobs; D_NAME=1 compiles with NAME defined; SMS=N launches a GEMM as if
the GPU had N SMs. The task is the folder's parent (gemm or attention). BENCH=quick times fewer shapes.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

GEMM_CHECK = [(128, 256, 64), (1000, 1000, 1000), (512, 768, 2048), (7, 33, 17), (1, 4096, 1000), (300, 520, 72)]
GEMM_BENCH = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096), (16384, 4096, 4096)]
# (B, Hq, Hkv, S, D) and causal: the evaluator's check suite holds more; these catch layout and masking bugs fast.
ATTN_CHECK = [(1, 4, 4, 1, 64, False), (2, 4, 2, 1, 128, True), (2, 4, 4, 17, 64, True), (1, 8, 2, 100, 128, False),
              (1, 8, 1, 257, 128, True), (1, 4, 4, 1000, 64, True), (1, 8, 4, 1000, 128, False),
              (2, 4, 2, 640, 128, True), (1, 2, 2, 4096, 128, False), (1, 2, 1, 1500, 128, True)]
ATTN_BENCH = [(8, 16, 16, 4096, False), (8, 16, 16, 4096, True), (2, 32, 8, 16384, False), (2, 32, 8, 16384, True),
              (1, 32, 4, 32768, False), (1, 32, 4, 32768, True)]


def load_variant(folder: str, settings: dict):
    from avo.agent.heuristic.knobs import render

    src = Path(folder) / "kernel.py"
    work = Path(tempfile.mkdtemp())
    for f in Path(folder).iterdir():
        if f.is_file():
            (work / f.name).write_text(f.read_text())
    defines = [k[2:] for k in settings if k.startswith("D_")]
    settings = {k: v for k, v in settings.items() if not k.startswith("D_")}
    for cu in work.glob("*.cu"):  # D_NAME=1: compile with NAME defined (switches that are not knobs)
        cu.write_text("".join(f"#define {d} 1\n" for d in defines) + cu.read_text())
    (work / "kernel.py").write_text(render(src.read_text(), settings) if settings else src.read_text())
    spec = importlib.util.spec_from_file_location("variant", work / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def emit(**row) -> None:
    print(json.dumps(row), flush=True)


def timed(fn, lib) -> tuple[float, float]:
    import triton.testing

    ms = triton.testing.do_bench(fn, warmup=50, rep=300)
    lib_ms = triton.testing.do_bench(lib, warmup=50, rep=300)
    return min(ms, triton.testing.do_bench(fn, warmup=10, rep=300)), lib_ms


def gemm_child(mod, quick: bool) -> None:
    import torch

    for m, n, k in GEMM_CHECK:
        for dtype in (torch.bfloat16, torch.float16):
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            c = mod.gemm(a, b)
            torch.cuda.synchronize()
            ref = a.float() @ b.float()
            emit(check=[m, n, k], dtype=str(dtype), err=((c.float() - ref).norm() / ref.norm()).item())
    for m, n, k in GEMM_BENCH[:2] if quick else GEMM_BENCH:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ms, lib = timed(lambda: mod.gemm(a, b), lambda: torch.matmul(a, b))
        emit(bench=[m, n, k], tflops=2 * m * n * k / ms / 1e9, lib_tflops=2 * m * n * k / lib / 1e9, ratio=lib / ms)


def attention_child(mod, quick: bool) -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from avo.tasks.attention import attention_reference

    for b, hq, hkv, s, d, causal in ATTN_CHECK:
        for dtype in (torch.bfloat16, torch.float16):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for h in (hq, hkv, hkv))
            o = mod.attention(q, k, v, causal, 1 / math.sqrt(d))
            torch.cuda.synchronize()
            ref = attention_reference(q, k, v, causal, 1 / math.sqrt(d))
            emit(check=[b, hq, hkv, s, d, causal], dtype=str(dtype),
                 err=((o.float() - ref).norm() / ref.norm()).item())
    for b, hq, hkv, s, causal in ATTN_BENCH[:2] if quick else ATTN_BENCH:
        q, k, v = (torch.randn(b, h, s, 128, device="cuda", dtype=torch.bfloat16) for h in (hq, hkv, hkv))
        scale = 1 / math.sqrt(128)

        def lib():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=hq != hkv)

        ms, lib_ms = timed(lambda: mod.attention(q, k, v, causal, scale), lib)
        flops = 4 * b * hq * s * s * 128 / (2 if causal else 1)
        emit(bench=[b, hq, hkv, s, causal], tflops=flops / ms / 1e9, lib_tflops=flops / lib_ms / 1e9,
             ratio=lib_ms / ms)


def child(folder: str, settings: dict) -> None:
    sms = settings.pop("SMS", None)  # SMS=N: launch as if the GPU had N SMs (persistent-grid experiments)
    mod = load_variant(folder, settings)
    if sms:
        mod._sm_count = lambda device: sms
    quick = os.environ.get("BENCH") == "quick"
    (attention_child if Path(folder).resolve().parent.name == "attention" else gemm_child)(mod, quick)


def parse(variant: str) -> dict:
    settings = {}
    for pair in filter(None, variant.split(",")):
        key, value = pair.split("=")
        if value in ("True", "False"):
            settings[key] = value == "True"
        else:
            settings[key] = int(value) if value.lstrip("-").isdigit() else value
    return settings


def report(out: str, err: str, rc: int) -> None:
    worst = 0.0
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if "check" in row:
            worst = max(worst, row["err"])
            if not row["err"] <= 0.01:
                print("   BAD", row)
        else:
            print(f"   {row['bench']}: {row['tflops']:6.1f} TFLOPS  lib {row['lib_tflops']:6.1f}  x{row['ratio']:.3f}")
    print(f"   rc={rc} worst check err {worst:.2e}", flush=True)
    if rc:
        print("   stderr:", err[-1500:])


def main() -> None:
    if sys.argv[1] == "--child":
        child(sys.argv[2], json.loads(sys.argv[3]))
        return
    folder, variants = sys.argv[1], sys.argv[2:] or [""]
    for variant in variants:
        settings = parse(variant)
        print(f"== {folder} {settings}", flush=True)
        try:
            done = subprocess.run([sys.executable, __file__, "--child", folder, json.dumps(settings)],
                                  capture_output=True, text=True, timeout=float(os.environ.get("VARIANT_TIMEOUT", 120)))
            out, err, rc = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout or ""
            out, err, rc = partial.decode() if isinstance(partial, bytes) else partial, "TIMEOUT", -1
        report(out, err, rc)


if __name__ == "__main__":
    main()
