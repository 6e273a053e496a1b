"""CUDA sources of a candidate compiled with nvcc, for machines without a GPU: compile errors and per-kernel
register, spill and shared-memory figures, but nothing is run.

Each .cu file is compiled as kernel.py declared it through `avo.cuda.load_module` (its -D defines and options) when
kernel.py was imported in this process, and otherwise with the defaults written in the source.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import NamedTuple

from avo.util import procs
from avo.cuda import Build, CudaCompileError, check_includes, declared_builds, trim_log
from avo.cuda_source import PERFORMANCE_NOTICE

DEFAULT_TIMEOUT_S = 180.0
# NVRTC options nvcc does not take, and what they become there (None: dropped; both compilers see the same code).
_NVRTC_ONLY = {"-default-device": None, "--device-as-default-execution-space": None, "--pch": None,
               "--generate-line-info": "-lineinfo", "-lineinfo": "-lineinfo"}
_SKIP_DIRS = ("__pycache__", ".git")
_PTXAS_REPORT = re.compile(r"ptxas info\s*:|\s+\d+ bytes stack frame")


class CompileCheck(NamedTuple):
    ok: bool
    log: str
    """The compiler's errors, or its warnings after a success, trimmed; empty when it had nothing to say."""
    resources: dict[str, dict]
    """Per kernel: source, registers, spill_store_bytes, spill_load_bytes, stack_bytes, static_shared_bytes."""


class CompilerUnavailable(RuntimeError):
    """No nvcc here: the sources could not be checked (the machine's fault, not the candidate's)."""


def has_cuda_sources(candidate_dir: Path) -> bool:
    return any(not any(d in p.parts for d in _SKIP_DIRS) for p in Path(candidate_dir).rglob("*.cu"))


def no_gpu_outcome(candidate_dir: Path, arch: str) -> tuple[str, str, str]:
    """(status, rule, message) for a CUDA candidate where there is no GPU: ("compile_error", "compile", nvcc's
    messages) if its sources do not compile, else ("not_run", "device.no_gpu", what compiled and that nothing ran)."""
    try:
        check = compile_check(candidate_dir, arch)
    except CompilerUnavailable as exc:
        return "not_run", "device.no_gpu", f"CUDA kernels need a GPU to run, and {exc}"
    if not check.ok:
        return "compile_error", "compile", check.log
    kernels = "; ".join(f"{name}: {r['registers']} registers, {r['spill_store_bytes']} B spill stores, "
                        f"{r['static_shared_bytes']} B static shared memory" for name, r in check.resources.items())
    warnings = f"\n{check.log}" if check.log else ""
    return ("not_run", "device.no_gpu", f"compiled for {arch} with nvcc ({kernels or 'no kernels'}); CUDA kernels "
            f"need a GPU to run, so none was checked or timed here{warnings}")


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    path = os.path.join(home, "bin", "nvcc")
    return path if os.path.isfile(path) else None


def compile_check(candidate_dir: Path, arch: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                  cubin_dir: Path | None = None, builds: list[Build] | None = None) -> CompileCheck:
    """Compile every .cu file of the candidate for `arch` (e.g. sm_90a) with `nvcc -cubin -Xptxas -v`.

    Raises CompilerUnavailable when there is no nvcc; a candidate whose sources do not compile gets ok=False and
    the compiler's messages in `log`. With `cubin_dir`, the cubins are kept there and each kernel's facts name its
    cubin (for disassembly). `builds`: the builds kernel.py declared, read elsewhere (avo inspect imports it in a
    sandboxed child); by default those it declared in this process. A source no build names compiles with none.
    """
    folder = Path(candidate_dir).resolve()
    sources = sorted(p for p in folder.rglob("*.cu") if not any(d in p.parts for d in _SKIP_DIRS))
    builds = list(builds) if builds is not None else declared_builds(folder)
    declared = {b.source for b in builds}
    builds += [Build(p, folder, ()) for p in sources if p not in declared]
    if not builds:
        return CompileCheck(True, "", {})
    nvcc = find_nvcc()
    if nvcc is None:
        raise CompilerUnavailable("nvcc was not found on PATH or in $CUDA_HOME/bin: the CUDA sources could not be "
                                  "compiled")
    try:
        check_includes(folder)
    except CudaCompileError as exc:
        return CompileCheck(False, exc.message, {})
    ok, logs, resources = True, [], {}
    with procs.temp_dir("nvcc") as tmp:
        for i, build in enumerate(builds):
            cubin = Path(cubin_dir or tmp) / f"{i}.cubin"
            compiled, log, found = _compile(nvcc, build, arch, cubin, timeout_s)
            ok &= compiled
            if log:
                logs.append(log)
            for name, facts in found.items():
                if cubin_dir is not None:
                    facts["cubin"] = str(cubin)
                key, n = name, 2
                while key in resources:  # the same kernel in another build of the source
                    key, n = f"{name} #{n}", n + 1
                resources[key] = facts
    return CompileCheck(ok, "\n".join(logs), resources)


