#!/usr/bin/env bash
# Kill and resume interpreter evolves for HOURS hours (scripts/chaos.py, one run of 8 kills after another), then
# print the counts: kills by moment, candidates, confirmations finished after a resume, problems found.
#   scripts/soak.sh 0.5            # half an hour; the work folder is kept for a look afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
hours="${1:?usage: scripts/soak.sh HOURS [WORK_DIR]}"
work="${2:-$(mktemp -d "${TMPDIR:-/tmp}/soak-XXXXXX")}"
minutes=$(python3 -c "import sys; h = float(sys.argv[1]); assert h > 0; print(h * 60)" "$hours")
echo "soak: $minutes minutes in $work" >&2
exec python3 scripts/chaos.py --work "$work" --kills 8 --minutes "$minutes"
