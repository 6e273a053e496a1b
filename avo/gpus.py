"""GPU profiles (datasheet figures, used for roofline and plausibility checks) and detection through NVML."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from avo.errors import UserError


class GpuProfile(BaseModel):
    """What a kernel engineer needs to know about one GPU. Figures are dense (non-sparse) datasheet peaks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arch: str
    """Compile target with architecture-specific features: sm_90a (wgmma, TMA) or sm_100a (tcgen05)."""
    compute_capability: tuple[int, int]
    sms: int
    peak_bf16_tflops: float
    peak_fp8_tflops: float
    hbm_gbps: float
    smem_per_sm_kb: int
    smem_per_block_kb: int
    l2_mb: int
    peak_fp16_tflops: float = 0.0
    """Dense fp16 tensor-core peak; 0 where no figure is recorded."""
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    tmem_per_sm_kb: int = 0
    """Tensor memory (tcgen05 accumulators) per SM; 0 before Blackwell, which has none."""
    nvml_names: tuple[str, ...] = ()
    """Substrings of the NVML device name that identify this GPU."""


PROFILES: dict[str, GpuProfile] = {
    # NVIDIA H100 Tensor Core GPU datasheet (SXM5); Hopper tuning guide for shared memory.
    "h100": GpuProfile(
        name="h100", arch="sm_90a", compute_capability=(9, 0), sms=132, peak_bf16_tflops=989.0,
        peak_fp8_tflops=1979.0, hbm_gbps=3350.0, smem_per_sm_kb=228, smem_per_block_kb=227, l2_mb=50,
        peak_fp16_tflops=989.0, nvml_names=("H100",),
    ),
    # NVIDIA H200 datasheet (SXM): H100 compute, 141 GB HBM3e at 4.8 TB/s.
    "h200": GpuProfile(
        name="h200", arch="sm_90a", compute_capability=(9, 0), sms=132, peak_bf16_tflops=989.0,
        peak_fp8_tflops=1979.0, hbm_gbps=4800.0, smem_per_sm_kb=228, smem_per_block_kb=227, l2_mb=50,
        peak_fp16_tflops=989.0, nvml_names=("H200",),
    ),
    # b200 figures, one GPU of an HGX B200 board, dense (no sparsity). tests/test_gpus.py checks the profile below
    # against this table, so a changed figure must change here too, with its source.
    # B200 TABLE
    #   sms = 148                 Chips and Cheese, "Nvidia's B200: Keeping the CUDA Juggernaut Rolling" (2 dies x 74
    #                             enabled SMs): https://chipsandcheese.com/p/nvidias-b200-keeping-the-cuda-juggernaut
    #                             (NVIDIA's datasheets give no SM count)
    #   smem_per_sm_kb = 228      CUDA C++ Programming Guide, technical specifications per compute capability (10.0):
    #                             https://docs.nvidia.com/cuda/cuda-c-programming-guide/#compute-capabilities
    #   smem_per_block_kb = 227   same table (maximum opt-in shared memory per block, 10.0)
    #   regs_per_sm = 65536       same table (32-bit registers per SM, 10.0)
    #   max_regs_per_thread = 255 same table (registers per thread, 10.0)
    #   l2_mb = 126               Chips and Cheese, measured over both dies (NVIDIA's datasheets give none):
    #                             https://chipsandcheese.com/p/nvidias-b200-keeping-the-cuda-juggernaut
    #   hbm_gbps = 8000           NVIDIA DGX B200 datasheet, 64 TB/s HBM3e over 8 GPUs:
    #                             https://www.nvidia.com/en-us/data-center/dgx-b200/
    #   peak_bf16_tflops = 2250   NVIDIA HGX B200 specifications (per-GPU sparse figure halved for dense):
    #                             https://www.nvidia.com/en-us/data-center/hgx/ ; per-GPU table at 1,000 W:
    #                             https://glennklockwood.com/garden/processors/B200
    #   peak_fp16_tflops = 2250   same sources (fp16 equals bf16)
    #   peak_fp8_tflops = 4500    same sources
    #   tmem_per_sm_kb = 256      PTX ISA, tcgen05 "Tensor Memory": 128 lanes x 512 columns of 32 bits per CTA:
    #                             https://docs.nvidia.com/cuda/parallel-thread-execution/#tensor-memory
    # END B200 TABLE
    "b200": GpuProfile(
        name="b200", arch="sm_100a", compute_capability=(10, 0), sms=148, peak_bf16_tflops=2250.0,
        peak_fp8_tflops=4500.0, hbm_gbps=8000.0, smem_per_sm_kb=228, smem_per_block_kb=227, l2_mb=126,
        peak_fp16_tflops=2250.0, regs_per_sm=65536, max_regs_per_thread=255, tmem_per_sm_kb=256,
        nvml_names=("B200",),
    ),
}


def detect() -> GpuProfile | None:
    """The profile of GPU 0 as NVML names it, or None when there is no NVIDIA GPU or it is not a known one."""
    name = nvml_device_name()
    return None if name is None else profile_named(name)


def profile_named(nvml_name: str) -> GpuProfile | None:
    """The profile whose NVML names `nvml_name` contains ('NVIDIA H200' -> h200), or None."""
    return next((p for p in PROFILES.values() if any(key in nvml_name for key in p.nvml_names)), None)


def _nvml(query, default):
    """`query(pynvml)` between NVML's init and shutdown; `default` without NVML or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return query(pynvml)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return default


def nvml_device_name(index: int = 0) -> str | None:
    name = _nvml(lambda nvml: nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(index)), None)
    return name.decode() if isinstance(name, bytes) else name


def nvml_device_count() -> int:
    return int(_nvml(lambda nvml: nvml.nvmlDeviceGetCount(), 0))


def resolve(gpu: str, device: str) -> GpuProfile:
    """The profile to use for `--gpu GPU --device DEVICE`.

    On a real GPU (`device == "cuda"`) the named profile must be the GPU that is present; under the interpreter any
    profile may be named (it only labels the run and sets the compile target), and `auto` means h200.
    """
    gpu = gpu.lower()
    if gpu != "auto" and gpu not in PROFILES:
        raise UserError(f"unknown GPU '{gpu}': choose one of auto, {', '.join(PROFILES)}")
    if device == "interpret":
        return PROFILES["h200" if gpu == "auto" else gpu]
    present = nvml_device_name()
    if present is None:
        raise UserError("no NVIDIA GPU found: run on a GPU machine, or add --device interpret to run on the CPU")
    found = detect()
    if gpu == "auto":
        if found is None:
            raise UserError(f"GPU '{present}' has no avo profile (known: {', '.join(PROFILES)}); "
                            "name the closest with --gpu")
        return found
    if found is not None and found.name != gpu:
        raise UserError(f"--gpu {gpu} was asked for but this machine has '{present}': "
                        f"use --gpu auto or --gpu {found.name}")
    if found is None:
        raise UserError(f"--gpu {gpu} was asked for but this machine has '{present}': use --gpu auto")
    return found
