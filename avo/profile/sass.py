"""Read what the compiler made: ptxas -v reports, cuobjdump resource usage, SASS and PTX instruction histograms.

The tools are the ones Triton's wheel bundles (triton/backends/nvidia/bin): they understand the PTX versions Triton
emits, which an older system CUDA may not, and they run without a GPU.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

# Instruction families a kernel engineer looks for, by SASS base opcode. On sm_100a tcgen05.mma assembles to UTC*MMA
# (UTCHMMA for f16/bf16, UTCQMMA for fp8), tcgen05.ld/st to LDTM/STTM and tcgen05.cp to UTCCP.
SASS_FAMILIES = {
    "tensor core (tcgen05.mma)": ("UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCMMA"),
    "tensor memory (tcgen05.ld/st/cp)": ("LDTM", "STTM", "UTCCP"),
    "tensor core (wgmma)": ("HGMMA", "QGMMA", "IGMMA", "BGMMA"),
    "tensor core (mma.sync)": ("HMMA", "IMMA", "DMMA"),
    "TMA": ("UTMALDG", "UTMASTG", "UTMAPF", "UBLKCP", "UTMAREDG"),
    "async copy (cp.async)": ("LDGSTS",),
    "global load/store": ("LDG", "STG"),
    "shared load/store": ("LDS", "STS", "LDSM", "STSM"),
    "local (spills)": ("LDL", "STL"),
    "barriers": ("BAR", "SYNCS", "WARPGROUP", "DEPBAR", "LDGDEPBAR"),
    "exp2 and other MUFU": ("MUFU",),
    "fp32 math": ("FFMA", "FMUL", "FADD", "FMNMX"),
}
_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)")
_PTX_SKIP = re.compile(r"^(?:\.|//|\$|\{|\}|[A-Za-z_$][\w$]*:)")


def tool(name: str) -> str:
    """Path of a CUDA binary tool bundled with Triton (cuobjdump, nvdisasm), else the one on PATH."""
    try:
        from triton import knobs

        return getattr(knobs.nvidia, name).path
    except Exception:
        return name


def run_tool(cmd: list[str], timeout_s: float = 120.0) -> str:
    from avo.util import procs

    returncode, stdout, stderr = procs.run(cmd, timeout_s=timeout_s, merge_stderr=False)
    if returncode is None:
        raise RuntimeError(f"{Path(cmd[0]).name} did not finish within {timeout_s:.0f} s")
    if returncode != 0:
        raise RuntimeError(f"{Path(cmd[0]).name} failed: {(stderr or stdout).strip()[-500:]}")
    return stdout + stderr


def resource_usage(cubin: Path) -> dict[str, dict]:
    """Per function: REG, STACK, SHARED (static), LOCAL (bytes per thread) as cuobjdump reports them."""
    out = run_tool([tool("cuobjdump"), "--dump-resource-usage", str(cubin)])
    found, name = {}, None
    for line in out.splitlines():
        func = re.match(r"\s*Function (\S+):", line)
        if func:
            name = func.group(1)
            continue
        if name and "REG:" in line:
            found[name] = {k: int(v) for k, v in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", line)}
            name = None
    return found


def sass_text(cubin: Path) -> str:
    return run_tool([tool("cuobjdump"), "-sass", str(cubin)])


def split_sass_functions(text: str) -> dict[str, str]:
    """SASS listing per function name."""
    parts: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        head = re.match(r"\s*Function : (\S+)", line)
        if head:
            current = head.group(1)
            parts[current] = []
        elif current is not None:
            parts[current].append(line)
    return {name: "\n".join(lines) for name, lines in parts.items()}


def sass_opcodes(text: str) -> list[str]:
    """The base opcode of each instruction, in order (HGMMA.64x256x16.F32.BF16 is HGMMA); predicates ignored."""
    return [m.group(1) for m in _SASS_LINE.finditer(text)]


def sass_histogram(text: str) -> Counter:
    """Instruction count by base opcode (HGMMA.64x256x16.F32.BF16 counts as HGMMA); predicates ignored."""
    return Counter(op for op in sass_opcodes(text) if op != "NOP")


def families(histogram: Counter) -> dict[str, int]:
    return {family: sum(histogram.get(op, 0) for op in ops) for family, ops in SASS_FAMILIES.items()}


def ptx_histogram(ptx: str) -> Counter:
    """PTX instructions by their first two dotted parts (wgmma.mma_async, ld.global, bar.sync, ...); TMA copies
    (cp.async.bulk.tensor) are kept apart from the per-thread cp.async."""
    counts: Counter = Counter()
    for raw in ptx.splitlines():
        line = raw.strip()
        if not line or _PTX_SKIP.match(line):
            continue
        if line.startswith("@"):
            line = line.split(None, 1)[1] if " " in line else ""
        opcode = line.split(None, 1)[0].rstrip(";") if line else ""
        if not opcode or not opcode[0].isalpha():
            continue
        parts = opcode.split(".")
        key = "cp.async.bulk.tensor" if opcode.startswith("cp.async.bulk.tensor") else ".".join(parts[:2])
        counts[key] += 1
    return counts


def occupancy_estimate(registers: int | None, shared_bytes: int, threads: int, gpu) -> dict | None:
    """Blocks per SM the register file and shared memory allow (registers allocated per warp in units of 256)."""
    if not registers or not threads:
        return None
    warps = -(-threads // 32)
    regs_per_warp = -(-registers * 32 // 256) * 256
    by_regs = gpu.regs_per_sm // (regs_per_warp * warps)
    reserved = 1024  # the driver keeps 1 KiB of shared memory per block on sm_80 and later
    by_smem = (gpu.smem_per_sm_kb * 1024) // (shared_bytes + reserved)
    by_warps = min(64 // warps, 32)  # 64 resident warps and 32 blocks per SM on sm_80 and later
    blocks = min(by_regs, by_smem, by_warps)
    return {"blocks_per_sm": blocks, "by_registers": by_regs, "by_shared_memory": by_smem, "by_warps": by_warps,
            "warps_per_sm": blocks * warps}