def nvcc_command(nvcc: str, build: Build, arch: str, output: Path) -> list[str]:
    flags = []
    for flag in build.flags:
        if flag in _NVRTC_ONLY:
            if _NVRTC_ONLY[flag]:
                flags.append(_NVRTC_ONLY[flag])
        else:
            flags.append(flag)
    return [nvcc, "-cubin", f"-arch={arch}", "-std=c++17", "-lineinfo", "-Xptxas", "-v", f"-I{build.folder}",
            *flags, "-o", str(output), str(build.source)]


def _compile(nvcc: str, build: Build, arch: str, output: Path, timeout_s: float) -> tuple[bool, str, dict]:
    name = build.source.relative_to(build.folder).as_posix()
    returncode, stdout, stderr = procs.run(nvcc_command(nvcc, build, arch, output), timeout_s=timeout_s,
                                           cwd=output.parent, merge_stderr=False)
    if returncode is None:
        return False, f"{name}: nvcc did not finish compiling it within {timeout_s:.0f} s", {}
    text = stdout + stderr
    messages = "\n".join(ln for ln in text.splitlines() if ln.strip() and not _PTXAS_REPORT.match(ln))
    if returncode != 0:
        return False, f"{name}: nvcc could not compile it for {arch}:\n{trim_log(messages, build.folder)}", {}
    resources = {}
    for kernel, facts in parse_ptxas_verbose(text).items():
        resources[kernel] = {"source": name, "defines": [f[2:] for f in build.flags if f.startswith("-D")], **facts}
    log = f"{name}: nvcc warnings:\n{trim_log(messages, build.folder)}" if messages else ""
    return True, log, resources


def parse_ptxas_verbose(text: str) -> dict[str, dict]:
    """Per function: registers, spill store/load bytes, stack frame and static shared bytes, from `ptxas -v` output,
    and `wgmma_serialized`: ptxas's reason when it serialized the function's wgmma instructions (its "Potential
    Performance Loss" notice, C7510-C7519, which is neither an error nor a warning: every matmul then waits for the
    one before it, and a kernel built to overlap them loses that), else None."""
    found: dict[str, dict] = {}
    current: dict | None = None
    for line in text.splitlines():
        entry = re.search(r"Compiling entry function '([^']+)'|Function properties for (\S+)", line)
        serialized = PERFORMANCE_NOTICE.search(line)
        if entry or serialized:
            name = serialized.group(3) if serialized else entry.group(1) or entry.group(2)
            current = found.setdefault(name, {
                "registers": None, "spill_store_bytes": 0, "spill_load_bytes": 0, "stack_bytes": 0,
                "static_shared_bytes": 0, "wgmma_serialized": None})
            if serialized:
                current["wgmma_serialized"] = serialized.group(2).strip()
            continue
        if current is None:
            continue
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if frame:
            current["stack_bytes"], current["spill_store_bytes"], current["spill_load_bytes"] = map(int, frame.groups())
        used = re.search(r"Used (\d+) registers", line)
        if used:
            current["registers"] = int(used.group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            current["static_shared_bytes"] = int(smem.group(1)) if smem else 0
    return found
