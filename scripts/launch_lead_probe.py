"""What a kernel's launch properties cost before it starts, after the evaluator's L2 flush and launch shield (needs
a GPU to time).

    PYTHONPATH=$PWD python3 scripts/launch_lead_probe.py [--calls 30]

Bare kernels (thread 0 of block 0 writes one int) that differ from a GEMM-like one (512 bytes of parameters, as four
tensor maps take; 200 KB of dynamic shared memory; 384 threads; 128 blocks) in one property each: 16 bytes of
parameters, no shared memory, 128 threads, clusters of two, a programmatic dependent launch (PDL:
cuLaunchKernelEx with programmatic stream serialization, the kernel waiting on `griddepcontrol.wait`), and a tiny
kernel with and without PDL; then gemm/cuda_wgmma and cuBLAS at 64 x 8192 x 64, one K-step. Each call runs as the
evaluator times one (flush, shield, CUDA events), the contenders alternating call by call under torch.profiler;
per contender the medians of `events` (between the CUDA events), `lead` (from the shield's end to the kernel's
start, CUPTI) and `span` (the kernel's own time) are printed, in µs.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.kernel_timeline import SEED, calls_of, traced_calls  # noqa: E402

SOURCE = r"""
struct __align__(64) Params { unsigned char bytes[PARAM_BYTES]; };
extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_DIMS
probe(const __grid_constant__ Params p, int* out) {
#if WAIT
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    extern __shared__ unsigned char smem[];
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = p.bytes[0] + (int)(size_t)smem;
}
"""
BIG_SMEM = 200 * 1024
BLOCKS = 128
# name: (parameter bytes, dynamic shared memory, threads, cluster size, PDL)
VARIANTS = {"gemm-like": (512, BIG_SMEM, 384, 1, False), "params16": (16, BIG_SMEM, 384, 1, False),
            "smem0": (512, 0, 384, 1, False), "threads128": (512, BIG_SMEM, 128, 1, False),
            "cluster2": (512, BIG_SMEM, 384, 2, False), "pdl": (512, BIG_SMEM, 384, 1, True),
            "tiny": (16, 0, 128, 1, False), "tiny-pdl": (16, 0, 128, 1, True)}
PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


class LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: an id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_char * 4), ("value", ctypes.c_char * 64)]


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid_x", ctypes.c_uint), ("grid_y", ctypes.c_uint), ("grid_z", ctypes.c_uint),
                ("block_x", ctypes.c_uint), ("block_y", ctypes.c_uint), ("block_z", ctypes.c_uint),
                ("shared_mem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


def source(param_bytes: int, threads: int, cluster: int, pdl: bool) -> str:
    """The probe kernel with one variant's properties."""
    return (SOURCE.replace("PARAM_BYTES", str(param_bytes)).replace("THREADS", str(threads))
            .replace("WAIT", str(int(pdl)))
            .replace("CLUSTER_DIMS", f"__cluster_dims__({cluster}, 1, 1)" if cluster > 1 else ""))


def pdl_config(launch, stream: int, attribute: LaunchAttribute) -> LaunchConfig:
    """cuLaunchKernelEx's configuration of avo's `launch` (its grid, block and shared memory) on `stream`, with one
    launch attribute."""
    return LaunchConfig(*launch.dims, launch.shared_mem, stream, ctypes.pointer(attribute), 1)


def launcher(param_bytes: int, smem: int, threads: int, cluster: int, pdl: bool, out):
    """A callable that queues the variant's kernel on torch's current stream: through avo's Launch (its packed
    arguments and cuLaunchKernel), or with PDL through cuLaunchKernelEx with the same arguments."""
    import cupy

    from avo.cuda_launch import Launch, _driver, current_stream

    kernel = cupy.RawModule(code=source(param_bytes, threads, cluster, pdl), options=("-std=c++17",))
    function = kernel.get_function("probe").kernel.ptr
    driver = _driver()
    if smem > 48 * 1024 and driver.cuFuncSetAttribute(ctypes.c_void_p(function), MAX_DYNAMIC_SHARED, smem):
        raise RuntimeError(f"{smem} bytes of dynamic shared memory refused")
    pieces = [(bytes(param_bytes), 64), (out.data_ptr().to_bytes(8, "little"), 8)]
    launch = Launch(function, out.get_device(), (BLOCKS,), (threads,), smem, pieces, "probe")
    launch.keep = kernel  # the module outlives its launches
    if not pdl:
        return launch
    attribute = LaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION, b"", (1).to_bytes(4, "little"))
    driver.cuLaunchKernelEx.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_void_p]

    def launch_pdl() -> None:
        config = pdl_config(launch, current_stream(launch.device), attribute)
        status = driver.cuLaunchKernelEx(ctypes.byref(config), function, launch.params, None)
        if status:
            raise RuntimeError(f"cuLaunchKernelEx refused the probe: CUresult {status}")

    launch_pdl.keep = (launch, attribute)  # alive as long as the launch
    return launch_pdl


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    import torch

    from avo.evaluate.worker.loader import load_entry
    from avo.evaluate.worker.timing import L2Flush, LaunchShield
    from avo.gpus import resolve

    out = torch.zeros(4, dtype=torch.int32, device="cuda")
    contenders = {name: launcher(*props, out) for name, props in VARIANTS.items()}
    gemm = load_entry(SEED, "gemm")
    a = torch.randn((64, 64), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((64, 8192), device="cuda", dtype=torch.bfloat16)
    contenders["avo 64x8192x64"] = lambda: gemm(a, b)
    contenders["cublas 64x8192x64"] = lambda: torch.matmul(a, b)
    flush, shield = L2Flush(resolve("auto", "cuda").l2_mb << 20), LaunchShield(100.0)
    for fn in contenders.values():  # warm; each is one kernel
        fn()
    torch.cuda.synchronize()
    print(torch.cuda.get_device_name())
    events, kernels = traced_calls(contenders, args.calls, flush, shield)
    for j, name in enumerate(contenders):
        calls = calls_of(kernels, j, len(contenders), 1)
        print(f"{name:18s} events {statistics.median(events[name]):6.2f}  lead "
              f"{statistics.median(c[0] for c in calls):5.2f}  span {statistics.median(c[1] for c in calls):6.2f}  "
              f"({calls[0][2][0][:48]})", flush=True)


if __name__ == "__main__":
    main()
