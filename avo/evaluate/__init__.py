"""Is a candidate correct, and how fast: scored in an isolated child process.

- `harness.py`: the parent side: spawns the worker with a scrubbed environment, applies the stage limits, kills its
  process group when one is exceeded, reads its signed verdict.
- `result.py`: EvalResult and CaseResult, stored as `evals/<cid>.json`.
- `worker/`: the child side: candidate loader, check and bench stages, timing.
- `guards/`: the reward-hacking checks, static and at run time, with their rules.
- `cuda_compile.py`: CUDA sources compiled with nvcc where there is no GPU (compile errors, register reports).
"""
