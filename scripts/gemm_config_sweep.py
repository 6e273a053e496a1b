"""gemm/cuda_wgmma's configurations side by side on the shapes where the per-shape choice matters: every tile build,
K split (every tile cut) and split tail (only the last wave's tiles cut) the wrapper could take, timed against
torch.matmul (cuBLAS) in one process.

A shape's configurations and cuBLAS are timed interleaved, call by call, by the evaluator's own timer
(avo.evaluate.worker.timing.time_as_configured with EvalConfig's defaults: L2 flushed, the host's launch work hidden
behind a GPU spin, inputs rotated), so the figures are the GPU's and clock drift weighs on all of them alike (timed
one after another, the first configuration of a shape read up to 14% slow on the H200). Prints one line per shape and
configuration (speedup over cuBLAS) and the best one per shape; `--json` keeps them all. `--plans` times only the
seed's own plan with the split tail on and off (TAIL_SPLITS=1) and stream-K on and off (STREAM_K=False), and the
geometric mean of each, and then all of them as a Markdown table (shape by configuration, as BENCHMARKS.md has
them). `--stream` times, beside those, stream-K forced at each tile width over the tiles past the
last full wave and past the last two, with up to 1, 4 or 8 tiles of a tile column dealt to blocks sharing a run
(`stream256w1l8`: 256 wide, one wave, 8 lanes); on few-token shapes the 64-row tile's tiles past the full waves, or
all of them (`streamfeww1l1`, `streamfeww0l1`); and a tall 256 x 128 tile (two 128-row consumers, `tall`) with its
own plan and stream-K past the full waves or over all its tiles (`talls128w1l1`, `talls128w0l1`), up to
`--tall-max-m` rows. `--variant LABEL:KNOB=VALUE,...` (repeatable) adds to `--plans` the seed's own plan with those
knobs set (bucketed entries as KNOB@BUCKET), to see which entry pays in which group of rows. `--other LABEL:FOLDER`
(repeatable) adds another copy of the seed (the tree's gemm.cu before a change, say) with its own plan;
`--plan-only` leaves out the plan's split-tail and stream-K alternatives.

    python3 scripts/gemm_config_sweep.py --plans --shapes 1024x3072x2048 --variant deep:STAGES_192=4
    python3 scripts/gemm_config_sweep.py --suite wide --max-m 1024 --json sweep.json
    python3 scripts/gemm_config_sweep.py --plans --suite wide --max-m 16384
    python3 scripts/gemm_config_sweep.py --plans --shapes 1024x10240x8192,256x10240x8192
    python3 scripts/gemm_config_sweep.py --stream --suite wide --max-m 16384
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from avo.evaluate.result import geomean  # noqa: E402

SEED = ROOT / "kernels" / "gemm" / "cuda_wgmma"
LIBRARY = "cublas"
VARIANTS = {  # name -> knob settings of the seed's kernel.py (bucketed entries as NAME@BUCKET)
    "few64x256s4": {"FEW_ROWS": 64, "BLOCK_N@few": 256, "STAGES@few": 4},
    "few64x128s6": {"FEW_ROWS": 64, "BLOCK_N@few": 128, "STAGES@few": 6},
    "few64x64s8": {"FEW_ROWS": 64, "BLOCK_N@few": 64, "STAGES@few": 8},
    "large128x256s3": {"FIT_WIDTHS": False, "BLOCK_N": 256, "STAGES": 3},
    "large128x128s4": {"FIT_WIDTHS": False, "BLOCK_N": 128, "STAGES": 4},
    "large128x192s3": {"FIT_WIDTHS": False, "BLOCK_N": 192, "STAGES": 3},
}
# --plans: the seed's own choice, with the split tail or stream-K off
PLANS = {"plan": {}, "plan-no-tail": {"TAIL_SPLITS": 1, "STREAM_K": False}, "plan-no-stream": {"STREAM_K": False}}
# --stream: stream-K forced per width and waves, up to `lanes` tiles of a tile column to blocks sharing a run
STREAMS = [(width, waves, lanes) for width, waves in ((256, 1), (256, 2), (192, 1), (128, 1)) for lanes in (1, 4, 8)]
FEW_STREAMS = [("few", 1, 1), ("few", 0, 1)]  # waves 0: every tile dealt out, none whole
TALL = {"BLOCK_M": 256, "BLOCK_N": 128, "FIT_WIDTHS": False, "STAGES": 3}
TALL_STREAMS = [(128, 1, 1), (128, 0, 1)]


def stream_name(width, waves: int, lanes: int, prefix: str = "stream") -> str:
    return f"{prefix}{width}w{waves}l{lanes}"


def variant(name: str, settings: dict, root: Path, seed: Path = SEED):
    """The seed (or another copy of it, `seed`) with `settings` written into its knobs (the heuristic agent's own
    editor), loaded."""
    from avo.agent.heuristic.knobs import render
    from avo.evaluate.worker.loader import load_entry

    folder = root / name
    folder.mkdir()
    for path in seed.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    (folder / "kernel.py").write_text(render((seed / "kernel.py").read_text(), settings))
    return load_entry(folder, "gemm")


def forced(gemm, work: str, parts: int):
    """The variant's wrapper with its work fixed (its own tile otherwise), planned afresh: "split" cuts every tile
    into `parts` along K, "tail" only the tiles past the full waves; `parts` 1 runs every tile whole."""
    g = gemm.__globals__
    plan = g.setdefault("_own_plan", g["plan"])

    def fixed(M, N, K, sms):
        own = plan(M, N, K, sms)
        slots = sms // own.build.cluster
        whole = own.tiles if parts == 1 else 0 if work == "split" else own.tiles // slots * slots
        return own._replace(whole=whole, splits=1 if whole == own.tiles else min(parts, -(-K // 64)), stream=0)

    g["plan"] = fixed
    g["_PLANS"].clear()
    g["_LAUNCHES"].clear()
    return gemm


def forced_stream(gemm, width, waves: int):
    """The seed's wrapper with stream-K forced on `width`-wide tiles ("few": the few-token tile) past all but
    `waves` - 1 full waves, or over every tile with `waves` 0 (all its tiles whole where every wave is full, or the
    width is not built)."""
    g = gemm.__globals__
    plan = g.setdefault("_own_plan", g["plan"])

    def fixed(M, N, K, sms):
        own = plan(M, N, K, sms)
        build = g["_FEW"] if width == "few" else g["_LARGE"].get(width)
        if build is None or (M <= g["FEW_ROWS"]) != (width == "few"):
            return own
        count = -(-M // build.block_m) * -(-N // build.block_n)
        rows = -(-M // (build.block_m * build.cluster_m))
        every = waves or count // sms + 1
        planned = None if count % sms == 0 else g["stream_plan"](build, count, every, -(-K // 64), sms, rows)[1]
        return planned or g["Plan"](build, count, count, 1)

    g["plan"] = fixed
    g["_PLANS"].clear()
    g["_LAUNCHES"].clear()
    return gemm


def options(args, m: int) -> list[tuple[str, str, int]]:
    """(variant, work, parts) to time for a shape with m rows."""
    if args.plans or args.stream:
        few = m <= 64
        tall = args.stream and not few and m <= args.tall_max_m
        plans = ["plan"] if args.plan_only else list(PLANS)
        return [(name, "own", 0) for name in (*plans, *args.variant, *args.other)] + \
            [(stream_name(*forced), "stream", forced[:2]) for forced in (FEW_STREAMS if few else STREAMS)
             if args.stream] + \
            [("tall", "own", 0)] * tall + \
            [(stream_name(*forced, prefix="talls"), "stream", forced[:2]) for forced in TALL_STREAMS if tall]
    few = [name for name in VARIANTS if name.startswith("few") == (m <= 64)]
    return [(name, "split", s) for name in few for s in args.splits] + \
        [(name, "tail", s) for name in few for s in args.tails if m > 64]


def shapes(args) -> list[tuple[str, int, int, int]]:
    from avo.tasks import load

    if args.shapes:
        return args.shapes
    return [(c.name, c.params["M"], c.params["N"], c.params["K"]) for c in load("gemm").cases(args.suite)
            if c.params["M"] <= args.max_m]


def settings(variants: dict[str, dict]) -> dict[str, dict]:
    """Every configuration's knob settings by name."""
    found = {**PLANS, **VARIANTS, "tall": TALL, **variants}
    found.update({stream_name(*forced): {"STREAM_LANES": forced[2]} for forced in STREAMS + FEW_STREAMS})
    found.update({stream_name(*forced, prefix="talls"): {**TALL, "STREAM_LANES": forced[2]} for forced in TALL_STREAMS})
    return found


