"""`avo doctor`: what this machine has for avo, one line each, with what to do about anything missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

import typer

API_KEYS = (
    ("ANTHROPIC_API_KEY", "the anthropic agent; without it --agent auto uses the offline heuristic agent"),
    ("OPENAI_API_KEY", "the openai agent and OpenAI-compatible servers that want a key"),
)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = False
    """A missing required item stops avo from working at all; the others disable one feature."""


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor() -> None:
        """Check the GPU, driver, torch + CUDA, Triton, nvcc, ncu, git, CuPy and which API keys are set."""
        checks = run_checks()
        width = max(len(c.name) for c in checks)
        for c in checks:
            line = f"{'ok' if c.ok else 'missing':8} {c.name:{width}}  {c.detail}"
            if not c.ok and c.fix:
                line += f" -> {c.fix}"
            typer.echo(line)
        if any(c.required and not c.ok for c in checks):
            raise typer.Exit(1)


def run_checks() -> list[Check]:
    return [check_gpu(), check_torch(), check_triton(), check_tool("nvcc", ["--version"], "install the CUDA toolkit "
            "(only CUDA C++ candidates need it)"), check_tool("ncu", ["--version"], "install Nsight Compute (for "
            "`avo profile` and the agent's profile tool)"), check_tool("git", ["--version"], "install git (the "
            "lineage is a git repository)", required=True), check_cupy(), check_sandbox(), *check_counters(),
            *check_keys()]


def check_sandbox() -> Check:
    """bubblewrap, which every evaluation and the shell tool run in (avo/evaluate/sandbox.py)."""
    from avo.evaluate import sandbox

    why = sandbox.why_unavailable()
    if why is not None:
        return Check("sandbox", False, f"{why}: runs with an LLM agent refuse to start without it (--no-sandbox "
                     "runs candidates unconfined)", sandbox.INSTALL)
    return Check("sandbox", True, f"bubblewrap ({sandbox.find()}): candidates and the shell run confined")


def check_counters() -> list[Check]:
    """Whether ncu may read performance counters inside the sandbox, where no process has CAP_SYS_ADMIN; no line
    where no NVIDIA driver says."""
    from avo.profile.ncu import counters_restricted

    restricted = counters_restricted()
    if restricted is None:
        return []
    if restricted:
        return [Check("GPU counters", False, "the driver lets only admins read them, so `avo profile` and the profile "
                      "tool are refused them in the sandbox", "load the nvidia module with "
                      "NVreg_RestrictProfilingToAdminUsers=0, or --no-sandbox for a kernel you trust")]
    return [Check("GPU counters", True, "open to every user: ncu profiles inside the sandbox")]


def check_gpu() -> Check:
    try:
        import pynvml
    except ImportError:
        return Check("GPU", False, "nvidia-ml-py is not installed", "pip install nvidia-ml-py")
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return Check("GPU", False, f"no NVIDIA driver or GPU ({type(exc).__name__})",
                     "run on a GPU machine, or use --device interpret (Triton interpreter on the CPU)")
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            return Check("GPU", False, "the NVIDIA driver sees no GPU", "use --device interpret")
        name = _text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)))
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
    finally:
        pynvml.nvmlShutdown()
    from avo.gpus import profile_named

    profile = profile_named(name)
    detail = f"{name} x{count}, driver {driver}"
    if profile is None:
        return Check("GPU", False, detail + ", no avo profile", "name the closest profile with --gpu h100|h200|b200")
    return Check("GPU", True, f"{detail}, profile {profile.name} ({profile.arch})")


def check_torch() -> Check:
    try:
        import torch
    except ImportError:
        return Check("torch", False, "not installed", "pip install torch", required=True)
    cuda = torch.version.cuda
    if cuda is None:
        return Check("torch", True, f"{torch.__version__}, CPU-only build (GPU timing needs a CUDA build: "
                     "--device interpret works)")
    if not torch.cuda.is_available():
        return Check("torch", False, f"{torch.__version__} built for CUDA {cuda}, but CUDA is unavailable",
                     "check the NVIDIA driver, or use --device interpret")
    return Check("torch", True, f"{torch.__version__}, CUDA {cuda}, {torch.cuda.get_device_name()}")


MIN_TRITON = (3, 4)
"""pyproject.toml's pin: tl.make_tensor_descriptor and triton.set_allocator, which the TMA seed
(kernels/gemm/triton_tma_persistent) uses, are not in Triton 3.2 and 3.3."""


def check_triton() -> Check:
    try:
        import triton
    except ImportError:
        return Check("Triton", False, "not installed", "pip install triton", required=True)
    major_minor = tuple(int(part) for part in re.findall(r"\d+", triton.__version__)[:2])
    if major_minor < MIN_TRITON:
        return Check("Triton", False, f"{triton.__version__}, older than 3.4: the TMA seed's tensor descriptors "
                     "(tl.make_tensor_descriptor) need 3.4", "pip install 'triton>=3.4'")
    from avo.evaluate import interpreter

    if interpreter.scalar_index_broken():
        import numpy

        return Check("Triton", True, f"{triton.__version__}; its interpreter fails on runtime loop bounds with NumPy "
                     f"{numpy.__version__}, mended in avo's --device interpret workers (a kernel run under "
                     "TRITON_INTERPRET=1 outside avo needs Triton 3.7+ or NumPy < 2.4)")
    return Check("Triton", True, triton.__version__)


def check_tool(name: str, args: list[str], fix: str, required: bool = False) -> Check:
    path = shutil.which(name)
    if path is None:
        return Check(name, False, "not on PATH", fix, required)
    try:
        out = subprocess.run([path, *args], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return Check(name, False, f"{path} does not run ({type(exc).__name__})", fix, required)
    match = re.search(r"(?:release |version )([\w.\-]+)", out)
    return Check(name, True, f"{match.group(1) if match else 'found'} ({path})")


def check_cupy() -> Check:
    """CuPy and cuda-bindings, as avo's cuda13/cuda12 extra installs them, built for the CUDA torch is built for."""
    from avo import extras

    extra, why = extras.suggested_extra()
    install = extras.install_command(extra)
    cupys = extras.cupy_installs()
    if not cupys:
        return Check("CuPy", False, "not installed (only CUDA C++ candidates need it)",
                     f"{install}  (avo's {extra} extra: {why})")
    names = " ".join(c.name for c in cupys)
    if len(cupys) > 1:
        return Check("CuPy", False, f"{', '.join(f'{c.name} {c.version}' for c in cupys)} are all installed and "
                     "overwrite each other's files", f"pip uninstall -y {names} && {install}  ({why})")
    cupy, torch_cuda = cupys[0], extras.torch_cuda()
    if None not in (cupy.cuda, torch_cuda) and cupy.cuda != torch_cuda:
        return Check("CuPy", False, f"{cupy.name} {cupy.version} is built for CUDA {cupy.cuda}, torch for CUDA "
                     f"{torch_cuda}", f"pip uninstall -y {names} && {install}  (avo's {extra} extra)")
    cuda = torch_cuda or cupy.cuda
    if cuda in extras.CUDA_EXTRAS:
        extra = extras.CUDA_EXTRAS[cuda]
    fix = f"{extras.install_command(extra)}  (avo's {extra} extra)"
    bindings = extras.cuda_bindings()
    detail = f"{cupy.name} {cupy.version}"
    if bindings is None:
        return Check("CuPy", False, f"{detail}, but cuda-bindings is not installed (TMA tensor maps need it)", fix)
    if None not in (bindings.cuda, cuda) and bindings.cuda != cuda:
        return Check("CuPy", False, f"{detail}, but cuda-bindings {bindings.version} is for CUDA {bindings.cuda}", fix)
    built = f"CUDA {cuda}" if cuda else "CUDA unknown"
    built += ", as torch" if torch_cuda else "; torch is a CPU build"
    return Check("CuPy", True, f"{detail}, cuda-bindings {bindings.version} ({built})")


def check_keys() -> list[Check]:
    """Names only: a key's value is never read beyond whether it is set."""
    return [Check(name, bool(os.environ.get(name)), "set" if os.environ.get(name) else f"not set (used by {use})",
                  f"export {name}=... to enable it") for name, use in API_KEYS]


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
