"""The compact profile an agent reads: one dict of headline numbers and a text of at most 40 lines."""

from __future__ import annotations

from avo.profile import ncu_report as nr
from avo.profile.ncu_report import COMPUTE, LAUNCH, MEMORY, OCCUPANCY, SCHEDULER, SOL, WARP_STATE, KernelReport

MAX_LINES = 40


def summarize(kernels: list[KernelReport], *, gpu=None, flops: float | None = None, nbytes: float | None = None,
              case: str | None = None, task: str | None = None) -> dict:
    """Headline numbers of the longest kernel; the roofline position uses every profiled kernel's time together."""
    if not kernels:
        raise ValueError("no kernels to summarize")
    main = max(kernels, key=lambda k: k.duration_us or 0.0)
    total_us = sum(k.duration_us or 0.0 for k in kernels)
    top_stalls, stall_source = nr.stalls(main)
    sm = main.value(SOL, "Compute (SM) Throughput")
    mem = main.value(SOL, "Memory Throughput")
    dynamic = main.value(LAUNCH, "Dynamic Shared Memory Per Block")
    static = main.value(LAUNCH, "Static Shared Memory Per Block")
    summary = {
        "task": task,
        "case": case,
        "gpu": getattr(gpu, "name", None),
        "clock_control": "none",
        "kernel": main.name,
        "grid": main.grid,
        "block": main.block,
        "kernels": [{"name": k.name, "duration_us": _round(k.duration_us, 3)} for k in kernels],
        "duration_us": _round(main.duration_us, 3),
        "total_duration_us": round(total_us, 3),
        "sm_throughput_pct": sm,
        "memory_throughput_pct": mem,
        "dram_throughput_pct": main.value(SOL, "DRAM Throughput"),
        "l2_throughput_pct": main.value(SOL, "L2 Cache Throughput"),
        "l1_throughput_pct": main.value(SOL, "L1/TEX Cache Throughput"),
        "speed_of_light_pct": max(v for v in (sm, mem, 0.0) if v is not None),
        "tensor_pipe_pct": nr.tensor_pipe_pct(main),
        "top_pipe": nr.top_pipe(main),
        "achieved_occupancy_pct": main.value(OCCUPANCY, "Achieved Occupancy"),
        "theoretical_occupancy_pct": main.value(OCCUPANCY, "Theoretical Occupancy"),
        "occupancy_limiters": nr.occupancy_limiters(main),
        "registers_per_thread": main.value(LAUNCH, "Registers Per Thread"),
        "shared_bytes_per_block": None if dynamic is None and static is None else (dynamic or 0) + (static or 0),
        "dynamic_shared_bytes": dynamic,
        "static_shared_bytes": static,
        "waves_per_sm": main.value(LAUNCH, "Waves Per SM"),
        "local_spill_requests": main.value(MEMORY, "Local Memory Spilling Requests"),
        "l2_hit_pct": main.value(MEMORY, "L2 Hit Rate"),
        "l1_hit_pct": main.value(MEMORY, "L1/TEX Hit Rate"),
        "issue_slots_busy_pct": main.value(COMPUTE, "Issue Slots Busy"),
        "active_warps_per_scheduler": main.value(SCHEDULER, "Active Warps Per Scheduler"),
        "eligible_warps_per_scheduler": main.value(SCHEDULER, "Eligible Warps Per Scheduler"),
        "no_eligible_pct": main.value(SCHEDULER, "No Eligible"),
        "cycles_per_issue": main.value(WARP_STATE, "Warp Cycles Per Issued Instruction"),
        "stalls": top_stalls,
        "stall_source": stall_source,
        "bank_conflicts": nr.bank_conflicts(main),
        "rules": nr.rule_hints(main),
        "roofline": None,
    }
    if gpu is not None and flops and nbytes and total_us > 0:
        summary["roofline"] = nr.roofline(flops, nbytes, total_us, gpu)
    return summary


