#!/usr/bin/env bash
# GPU validation for avo, in one go on a GPU machine (results under $OUT):
#   bash scripts/gpu_validate.sh STEP...      steps: setup doctor tests bench cv profile evolve replay
#                                             kernelbench kernelbench_evolve evalwall model_evolve
#                                             gemm_sweep fa3_sweep gemm_ncu package library host_time
# `setup` installs avo from the offline wheels in .whl/ (see scripts/wheelhouse.sh) for machines without a
# package index; the other steps assume avo is importable. Each step writes one file under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }

step_setup() {
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site:$PWD
  python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || return 1
  # The OS sandbox needs bubblewrap; a machine without it gets Debian's package from .whl/ unpacked in place.
  if ! command -v bwrap >/dev/null && ls .whl/bubblewrap_*.deb >/dev/null 2>&1; then
    mkdir -p /tmp/bw && dpkg -x .whl/bubblewrap_*.deb /tmp/bw && export AVO_BWRAP=/tmp/bw/usr/bin/bwrap
  fi
  echo "setup ok: $(python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())')"
}

step_doctor() { avo doctor 2>&1 | tee "$OUT/doctor.txt"; }

# The GPU tests, each failure's report written to $OUT/failures.txt as it happens (a call cut by its time limit
# keeps them). TESTS: which (default all). GPU_SHARE=1, 2 or 3: one of three shares, each under 7 minutes on the
# H200, for a suite longer than one call: the cheats and the harness's timing tests; the other timing-sensitive
# files, one after another; everything else, four files at a time (pytest-xdist, in .whl/ by
# `bash ../shared/device/wheels.sh pytest-xdist execnet`).
SHARE_ONE="tests/evaluate/test_cheats.py tests/evaluate/test_harness_gpu.py"
SHARE_TWO="tests/evaluate/worker/test_timing.py tests/evaluate/test_pool_gpu.py tests/package/test_gpu.py tests/package/test_gpu_model.py
  tests/package/test_gpu_first_call.py
  tests/profile/test_ncu_gpu.py tests/profile/test_ncu_sandbox_gpu.py tests/evaluate/sandbox/test_trusted_cache_gpu.py"
step_tests() {
  local tests=${TESTS:-}
  case "${GPU_SHARE:-}" in
    1) tests=$SHARE_ONE ;;
    2) tests=$SHARE_TWO ;;
    3) tests="-n 4 --dist loadfile $(for f in $SHARE_ONE $SHARE_TWO; do printf -- '--ignore=%s ' "$f"; done)" ;;
  esac
  AVO_TEST_FAILURES="$OUT/failures.txt" timeout "${TESTS_TIMEOUT:-540}" python3 -m pytest -m gpu -v -rs \
    -p no:cacheprovider --durations=15 $tests 2>&1 | tee "$OUT/pytest_gpu.txt" \
    | grep -E "PASSED|FAILED|ERROR|passed|failed" | tail -60
}

