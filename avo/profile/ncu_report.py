"""Read Nsight Compute's `--csv --page details` output and boil it down to what a kernel engineer looks at first.

The details page has one row per (kernel launch, section, metric) and one row per rule result (metric columns empty,
rule columns filled). Numbers carry thousands separators ("193,312"); "n/a" and "no data" mean not measured.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

# Section names as the details page prints them (metric rows use the display name).
SOL = "GPU Speed Of Light Throughput"
COMPUTE = "Compute Workload Analysis"
MEMORY = "Memory Workload Analysis"
LAUNCH = "Launch Statistics"
OCCUPANCY = "Occupancy"
SCHEDULER = "Scheduler Statistics"
WARP_STATE = "Warp State Statistics"
EXTRA = "Command line profiler metrics"

STALL_METRIC = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
TENSOR_PIPE_METRICS = (
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
)
BANK_CONFLICT_METRICS = {
    "load": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "store": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "load_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "store_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
}
_TIME_UNITS_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
                  "s": 1e6, "second": 1e6}
_BLOCK_LIMITS = {"Block Limit Registers": "registers", "Block Limit Shared Mem": "shared memory",
                 "Block Limit Warps": "warps per SM", "Block Limit SM": "blocks per SM",
                 "Block Limit Barriers": "barriers"}


@dataclass
class Rule:
    section: str
    name: str
    kind: str
    """OPT (an optimization with an estimated speedup), WRN, INF."""
    text: str
    speedup_pct: float | None


@dataclass
class KernelReport:
    """Every metric and rule ncu reported for one profiled launch."""

    id: str
    name: str
    block: str
    grid: str
    metrics: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(section, metric name) -> (value as printed, unit)."""
    rules: list[Rule] = field(default_factory=list)

    def value(self, section: str, metric: str) -> float | None:
        raw = self.metrics.get((section, metric))
        return None if raw is None else to_number(raw[0])

    def unit(self, section: str, metric: str) -> str:
        return self.metrics.get((section, metric), ("", ""))[1]

    def extra(self, metric: str) -> float | None:
        return self.value(EXTRA, metric)

    @property
    def duration_us(self) -> float | None:
        value = self.value(SOL, "Duration")
        if value is None:
            value = self.extra("gpu__time_duration.sum")
            unit = self.unit(EXTRA, "gpu__time_duration.sum")
        else:
            unit = self.unit(SOL, "Duration")
        factor = _TIME_UNITS_US.get(unit)
        return None if value is None or factor is None else value * factor