def main() -> None:
    import torch

    from avo.config import EvalConfig
    from avo.evaluate.worker.timing import Contender, InputRotation, time_as_configured
    from avo.gpus import resolve

    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", default="wide")
    parser.add_argument("--max-m", type=int, default=1024)
    parser.add_argument("--shapes", type=_shapes, help="MxNxK,... timed instead of the suite's cases")
    parser.add_argument("--splits", type=_ints, default="1,2,3,4,6,8", help="split-K parts to time")
    parser.add_argument("--tails", type=_ints, default="2,3,4", help="split-tail parts to time")
    parser.add_argument("--plans", action="store_true", help="only the seed's own plan, split tail on and off")
    parser.add_argument("--plan-only", action="store_true",
                        help="with --plans: the seed's plan without its split-tail and stream-K alternatives")
    parser.add_argument("--stream", action="store_true", help="the plans, and stream-K forced per width and waves")
    parser.add_argument("--tall-max-m", type=int, default=1024, help="--stream: the tall tile up to these rows")
    parser.add_argument("--variant", type=_variant, action="append", default=[],
                        help="LABEL:KNOB=VALUE,... the seed's plan with those knobs set, timed with --plans")
    parser.add_argument("--other", type=_other, action="append", default=[],
                        help="LABEL:FOLDER another copy of the seed (an older gemm.cu, say), its own plan timed beside")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.variant, args.other = dict(args.variant), dict(args.other)
    root, known, cfg, gpu = Path(tempfile.mkdtemp()), settings(args.variant), EvalConfig(), resolve("auto", "cuda")
    entries: dict = {}

    def entry(label: str, name: str, work: str, parts):
        """One loaded variant per configuration timed (forcing a plan rewrites the variant's wrapper)."""
        if label not in entries:
            gemm = variant(label.replace(":", "-"), known.get(name, {}), root, args.other.get(name, SEED))
            entries[label] = forced_stream(gemm, *parts) if work == "stream" else \
                forced(gemm, work, parts) if work != "own" else gemm
        return entries[label]

    rows = []
    for case, m, n, k in shapes(args):
        configs = {(name if work in ("own", "stream") else f"{name}:{work}{parts}"): (name, work, parts)
                   for name, work, parts in options(args, m)}
        gemms = {label: entry(label, *config) for label, config in configs.items()}
        sources = [(torch.randn((m, k), device="cuda", dtype=torch.bfloat16),
                    torch.randn((k, n), device="cuda", dtype=torch.bfloat16)) for _ in range(cfg.input_sets)]
        expected = torch.matmul(*sources[0]).float()
        errors = {label: ((gemm(*sources[0]).float() - expected).norm() / expected.norm()).item()
                  for label, gemm in gemms.items()}
        rotation = InputRotation(sources, seed=7)
        # Every configuration and cuBLAS interleaved call by call, as the evaluator times (L2 flushed, the launch
        # hidden behind a GPU spin, each round's ratio to cuBLAS), so clock drift weighs on all of them alike.
        contenders = [Contender(LIBRARY, rotation, lambda x: torch.matmul(*x))]
        contenders += [Contender(label, rotation, lambda x, g=gemm: g(*x)) for label, gemm in gemms.items()]
        measured = time_as_configured(contenders, cfg, device="cuda", l2_bytes=gpu.l2_mb << 20,
                                      paired_with=LIBRARY)
        library = measured[LIBRARY].ms
        best = None
        for label, gemm in gemms.items():
            name, work, parts = configs[label]
            ours = measured[label].ms
            plan = gemm.__globals__["_PLANS"][m, n, k, gemm.__globals__["_sm_count"]("cuda")]
            row = {"case": case, "config": label, "work": work, "block_n": plan.build.block_n,
                   "block_m": plan.build.block_m, "tiles": plan.tiles, "whole": plan.whole, "splits": plan.splits,
                   "stream": plan.stream, "lanes": plan.lanes, "ms": ours, "library_ms": library,
                   "speedup": library / ours, "rel_err": errors[label]}
            rows.append(row)
            print(f"{case:20s} {label:16s} {plan.build.block_m}x{plan.build.block_n}, {plan.whole:5d} of "
                  f"{plan.tiles:5d} tiles whole, others in {plan.splits}"
                  f"{f' over {plan.stream} blocks, {plan.lanes} a run' if plan.stream else ''}: "
                  f"{row['speedup']:6.3f}x  ({ours * 1e3:7.1f} us, cublas {library * 1e3:7.1f} us, "
                  f"err {errors[label]:.1e})", flush=True)
            if best is None or row["speedup"] > best["speedup"]:
                best = row
        print(f"BEST {case:20s} {best['config']} {best['block_m']}x{best['block_n']}, {best['whole']} whole, "
              f"splits {best['splits']}: {best['speedup']:.3f}x", flush=True)
        del sources, rotation, contenders
        torch.cuda.empty_cache()
    if args.plans or args.stream:
        for name, ratios in speedups_by_config(rows).items():
            print(f"GEOMEAN {name:16s} over {len(ratios)} timings: "
                  f"{geomean(ratios):.3f}x cuBLAS on {torch.cuda.get_device_name()}")
        print(markdown_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def speedups_by_config(rows: list[dict]) -> dict[str, list[float]]:
    """config -> its speedups over the shapes it ran, the configs in the order they were first timed."""
    found: dict[str, list[float]] = {}
    for row in rows:
        found.setdefault(row["config"], []).append(row["speedup"])
    return found


def markdown_table(rows: list[dict]) -> str:
    """The speedups as a Markdown table for BENCHMARKS.md: a row per shape, a column per configuration (the best of a
    shape in bold), cuBLAS's time, and a last row of each configuration's geometric mean over the shapes it ran."""
    speedups = speedups_by_config(rows)
    configs = list(speedups)
    cases = list(dict.fromkeys(row["case"] for row in rows))
    found = {(row["case"], row["config"]): row for row in rows}
    lines = ["| shape | " + " | ".join(configs) + " | cuBLAS µs |", "|---|" + "---:|" * (len(configs) + 1)]
    for case in cases:
        mine = [found.get((case, config)) for config in configs]
        best = max(row["speedup"] for row in mine if row)
        cells = ["" if row is None else f"**{row['speedup']:.3f}**" if row["speedup"] == best
                 else f"{row['speedup']:.3f}" for row in mine]
        library = next(row for row in mine if row)["library_ms"] * 1e3
        lines.append(f"| {case.replace('x', '×')} | " + " | ".join(cells) + f" | {library:.1f} |")
    means = [f"{geomean(ratios):.3f}" for ratios in speedups.values()]
    lines.append("| geomean | " + " | ".join(means) + " | |")
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",")]


def _variant(text: str) -> tuple[str, dict]:
    import ast

    label, _, knobs = text.partition(":")
    try:
        found = {name: ast.literal_eval(value) for name, value in (knob.split("=") for knob in knobs.split(","))}
    except (ValueError, SyntaxError):
        found = {}
    if not label.isidentifier() or not found:
        raise argparse.ArgumentTypeError(f"{text!r}: give LABEL:KNOB=VALUE,... (e.g. lag:MMA_LAG=True)")
    return label, found


def _other(text: str) -> tuple[str, Path]:
    label, _, folder = text.partition(":")
    if not label.isidentifier() or not (Path(folder) / "kernel.py").is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: give LABEL:FOLDER, a folder holding a copy of the seed")
    return label, Path(folder)


def _shapes(text: str) -> list[tuple[str, int, int, int]]:
    try:
        found = [(s, *(int(x) for x in s.split("x"))) for s in text.split(",")]
    except ValueError:
        found = []
    if not found or any(len(shape) != 4 or min(shape[1:]) < 1 for shape in found):
        raise argparse.ArgumentTypeError(f"{text!r}: give MxNxK,... (e.g. 1024x10240x8192)")
    return found


if __name__ == "__main__":
    main()
