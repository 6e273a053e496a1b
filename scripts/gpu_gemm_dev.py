"""Correctness and speed of GEMM seed variants on a GPU, each variant in its own child process (a hang or a fault
costs that variant only). Speed is triton.testing.do_bench against torch.matmul, one shape after another; the
evaluator's figures come from `avo bench`.

    python scripts/gpu_gemm_dev.py kernels/gemm/cuda_wgmma [KNOB=VALUE,...] ...
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = [(128, 256, 64), (1000, 1000, 1000), (512, 768, 2048), (7, 33, 17), (1, 4096, 1000), (300, 520, 72)]
BENCH = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096), (16384, 4096, 4096)]


def child(folder: str, settings: dict) -> None:
    import torch
    import triton.testing

    from avo.agent.heuristic.knobs import render

    src = Path(folder) / "kernel.py"
    work = Path(tempfile.mkdtemp())
    for f in Path(folder).iterdir():
        if f.is_file():
            (work / f.name).write_text(f.read_text())
    defines = [k[2:] for k in settings if k.startswith("D_")]
    sms = settings.pop("SMS", None)  # SMS=N: launch as if the GPU had N SMs (persistent-grid experiments)
    settings = {k: v for k, v in settings.items() if not k.startswith("D_")}
    for cu in work.glob("*.cu"):  # D_NAME=1: compile with NAME defined (switches that are not knobs)
        cu.write_text("".join(f"#define {d} 1\n" for d in defines) + cu.read_text())
    (work / "kernel.py").write_text(render(src.read_text(), settings) if settings else src.read_text())
    spec = importlib.util.spec_from_file_location("variant", work / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if sms:
        mod._sm_count = lambda device: sms
    for m, n, k in CHECK:
        for dtype in (torch.bfloat16, torch.float16):
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            c = mod.gemm(a, b)
            torch.cuda.synchronize()
            ref = a.float() @ b.float()
            err = ((c.float() - ref).norm() / ref.norm()).item()
            print(json.dumps({"check": [m, n, k], "dtype": str(dtype), "err": err}), flush=True)
    for m, n, k in BENCH:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ms = triton.testing.do_bench(lambda: mod.gemm(a, b), warmup=50, rep=300)
        lib = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=50, rep=300)
        ms2 = triton.testing.do_bench(lambda: mod.gemm(a, b), warmup=10, rep=300)
        ms = min(ms, ms2)
        tf = 2 * m * n * k / ms / 1e9
        print(json.dumps({"bench": [m, n, k], "tflops": tf, "lib_tflops": 2 * m * n * k / lib / 1e9,
                          "ratio": lib / ms}), flush=True)


def main() -> None:
    if sys.argv[1] == "--child":
        child(sys.argv[2], json.loads(sys.argv[3]))
        return
    folder, variants = sys.argv[1], sys.argv[2:] or [""]
    for variant in variants:
        settings = {}
        for pair in filter(None, variant.split(",")):
            key, value = pair.split("=")
            if value in ("True", "False"):
                settings[key] = value == "True"
            else:
                settings[key] = int(value) if value.lstrip("-").isdigit() else value
        print(f"== {folder} {settings}", flush=True)
        try:
            done = subprocess.run([sys.executable, __file__, "--child", folder, json.dumps(settings)],
                                  capture_output=True, text=True, timeout=float(os.environ.get("VARIANT_TIMEOUT", 120)))
            out, err, rc = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout or ""
            out, err, rc = partial.decode() if isinstance(partial, bytes) else partial, "TIMEOUT", -1
        worst = 0.0
        for line in out.splitlines():
            row = json.loads(line)
            if "check" in row:
                worst = max(worst, row["err"])
                if row["err"] > 0.01:
                    print("   BAD", row)
            else:
                print(f"   {row['bench']}: {row['tflops']:6.1f} TFLOPS  lib {row['lib_tflops']:6.1f}  "
                      f"x{row['ratio']:.3f}")
        print(f"   rc={rc} worst check err {worst:.2e}", flush=True)
        if rc:
            print("   stderr:", err[-1500:])


if __name__ == "__main__":
    main()
