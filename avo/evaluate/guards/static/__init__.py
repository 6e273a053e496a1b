"""The static guard: every source file of a candidate read before it is imported.

- `check.py`: walks the candidate's folder; Python files as ASTs, every name resolved to the dotted path it stands
  for and judged by the rules; `check_static` raises the first finding the ops policy does not waive.
- `resolve.py`: names to dotted paths (imports, aliases, `getattr` with constant names, `importlib`).
- `names.py`: the forbidden and allowed dotted paths, per task.
- `paths.py`: which file paths are provably inside the candidate's folder.
- `layers.py`: torch.nn layers built in `__init__` as parameter holders, and calls of them on the forward path.
- `cuda_sources.py`: CUDA/C++ sources tokenized and searched for host-side calls.
- `finding.py`: what a check reports (rule, file, line).
"""
