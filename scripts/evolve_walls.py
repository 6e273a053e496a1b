"""Per-candidate evaluation wall time of a real run, and the pace between candidates, from what the run recorded.

For each candidate of the run (in order): the evaluation's own `wall_s` (evals/<cid>.json), the seconds since the
previous candidate was committed (the lineage's `created` times: evaluation plus the agent's turn plus the commit),
its status, its fitness and its stages. Then the median of each over every window of 5 consecutive candidates, the
lowest and the last window, so "5 consecutive candidates of an evolve" is read off a run instead of a synthetic loop.

  python3 scripts/evolve_walls.py latest --runs-dir /tmp/avo-runs
  python3 scripts/evolve_walls.py latest --runs-dir /tmp/avo-runs --json walls.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from avo.run.directory import Run  # noqa: E402

WINDOW = 5


def rows_of(run: Run) -> list[dict]:
    rows, before = [], None
    for cid in run.lineage.cids():
        record = run.lineage.record(cid)
        created = datetime.fromisoformat(record["created"])
        result = run.load_eval(cid)
        rows.append({
            "cid": cid, "status": record["eval"]["status"], "fitness": record["eval"]["fitness"],
            "wall_s": result.wall_s if result else None,
            "since_previous_s": round((created - before).total_seconds(), 2) if before else None,
            "stage_s": result.stage_s if result else {},
        })
        before = created
    return rows


def windows(values: list[float]) -> list[float]:
    return [statistics.median(values[i:i + WINDOW]) for i in range(len(values) - WINDOW + 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="run id, path or 'latest'")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument("--json", type=Path, help="write the rows and the summary here")
    args = parser.parse_args()
    rows = rows_of(Run.open(args.run, args.runs_dir))
    for r in rows:
        stages = " ".join(f"{k} {v:.1f}" for k, v in r["stage_s"].items() if "." not in k)
        since = f"{r['since_previous_s']:6.1f}" if r["since_previous_s"] is not None else "     -"
        wall = f"{r['wall_s']:6.1f}" if r["wall_s"] is not None else "     -"
        print(f"{r['cid']}  wall {wall} s  since previous {since} s  {r['status']:<10} "
              f"fitness {r['fitness'] or 0:.4f}  {stages}")
    summary = {}
    for key in ("wall_s", "since_previous_s"):
        values = [r[key] for r in rows if r[key] is not None]
        medians = windows(values)
        summary[key] = {"count": len(values), "median": statistics.median(values) if values else None,
                        f"lowest_median_of_{WINDOW}": min(medians) if medians else None,
                        f"last_median_of_{WINDOW}": medians[-1] if medians else None}
        print(f"{key}: {summary[key]}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
