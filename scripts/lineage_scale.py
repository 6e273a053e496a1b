"""Build a run whose lineage holds N synthetic candidates, then time `avo runs`, `avo show` and `avo diff` on it.

The history is written with `git fast-import` (seconds rather than minutes), using the lineage's own format functions
(avo.run.lineage.records), so every commit has the structure `Lineage.commit` gives it: files plus avo.json, the same
message and trailers, refs/avo/<cid>, refs/accepted/<cid>, main, tags baseline and best, refs packed. By default the
objects are then unpacked into loose objects, as a live lineage keeps them.

    python scripts/lineage_scale.py --candidates 10000
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from avo.config import RunConfig
from avo.evaluate.result import CaseResult, EvalResult
from avo.run.lineage.repo import Lineage
from avo.run.lineage.records import (COMMITTER_EMAIL, COMMITTER_NAME, cid_for, hash_files, message_for, parse_message,
                                record_bytes, record_for)
from avo.run.directory import Run

KERNEL = '''"""C = A @ B in bf16 with fp32 accumulation: one output tile per program."""
import triton
import triton.language as tl

BLOCK_M = {bm}  # avo: tune 64 128 256
BLOCK_N = {bn}  # avo: tune 64 128 256
BLOCK_K = {bk}  # avo: tune 32 64
NUM_STAGES = {stages}  # avo: tune 2 3 4 5
# variant {variant}
'''
CASES = ("4096x4096x4096", "8192x8192x8192", "8192x14336x4096", "16384x4096x4096")


def synthetic_result(rng: random.Random, fitness: float) -> EvalResult:
    if rng.random() < 0.35:
        status = rng.choice(["incorrect", "compile_error", "timeout", "crash", "rejected"])
        return EvalResult(status=status, rule="check.mismatch" if status == "incorrect" else status,
                          message=f"{status}: synthetic failure")
    cases = [CaseResult(case=c, suite="bench", correct=True, tflops=700 * fitness * rng.uniform(0.95, 1.05),
                        library_tflops=700.0, speedup=fitness) for c in CASES]
    return EvalResult(status="correct", fitness=fitness, cases=cases, timing_source="gpu", gpu="h200",
                      library="cuBLAS")


def fast_import_stream(n: int, seed: int) -> tuple[bytes, int]:
    """The history as a fast-import stream, and how many candidates were accepted."""
    rng = random.Random(seed)
    out: list[bytes] = []

    def data(payload: bytes) -> None:
        out.append(b"data %d\n" % len(payload) + payload + b"\n")

    best_fitness, main, accepted = 0.0, None, 0
    start = int(time.time()) - n * 60
    for i in range(n):
        cid = cid_for(i)
        parent = None if i == 0 else (main if main is not None and rng.random() < 0.7 else cid_for(rng.randrange(i)))
        kernel = KERNEL.format(bm=rng.choice([64, 128, 256]), bn=rng.choice([64, 128, 256]), bk=rng.choice([32, 64]),
                               stages=rng.choice([2, 3, 4, 5]), variant=i).encode()
        # fitness drifts upwards, so improvements (accepts) keep coming through the run
        result = synthetic_result(rng, fitness=rng.uniform(0.5, 1.0 + 0.5 * i / n)) if i else \
            synthetic_result(random.Random(-1), fitness=0.8)
        content = hash_files([("kernel.py", False, kernel)])
        created = datetime.fromtimestamp(start + 60 * i, timezone.utc).isoformat(timespec="seconds")
        record = record_for(cid, parent, result, "heuristic", f"try variant {i}", created, content)
        when = f"{start + 60 * i} +0000"
        out.append(f"commit refs/avo/{cid}\nmark :{i + 1}\nauthor heuristic <{COMMITTER_EMAIL}> {when}\n"
                   f"committer {COMMITTER_NAME} <{COMMITTER_EMAIL}> {when}\n".encode())
        data(message_for(cid, parent, result, f"try variant {i}", content).encode())
        if parent is not None:
            out.append(f"from :{int(parent[1:]) + 1}\n".encode())
        out.append(b"deleteall\nM 100644 inline avo.json\n")
        data(record_bytes(record))
        out.append(b"M 100644 inline kernel.py\n")
        data(kernel)
        if i == 0:
            out.append("reset refs/tags/baseline\nfrom :1\n\nreset refs/heads/main\nfrom :1\n\n".encode())
        if result.status == "correct" and (i == 0 or result.fitness > best_fitness):
            best_fitness, main, accepted = result.fitness, cid, accepted + 1
            out.append(f"reset refs/accepted/{cid}\nfrom :{i + 1}\n\nreset refs/tags/best\nfrom :{i + 1}\n\n"
                       f"reset refs/heads/main\nfrom :{i + 1}\n\n".encode())
    return b"".join(out), accepted


def build(runs_dir: Path, n: int, loose: bool, seed: int) -> Run:
    run = Run.create(RunConfig(kernel="gemm"), runs_dir=runs_dir, gpu="h200", agent="heuristic",
                     run_id=f"scale-{n}")
    git_dir = run.path / "lineage"
    stream, accepted = fast_import_stream(n, seed)
    git = ["git", f"--git-dir={git_dir}"]
    subprocess.run([*git, "fast-import", "--quiet"], input=stream, check=True)
    if loose:
        pack_dir = git_dir / "objects" / "pack"
        for pack in sorted(pack_dir.glob("*.pack")):
            moved = pack.rename(run.path / pack.name)
            for other in pack_dir.glob(pack.stem + ".*"):
                other.unlink()
            with open(moved, "rb") as handle:
                subprocess.run([*git, "unpack-objects", "-q"], stdin=handle, check=True)
            moved.unlink()
    subprocess.run([*git, "pack-refs", "--all"], check=True)
    print(f"built {n} candidates ({accepted} accepted) in {git_dir}, objects {'loose' if loose else 'packed'}")
    return run


def check_structure(run: Run, n: int) -> None:
    lineage = Lineage.open(run.path / "lineage")
    assert len(lineage) >= n, len(lineage)  # a reused run also holds the real commit added by a previous timing
    best = lineage.info(lineage.best)
    assert best.accepted and best.status == "correct" and lineage.baseline == "c0000"
    for cid in ("c0000", cid_for(n // 2), cid_for(n - 1)):
        info, record = lineage.info(cid), lineage.record(cid)
        assert record["cid"] == cid and record["parent"] == info.parent and record["eval"]["status"] == info.status
        assert [path for path, _ in lineage.files(cid)] == ["kernel.py"]
    lineage.close()


def timed(args: list[str], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "avo", *args], capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"avo {' '.join(args)} failed: {done.stderr.strip()}")
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--packed", action="store_true", help="keep fast-import's pack instead of loose objects")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs-dir", type=Path, help="where to build (default: a temporary folder)")
    parser.add_argument("--reuse", action="store_true", help="time an existing scale-N run in --runs-dir")
    opts = parser.parse_args()
    runs_dir = opts.runs_dir or Path(tempfile.mkdtemp(prefix="avo-scale-"))
    if opts.reuse:
        run = Run.open(f"scale-{opts.candidates}", runs_dir)
    else:
        start = time.perf_counter()
        run = build(runs_dir, opts.candidates, loose=not opts.packed, seed=opts.seed)
        print(f"build: {time.perf_counter() - start:.1f} s")
    check_structure(run, opts.candidates)
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    rd = ["--runs-dir", str(runs_dir)]
    mid = cid_for(opts.candidates // 2)
    commands = [
        *([] if opts.reuse else [("avo runs (counters rebuilt from git: first read)", ["runs", *rd], 1)]),
        ("avo runs", ["runs", *rd], opts.repeat),
        ("avo show RUN", ["show", run.id, *rd], opts.repeat),
        (f"avo show RUN {mid}", ["show", run.id, mid, *rd], opts.repeat),
        ("avo diff best baseline", ["diff", "best", "baseline", "--run", run.id, *rd], opts.repeat),
        (f"avo diff {mid}^ {mid}", ["diff", f"{mid}^", mid, "--run", run.id, *rd], opts.repeat),
        ("avo --help (CLI start-up alone)", ["--help"], opts.repeat),
    ]
    print(f"\n| command ({opts.candidates} candidates) | median s | max s |\n|---|---|---|")
    for label, args, repeat in commands:
        median, worst = timed(args, repeat)
        print(f"| `{label}` | {median:.2f} | {worst:.2f} |")
    lineage = Lineage.open(run.path / "lineage")
    print("\nin process (no interpreter start-up):")
    for label, call in (("Lineage.log(limit=15)", lambda: lineage.log(limit=15)),
                        ("Lineage.log() (all)", lineage.log), ("Lineage.stats()", lineage.stats),
                        (f"info + record of {mid}", lambda: (lineage.info(mid), lineage.record(mid))),
                        ("resolve best, baseline + diff", lambda: lineage.diff("best", "baseline")),
                        ("find_duplicate (first call: one scan)", lambda: lineage.find_duplicate(run.workspace))):
        start = time.perf_counter()
        call()
        print(f"  {label}: {time.perf_counter() - start:.3f} s")
    compare_with_real_commit(lineage, run, mid)
    print(f"run left in {runs_dir}")


def compare_with_real_commit(lineage: Lineage, run: Run, synthetic: str) -> None:
    """A candidate committed by Lineage.commit on top of the synthetic history has the same shape as its neighbours."""
    lineage.checkout(synthetic, run.workspace)
    start = time.perf_counter()
    real = lineage.commit(run.workspace, parent=lineage.main, result=synthetic_result(random.Random(1), 1.0),
                          model="heuristic", rationale="a real commit")
    took = time.perf_counter() - start
    shape = lambda cid: (sorted(lineage.record(cid)), sorted(lineage.record(cid)["eval"]),  # noqa: E731
                         [p for p, _ in lineage.files(cid)],
                         sorted(parse_message(lineage.repo.commit(lineage.ref_sha(f"refs/avo/{cid}")).message)[2]))
    assert shape(real) == shape(synthetic), (shape(real), shape(synthetic))
    print(f"Lineage.commit of {real} on top of them: {took:.3f} s; same structure as {synthetic}")


if __name__ == "__main__":
    main()