# Every seed on the bench suite, with the evaluator's wall time per candidate (compile + check + bench).
# BENCH: space-separated KERNEL_SPEC|CANDIDATE_DIR pairs (default: the four Triton seeds); SUITE: bench or wide;
# BENCH_NAME: the output's name ($OUT/BENCH_NAME.jsonl, default bench).
step_bench() {
  local out="$OUT/${BENCH_NAME:-bench}.jsonl"
  : > "$out"
  local pairs=${BENCH:-"gemm|kernels/gemm/triton_tiled gemm|kernels/gemm/triton_naive attention|kernels/attention/triton_fa2 attention|kernels/attention/triton_naive"}
  for pair in $pairs; do
    local spec=${pair%%|*} dir=${pair#*|}
    t0=$(now)
    avo bench "$dir" --kernel "$spec" --suite "${SUITE:-bench}" --json > /tmp/bench.json 2> /tmp/bench.err
    rc=$?; t1=$(now)
    python3 - "$dir" "$(secs "$t0" "$t1")" "$rc" <<'PY' >> "$out"
import json, sys
seed, wall, rc = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
try:
    result = json.load(open("/tmp/bench.json"))
except Exception as exc:
    result = {"status": "no-json", "message": open("/tmp/bench.err").read()[-2000:]}
print(json.dumps({"seed": seed, "suite": __import__("os").environ.get("SUITE", "bench"), "wall_s": wall, "rc": rc,
                  "result": result}))
PY
    python3 - "$out" <<'PY'
import json, sys
row = json.loads(open(sys.argv[1]).read().splitlines()[-1])
r = row["result"]
print(f'{row["seed"]:24s} rc={row["rc"]} wall={row["wall_s"]:6.1f}s status={r.get("status")} fitness={r.get("fitness", 0):.3f} library={r.get("library", "")}')
print("    stages:", r.get("stage_s"), r.get("message", "")[:300])
for c in r.get("cases", []):
    if c.get("speedup") is not None:
        print(f'    {c["case"]:40s} {c["tflops"]:7.1f} TFLOPS  lib {c["library_tflops"]:7.1f}  x{c["speedup"]:.3f}  cv {c.get("spread") or 0:.4f}')
PY
  done
}

# Spread of fitness when one kernel is benched five times (separate processes).
step_cv() {
  : > "$OUT/cv.txt"
  for seed in ${CV_SEEDS:-gemm/triton_tiled}; do
    for i in 1 2 3 4 5; do
      avo bench "kernels/$seed" --kernel "${seed%%/*}" --json 2>/dev/null \
        | python3 -c "import json,sys; print('$seed', json.load(sys.stdin)['fitness'])" >> "$OUT/cv.txt"
    done
  done
  python3 - "$OUT/cv.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    seed, f = line.split(); rows.setdefault(seed, []).append(float(f))
for seed, fs in rows.items():
    print(f"{seed}: fitness {['%.4f' % f for f in fs]} mean {statistics.mean(fs):.4f} CV {statistics.pstdev(fs) / statistics.mean(fs):.4%}")
PY
}

step_profile() {
  t0=$(now)
  avo profile kernels/attention/triton_fa2 --kernel attention --case 0 2>&1 | tee "$OUT/profile.txt"
  echo "avo profile wall: $(secs "$t0" "$(now)") s" | tee -a "$OUT/profile.txt"
}

# The library's own kernel on chosen cases beside a candidate's (`avo profile --library`): what cuDNN or cuBLAS
# runs there (its name gives the tile shape), its grid, registers and stalls. LIBRARY_CASES: space-separated
# KERNEL|SUITE|CASE[|CANDIDATE_DIR] (the candidate profiled too when named); all of it in $OUT/library.txt.
step_library() {
  local spec kernel suite case dir
  for spec in ${LIBRARY_CASES:-"attention|wide|b32_h32-8_s1024_d64_causal|kernels/attention/cuda_fa3"}; do
    IFS='|' read -r kernel suite case dir <<< "$spec"
    echo "--- $kernel $suite $case: library" | tee -a "$OUT/library.txt"
    avo profile --library --kernel "$kernel" --suite "$suite" --case "$case" 2>&1 | tee -a "$OUT/library.txt" | head -3
    if [ -n "$dir" ]; then
      echo "--- $kernel $suite $case: $dir" | tee -a "$OUT/library.txt"
      avo profile "$dir" --kernel "$kernel" --suite "$suite" --case "$case" 2>&1 | tee -a "$OUT/library.txt" | head -3
    fi
  done
}

# A heuristic-agent evolve, exported (EVOLVE_KERNEL, EVOLVE_SEED, EVOLVE_HOURS; the export lands in $OUT).
step_evolve() {
  local kernel=${EVOLVE_KERNEL:-gemm} seed=${EVOLVE_SEED:-kernels/gemm/triton_naive} hours=${EVOLVE_HOURS:-0.085}
  local runs=/tmp/avo-runs name; name=$(basename "$(dirname "$seed")")-$(basename "$seed")
  avo evolve --kernel "$kernel" --seed-kernel "$seed" --hours "$hours" --agent heuristic --quiet \
    --runs-dir "$runs" 2>&1 | tee "$OUT/evolve-$name.log" | tail -15
  avo export latest -o "$OUT/$name.avo.tar" --runs-dir "$runs"
  avo report latest --runs-dir "$runs" -o "/tmp/report-$name" > /dev/null && cp "/tmp/report-$name/report.md" "$OUT/report-$name.md"
}

# An evolve for a model's shapes from the task's default seed (the workload from a Hugging Face config.json):
# EVOLVE_KERNEL attention or gemm, MODEL, TOKENS, EVOLVE_HOURS; the run exported, and its baseline's and best's
# per-case results (each bucket's cases before and after) kept beside it.
step_model_evolve() {
  local kernel=${EVOLVE_KERNEL:-attention} model=${MODEL:-examples/models/llama-3-8b.json}
  local tokens=${TOKENS:-1024,4096,16384} hours=${EVOLVE_HOURS:-0.16} runs=/tmp/avo-model-runs
  local name; name=$kernel-from-$(basename "$model" .json)
  avo evolve --kernel "$kernel" --model "$model" --tokens "$tokens" --hours "$hours" --agent heuristic --quiet \
    --runs-dir "$runs" 2>&1 | tee "$OUT/evolve-$name.log" | tail -15
  avo export latest -o "$OUT/$name.avo.tar" --runs-dir "$runs"
  for which in baseline best; do avo show latest "$which" --runs-dir "$runs" > "$OUT/$which-$name.txt" 2>&1; done
  tail -30 "$OUT/best-$name.txt"
}

# The replay backend re-issues a recorded transcript's model turns (REPLAY_FROM) against this GPU's evaluator.
step_replay() {
  avo evolve --kernel gemm --seed-kernel kernels/gemm/triton_naive --agent replay --replay-from "$REPLAY_FROM" \
    --hours 0.05 --quiet --runs-dir /tmp/avo-replay 2>&1 | tee "$OUT/replay.log" | tail -12
  avo runs --runs-dir /tmp/avo-replay 2>&1 | tee -a "$OUT/replay.log"
}

# The six KernelBench problems in examples/kernelbench/problems against their ModelNews, against eager PyTorch and
# torch.compile, in one sweep: its JSON (fast_p, each row's whole message and EvalResults), the table rendered from
# it (for BENCHMARKS.md), the progress lines, one JSON per problem under kernelbench/, and the GPU tests of the
# KernelBench task and evaluator beside it.
step_kernelbench() {
  local per="$OUT/kernelbench"; mkdir -p "$per"
  avo bench --kernel examples/kernelbench/problems --candidates examples/kernelbench/solutions --baseline compile \
    --json > "$OUT/kernelbench_sweep.json" 2> "$OUT/kernelbench_sweep.err"
  echo "avo bench rc=$?" >> "$OUT/kernelbench_sweep.err"
  cat "$OUT/kernelbench_sweep.err"
  python3 - "$OUT/kernelbench_sweep.json" "$per" <<'PY' 2>&1 | tee "$OUT/kernelbench_sweep.txt"
import json, sys
from pathlib import Path
from avo.tasks.kernelbench import sweep
data = json.loads(Path(sys.argv[1]).read_text())
sweep.render(data)
for row in data["rows"]:
    (Path(sys.argv[2]) / f"{row['problem']}.json").write_text(json.dumps(row, indent=2))
    if not row["correct"]:
        print(f"--- {row['problem']}: {row['status']}\n{row['message'] or row['reason']}")
PY
  timeout "${TESTS_TIMEOUT:-540}" python3 -m pytest -m gpu -q -rs -p no:cacheprovider \
    tests/tasks/kernelbench/test_kernelbench_models.py tests/evaluate/test_kernelbench_eval.py \
    tests/evaluate/test_kernelbench_users.py 2>&1 \
    | tee "$OUT/kernelbench_pytest_gpu.txt" | tail -15
}

# A short heuristic evolve of two of them, seeded from their knob-annotated ModelNews (KB_EVOLVE_A, KB_EVOLVE_B:
# problem stems): the log, the sweep JSON (each row's best, the seed's fitness for the gain, the whole message of a
# failed seed), and per run its run.json, evals/*.json, lineage log and an export (avo import reads it back).
step_kernelbench_evolve() {
  local dir=/tmp/kb-evolve runs=/tmp/avo-kb-runs per="$OUT/kernelbench_evolve"
  rm -rf "$dir"; mkdir -p "$dir" "$per"
  for stem in "${KB_EVOLVE_A:-23_Softmax}" "${KB_EVOLVE_B:-12_Gemm_Multiply_LeakyReLU}"; do
    cp "examples/kernelbench/problems/$stem.py" "$dir"
  done
  avo evolve --kernel "$dir" --seed-kernel examples/kernelbench/solutions --agent heuristic --seed 0 \
    --hours-per-problem "${KB_EVOLVE_HOURS:-0.1}" --max-candidates "${KB_EVOLVE_CANDIDATES:-10}" --sweep-id kb \
    --runs-dir "$runs" --quiet 2>&1 | tee "$OUT/kernelbench_evolve.log" | tail -30
  echo "avo evolve rc=${PIPESTATUS[0]}" | tee -a "$OUT/kernelbench_evolve.log"
  cp "$runs/kb-sweep.json" "$OUT/kernelbench_evolve.json"
  for run in "$runs"/kb-*/; do
    local id; id=$(basename "$run"); mkdir -p "$per/$id"
    cp "$run/run.json" "$per/$id/" 2>/dev/null
    cp -r "$run/evals" "$per/$id/" 2>/dev/null
    git -C "$run/lineage" log --format='%h %s' --all > "$per/$id/lineage.txt" 2>&1
    avo export "$id" -o "$per/$id.avo.tar" --runs-dir "$runs" > /dev/null 2>&1 || echo "export of $id failed"
  done
}

# Per-candidate evaluation wall time, median of 5, of candidates new to Triton's cache (scripts/eval_wall.py): before
# (as avo scored them before the pool and the early end of steady cases), cold (each worker starts and sets up on its
# own), back-to-back (the heuristic agent's pace) and
# ready (the prepared worker set up before the candidate arrives), with each one's fitness.
# EVALWALL: space-separated TASK|SEED pairs (default: the attention and GEMM seeds).
step_evalwall() {
  local pair task
  for pair in ${EVALWALL:-attention|kernels/attention/triton_fa2 gemm|kernels/gemm/triton_tiled}; do
    task=${pair%%|*}
    python3 scripts/eval_wall.py "$task" "${pair#*|}" --runs "${EVALWALL_RUNS:-5}" \
      --modes "${EVALWALL_MODES:-before,cold,back-to-back,ready}" --json "$OUT/evalwall-$task.json" \
      2>&1 | tee "$OUT/evalwall-$task.txt" | grep -v '^ \{3,\}'
  done
}

# gemm/cuda_wgmma's configurations side by side against cuBLAS (scripts/gemm_config_sweep.py; GEMM_SWEEP: its
# arguments), and attention/cuda_fa3's against cuDNN (scripts/fa3_plan_sweep.py; FA3_SWEEP: its arguments): the
# whole log and every row's JSON kept (as $OUT/SWEEP_NAME.*, default gemm_sweep or fa3_sweep), the summary lines
# shown.
step_gemm_sweep() {
  local name=${SWEEP_NAME:-gemm_sweep}
  timeout "${SWEEP_TIMEOUT:-400}" python3 scripts/gemm_config_sweep.py ${GEMM_SWEEP:---stream --suite wide --max-m 4096} \
    --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.txt" | grep -E "^(BEST|GEOMEAN|\|)|rror"
}
step_fa3_sweep() {
  local name=${SWEEP_NAME:-fa3_sweep}
  timeout "${SWEEP_TIMEOUT:-400}" python3 scripts/fa3_plan_sweep.py ${FA3_SWEEP:-} --json "$OUT/$name.json" 2>&1 \
    | tee "$OUT/$name.txt" | grep -vE "^b[0-9]+_"
}

# Nsight Compute on gemm/cuda_wgmma at one shape (NCU_SHAPE), its plan and each of NCU_VARIANTS (space-separated
# LABEL:KNOB=VALUE,... as gemm_config_sweep.py's --variant takes them), two reports each, kept as CSV under
# $OUT/ncu/: instruction-level stall sampling (--set full, its source page; scripts/sass_stalls.py's summary shown)
# and the L2 and DRAM counters (the raw page). E.g. NCU_VARIANTS="m2:CLUSTER_M=2 n2:CLUSTER_N@rows256=2".
step_gemm_ncu() {
  local dir="$OUT/ncu" shape=${NCU_SHAPE:-256x8192x28672} spec label knobs
  mkdir -p "$dir"
  for spec in plan ${NCU_VARIANTS:-}; do
    label=${spec%%:*}; knobs=""; [ "$spec" != plan ] && knobs="--variant ${spec#*:}"
    timeout 240 ncu --set full -k regex:gemm_bf16 --launch-skip 1 --launch-count 1 -f -o "/tmp/ncu-$label" \
      python3 scripts/gemm_ncu.py "$shape" $knobs 2>&1 | grep -v "^==" | tail -2
    ncu -i "/tmp/ncu-$label.ncu-rep" --page source --csv --print-source sass > "$dir/${label}_sass.csv"
    ncu -i "/tmp/ncu-$label.ncu-rep" --page details --csv > "$dir/${label}_details.csv"
    timeout 240 ncu --section MemoryWorkloadAnalysis_Tables --section MemoryWorkloadAnalysis \
      --metrics "regex:^lts__t_(sectors|requests)_srcunit_.*\.sum$,regex:^lts__t_sectors_(op|srcnode)_.*\.sum$,regex:^l1tex__m_.*\.sum$" \
      -k regex:gemm_bf16 --launch-skip 1 --launch-count 1 -f -o "/tmp/ncu-l2-$label" \
      python3 scripts/gemm_ncu.py "$shape" $knobs 2>&1 | grep -v "^==" | tail -2
    ncu -i "/tmp/ncu-l2-$label.ncu-rep" --page raw --csv > "$dir/${label}_l2_raw.csv"
    python3 scripts/sass_stalls.py "$dir/${label}_sass.csv" --top 8
  done
}

# The packaged kernels in a model's block (tests/package/test_gpu_model.py: Llama-3.2-1B's block under its own runs'
# packages; tests/package/test_gpu.py: the 8B-class block), each forward's figures printed and kept in $OUT/package.txt.
step_package() {
  timeout "${TESTS_TIMEOUT:-400}" python3 -m pytest -m gpu -s -q -p no:cacheprovider tests/package/test_gpu_model.py \
    tests/package/test_gpu.py tests/package/test_gpu_first_call.py 2>&1 | tee "$OUT/package.txt" \
    | grep -E "block|eager|compiled|first call|passed|failed"
  # What patch()'s routes add to a call left on the library, on this host (1B block's shapes at 1024 tokens).
  timeout 120 python3 scripts/route_host_time.py --device cuda --number 500 2>&1 | tee -a "$OUT/package.txt" | tail -3
}

# Host time per call, piece by piece: the GEMM wrapper's (scripts/gemm_host_time.py --pieces) and an attention
# call's, cuDNN's, the cuda_fa3 wrapper's and the 1B package's routed one, with the tensor maps encoded anew per
# kernel call in Llama-3.2-1B's block (scripts/attention_host_time.py --profile), kept in $OUT/host_time.txt.
step_host_time() {
  { timeout 120 python3 scripts/gemm_host_time.py --pieces
    timeout 200 python3 scripts/attention_host_time.py --profile; } 2>&1 | tee "$OUT/host_time.txt" \
    | grep -vE "^ +[0-9]+ +[0-9.]+ "
}

for step in "$@"; do
  echo "== $step"
  "step_$step" || echo "step $step failed"
done
