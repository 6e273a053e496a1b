"""The child side of an evaluation, run as `python -m avo.evaluate.worker` (see harness.py, worker_process.py).

- `__main__.py`: reads the set-up and the request on stdin, prepares, evaluates, writes the signed result, exits.
- `evaluation.py`: the stages in order for every candidate, and each candidate's final EvalResult.
- `candidate.py`: what the stages share: Candidate, Context, Progress, Verdict and `classify`.
- `loader.py`: imports a candidate's kernel.py under a fresh name and finds its entry point.
- `check.py`: the check suite, every case watched and compared with the reference.
- `bench.py`: the bench suite: each case checked once, then timed interleaved with the library, outputs spot-checked.
- `timing.py`: the interleaved timer (CUDA events, L2 flush, launch shield, rotating inputs; wall clock under the
  interpreter).
- `correctness.py`: poisoned allocations, the watched call and the output comparison.
- `precompile.py`, `warm.py`: Triton kernels compiled ahead in parallel; the toolchain warmed before any candidate.
- `rotation_memory.py`: how many input sets fit on the GPU for the bench rotation.
- `stage_clock.py`: seconds per stage, as the result's `stage_s`.
"""