def render(s: dict) -> str:
    """The summary as text for a person or a model: at most MAX_LINES lines."""
    where = " ".join(x for x in (s.get("task"), s.get("case")) if x)
    whose = "the library's kernel " if s.get("source") == "library" else ""
    lines = [f"ncu profile of {whose}{s['kernel']} (grid {s['grid']}, block {s['block']})"
             + (f", {where}" if where else "") + (f", on {s['gpu']}" if s.get("gpu") else "")
             + ", clocks not locked"]
    others = [k for k in s["kernels"] if k["name"] != s["kernel"] or k["duration_us"] != s["duration_us"]]
    line = f"duration {_num(s['duration_us'])} us"
    if others:
        line += f" ({len(s['kernels'])} kernels in the call, {_num(s['total_duration_us'])} us together: " + ", ".join(
            f"{k['name']} {_num(k['duration_us'])} us" for k in others[:3]) + ")"
    lines.append(line)
    r = s.get("roofline")
    if r:
        lines.append(f"roofline: {r['achieved_tflops']} TFLOPS = {r['pct_of_peak_compute']}% of the "
                     f"{r['peak_tflops']:g} bf16 peak; {r['achieved_gbps']:g} GB/s = {r['pct_of_peak_bandwidth']}% "
                     f"of HBM; intensity {r['arithmetic_intensity']:g} FLOP/B vs ridge {r['ridge_point']:g} -> "
                     f"{r['bound']}-bound, "
                     f"{r['pct_of_roofline']}% of attainable")
    lines.append(f"speed of light: SM {_pct(s['sm_throughput_pct'])}, memory {_pct(s['memory_throughput_pct'])} "
                 f"(DRAM {_pct(s['dram_throughput_pct'])}, L2 {_pct(s['l2_throughput_pct'])}, "
                 f"L1 {_pct(s['l1_throughput_pct'])}); L2 hit {_pct(s['l2_hit_pct'])}")
    pipe = s.get("top_pipe")
    pipes = [f"tensor pipe {_pct(s['tensor_pipe_pct'])}"] if s.get("tensor_pipe_pct") is not None else []
    if pipe:
        pipes.append(f"busiest pipe {pipe['name']} {_pct(pipe['pct'])}"
                     + (f" (mostly {pipe['dominated_by']})" if pipe.get("dominated_by") else ""))
    if pipes:
        lines.append("pipes: " + "; ".join(pipes))
    limiters = ", ".join(s["occupancy_limiters"]) or "?"
    lines.append(f"occupancy: achieved {_pct(s['achieved_occupancy_pct'])} of theoretical "
                 f"{_pct(s['theoretical_occupancy_pct'])}, limited by {limiters}")
    lines.append(f"resources: {_num(s['registers_per_thread'])} registers/thread, {_num(s['dynamic_shared_bytes'])} B "
                 f"dynamic + {_num(s['static_shared_bytes'])} B static shared/block, "
                 f"{_num(s['waves_per_sm'])} waves/SM, local-memory spill requests {_num(s['local_spill_requests'])}")
    lines.append(f"issue: slots busy {_pct(s['issue_slots_busy_pct'])}, eligible warps/scheduler "
                 f"{_num(s['eligible_warps_per_scheduler'])} of {_num(s['active_warps_per_scheduler'])} active, "
                 f"no eligible warp {_pct(s['no_eligible_pct'])} of cycles, {_num(s['cycles_per_issue'])} cycles "
                 "between issues per warp")
    if s["stalls"]:
        source = "" if s["stall_source"] == "metrics" else " (from ncu's rules)"
        lines.append(f"top stalls{source}, share of the cycles between issues:")
        lines += [f"  {st['reason']}: {st['pct']:g}%" for st in s["stalls"]]
    conflicts = s.get("bank_conflicts")
    if conflicts:
        lines.append(f"shared-memory bank conflicts: {_num(conflicts['load'])} on loads "
                     f"({_num(conflicts['load_wavefronts'])} wavefronts), {_num(conflicts['store'])} on stores "
                     f"({_num(conflicts['store_wavefronts'])} wavefronts)")
    if s["rules"]:
        lines.append("ncu hints:")
        for rule in s["rules"]:
            gain = f" ~{rule['speedup_pct']:g}%" if rule["speedup_pct"] else ""
            lines.append(f"  [{rule['type']}{gain}] {rule['name']}: {rule['hint']}")
    return "\n".join(lines[:MAX_LINES])


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _num(value) -> str:
    if value is None:
        return "?"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"


def _pct(value) -> str:
    return "?" if value is None else f"{value:g}%"
