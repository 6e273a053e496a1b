"""`avo package RUN [CID] --out DIR`: a candidate as an installable PyTorch op, the library its fallback.

- `build.py`: writes the package (the candidate's files from its lineage commit, the runtime, the manifest).
- `candidate.py`: which candidate, and the refusals (not correct, never measured on a GPU, not attention or GEMM).
- `coverage.py`: what the run's cases covered, per shape dimension: what the package's guard lets through.
- `manifest.py`: MANIFEST.json and the package's requirements.
- `vendor.py`: the candidate's `avo.cuda` imports pointed at a copy carried in the package.
- `runtime/`: the generated package's own modules, copied as they are (they never import avo);
  `templates/`: its pyproject.toml and README.md, filled in.
"""