def to_number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def parse_details_csv(text: str) -> list[KernelReport]:
    """Kernel reports in launch order; lines before the CSV header (==PROF==, ==WARNING==, program output) are
    skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",') and '"Metric Name"' in line), None)
    if start is None:
        return []
    kernels: dict[str, KernelReport] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        kid = row.get("ID")
        if not kid or not kid.isdigit():
            continue  # text ncu printed after the table
        report = kernels.get(kid)
        if report is None:
            report = kernels[kid] = KernelReport(kid, row.get("Kernel Name") or "?", row.get("Block Size") or "",
                                                 row.get("Grid Size") or "")
        section = row.get("Section Name") or ""
        if row.get("Metric Name"):
            value, unit = row.get("Metric Value") or "", row.get("Metric Unit") or ""
            report.metrics[(section, row["Metric Name"])] = (value, unit)
        elif row.get("Rule Name"):
            report.rules.append(Rule(section, row["Rule Name"], row.get("Rule Type") or "",
                                     row.get("Rule Description") or "", to_number(row.get("Estimated Speedup") or "")))
    return list(kernels.values())


def stalls(kernel: KernelReport, top: int = 5) -> tuple[list[dict], str]:
    """Top stall reasons as % of the cycles between two issued instructions, and where they came from.

    With the per-reason metrics collected (smsp__average_warps_issue_stalled_*), each reason's cycles per issued
    instruction divided by the total gives its share; otherwise the share quoted by ncu's CPIStall rules.
    """
    per_issue = kernel.value(WARP_STATE, "Warp Cycles Per Issued Instruction")
    found = []
    for (section, metric), (raw, _unit) in kernel.metrics.items():
        match = STALL_METRIC.match(metric) if section == EXTRA else None
        value = to_number(raw) if match else None
        if match and value and per_issue and match.group(1) != "selected":
            found.append({"reason": match.group(1), "pct": round(100.0 * value / per_issue, 1)})
    if found:
        return sorted(found, key=lambda s: -s["pct"])[:top], "metrics"
    for rule in kernel.rules:
        what = re.search(r"spends ([\d.]+) cycles being stalled (.+?)\.(?:\s|$)", rule.text)
        share = re.search(r"represents about ([\d.]+)% of the total", rule.text)
        if rule.name == "CPIStall" and what and share:
            found.append({"reason": what.group(2), "pct": float(share.group(1))})
    return sorted(found, key=lambda s: -s["pct"])[:top], "rules"


def hint(rule: Rule, limit: int = 170) -> str:
    """The sentences of a rule that carry numbers (the rest is boilerplate), shortened."""
    sentences = re.split(r"(?<=[.!?])\s+", rule.text.strip())
    kept = [s for s in sentences if re.search(r"\d", s) and "http" not in s][:2]
    text = " ".join(kept)
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def rule_hints(kernel: KernelReport, top: int = 6) -> list[dict]:
    found = []
    for rule in kernel.rules:
        text = hint(rule)
        if text and "could not be found" not in rule.text:
            found.append({"name": rule.name, "type": rule.kind, "speedup_pct": rule.speedup_pct, "hint": text})
    found.sort(key=lambda r: -(r["speedup_pct"] or 0.0))
    return found[:top]


def top_pipe(kernel: KernelReport) -> dict | None:
    for rule in kernel.rules:
        match = re.search(r"(\w[\w ()]*?) is the highest-utilized pipeline \(([\d.]+)%\)", rule.text)
        if match:
            sub = re.search(r"dominated by its (.+?) sub-pipeline", rule.text)
            return {"name": match.group(1), "pct": float(match.group(2)), "dominated_by": sub.group(1) if sub else None}
    return None


def occupancy_limiters(kernel: KernelReport) -> list[str]:
    limits = {label: kernel.value(OCCUPANCY, metric) for metric, label in _BLOCK_LIMITS.items()}
    limits = {label: v for label, v in limits.items() if v is not None}
    if not limits:
        return []
    least = min(limits.values())
    return [label for label, v in limits.items() if v == least]


def bank_conflicts(kernel: KernelReport) -> dict | None:
    found = {key: kernel.extra(metric) for key, metric in BANK_CONFLICT_METRICS.items()}
    return found if found["load"] is not None or found["store"] is not None else None


def tensor_pipe_pct(kernel: KernelReport) -> float | None:
    values = [v for v in (kernel.extra(m) for m in TENSOR_PIPE_METRICS) if v is not None]
    return max(values) if values else None


def roofline(flops: float, nbytes: float, duration_us: float, gpu) -> dict:
    """Where a run of `duration_us` sits against the GPU profile's bf16 compute peak and HBM bandwidth."""
    seconds = duration_us * 1e-6
    tflops = flops / seconds / 1e12
    gbps = nbytes / seconds / 1e9
    intensity = flops / nbytes if nbytes else float("inf")
    ridge = gpu.peak_bf16_tflops * 1e3 / gpu.hbm_gbps
    attainable = min(gpu.peak_bf16_tflops, intensity * gpu.hbm_gbps / 1e3)
    return {
        "achieved_tflops": round(tflops, 1),
        "peak_tflops": gpu.peak_bf16_tflops,
        "pct_of_peak_compute": round(100.0 * tflops / gpu.peak_bf16_tflops, 1),
        "achieved_gbps": round(gbps, 1),
        "peak_gbps": gpu.hbm_gbps,
        "pct_of_peak_bandwidth": round(100.0 * gbps / gpu.hbm_gbps, 1),
        "arithmetic_intensity": round(intensity, 1),
        "ridge_point": round(ridge, 1),
        "bound": "compute" if intensity >= ridge else "memory",
        "pct_of_roofline": round(100.0 * tflops / attainable, 1),
    }
