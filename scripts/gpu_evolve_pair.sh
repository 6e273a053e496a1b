#!/usr/bin/env bash
# Two heuristic-agent evolves side by side, one per GPU, from the naive seeds (the issue's 10-minute runs).
#   bash scripts/gpu_evolve_pair.sh start [MINUTES]   launches both in the background (survives this shell)
#   bash scripts/gpu_evolve_pair.sh finish            waits for both, then exports each run and its report to $OUT
# Needs avo importable (scripts/gpu_validate.sh setup) and two GPUs; logs and runs stay under /tmp/avo-pair.
# EVOLVE_KERNELS="attention" starts only that one (on GPU 0); EVOLVE_SEED=cuda_wgmma starts from
# kernels/<kernel>/cuda_wgmma instead of the naive seed.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
PAIR=/tmp/avo-pair
KERNELS=(${EVOLVE_KERNELS:-attention gemm})
SEED=${EVOLVE_SEED:-triton_naive}
NAME=${SEED#triton_}

start() {
  local minutes=${1:-10}
  local hours; hours=$(python3 -c "print($minutes / 60)")
  mkdir -p "$PAIR"
  for i in "${!KERNELS[@]}"; do
    local kernel=${KERNELS[$i]}
    CUDA_VISIBLE_DEVICES=$i setsid nohup avo evolve --kernel "$kernel" --seed-kernel "kernels/$kernel/$SEED" \
      --hours "$hours" --agent heuristic --seed 0 --quiet --runs-dir "$PAIR/runs-$kernel" \
      > "$PAIR/evolve-$kernel.log" 2>&1 < /dev/null &
    echo "$!" > "$PAIR/$kernel.pid"
    echo "started $kernel on GPU $i for $minutes min (pid $!)"
  done
}

finish() {
  for kernel in "${KERNELS[@]}"; do
    while kill -0 "$(cat "$PAIR/$kernel.pid")" 2>/dev/null; do sleep 2; done
    tail -12 "$PAIR/evolve-$kernel.log"
    cp "$PAIR/evolve-$kernel.log" "$OUT/"
    avo export latest -o "$OUT/$kernel-from-$NAME-h200.avo.tar" --runs-dir "$PAIR/runs-$kernel"
    avo report latest --runs-dir "$PAIR/runs-$kernel" -o "$PAIR/report-$kernel" > /dev/null \
      && cp -r "$PAIR/report-$kernel" "$OUT/report-$kernel"
    avo runs --runs-dir "$PAIR/runs-$kernel" | tee "$OUT/runs-$kernel.txt"
  done
}

"$@"
