"""KernelBench-format problems as tasks (`--kernel path/to/problem.py`), and folders of them.

- `spec.py`: the task spec, `problem.py?baseline=...&dtype=...&ops=...`, parsed and made absolute.
- `task.py`: KernelBenchTask: suites, inputs, reference and library, tolerance, the first candidate.
- `problem.py`: the file imported, its size knobs found, each size measured on the meta device.
- `cache.py`: Measure, and the on-disk cache of measurements between processes.
- `sizes.py`: the check suite's second size and knobs at 1, and the interpreter's downsized, ragged size.
- `models.py`: Model and ModelNew built, seeded, parameters copied, run as reference and library.
- `sweep.py`: a folder of problems scored or evolved one by one, and KernelBench's fast_p.
"""
