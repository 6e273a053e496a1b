"""Where a kernel's warps stall, instruction by instruction, read from Nsight Compute's source page (a report taken
with `--set full`, or with the SourceCounters section):

    ncu --set full -k regex:gemm_bf16 --launch-skip 1 --launch-count 1 -o /tmp/plan \\
        python3 scripts/gemm_ncu.py 256x8192x28672
    ncu -i /tmp/plan.ncu-rep --page source --csv --print-source sass > plan_sass.csv
    python3 scripts/sass_stalls.py plan_sass.csv r2_sass.csv --top 20

Per file: the stall reasons' shares of all samples; the instructions with the most samples (the low 16 bits of the
address, the times it ran, the instruction, its three largest reasons); and every mbarrier wait (`TRYWAIT`) with the
times it ran. A wait that fails its first try loops back to a second `TRYWAIT`, so that one's count is the retries.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path
from typing import NamedTuple

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


class Instruction(NamedTuple):
    address: int
    text: str
    samples: float
    executed: int
    stalls: dict[str, float]  # reason (without "stall_") -> samples


def _number(text: str) -> float:
    return float(text.replace(",", "")) if text.strip() else 0.0


def read(path: Path) -> list[Instruction]:
    """The instructions of the (first) kernel in a source-page CSV."""
    rows = list(csv.reader(path.open()))
    start = next((i for i, row in enumerate(rows) if row[:2] == ["Address", "Source"]), None)
    if start is None:
        raise ValueError(f"{path}: no 'Address,Source' header (take it with --page source --csv --print-source sass)")
    header = rows[start]
    at = {name: i for i, name in enumerate(header)}
    reasons = [n for n in header if n.startswith("stall_") and not n.endswith("(Not Issued)")]
    found = []
    for row in rows[start + 1:]:
        if len(row) < len(header) - 1 or not row[0].startswith("0x"):
            break  # the next kernel's table, or the end
        found.append(Instruction(int(row[0], 16), row[at["Source"]].strip(), _number(row[at[SAMPLES]]),
                                 int(_number(row[at[EXECUTED]])),
                                 {n[len("stall_"):]: _number(row[at[n]]) for n in reasons}))
    return found


def reason_shares(instructions: list[Instruction]) -> dict[str, float]:
    """Each stall reason's share of all samples, largest first."""
    total = sum(i.samples for i in instructions) or 1.0
    sums: Counter[str] = Counter()
    for ins in instructions:
        sums.update(ins.stalls)
    return {reason: n / total for reason, n in sums.most_common()}


def hottest(instructions: list[Instruction], top: int) -> list[Instruction]:
    return sorted(instructions, key=lambda i: -i.samples)[:top]


def waits(instructions: list[Instruction]) -> list[Instruction]:
    return [i for i in instructions if "TRYWAIT" in i.text]


def report(path: Path, top: int) -> str:
    instructions = read(path)
    total = sum(i.samples for i in instructions) or 1.0
    lines = [f"== {path.name}: {len(instructions)} instructions, {total:.0f} samples",
             "reasons: " + " ".join(f"{r} {s:.1%}" for r, s in list(reason_shares(instructions).items())[:8])]
    for ins in hottest(instructions, top):
        main = sorted(ins.stalls.items(), key=lambda item: -item[1])[:3]
        lines.append(f"{ins.address & 0xFFFF:5x} {ins.samples / total:6.1%} ran {ins.executed:9d}  {ins.text[:64]:64s} "
                     + " ".join(f"{r} {n / total:.1%}" for r, n in main if n))
    lines.append("mbarrier waits (address, times run):")
    lines += [f"{ins.address & 0xFFFF:5x} ran {ins.executed:9d}  {ins.text[:80]}" for ins in waits(instructions)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    for path in args.files:
        print(report(path, args.top))


if __name__ == "__main__":
    main()
