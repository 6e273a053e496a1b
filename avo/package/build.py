"""`avo package`: a candidate of a run written out as an installable Python package.

    DIR/pyproject.toml  README.md
    DIR/NAME/__init__.py      the task's function, patch(), the call counters, MANIFEST
             _op.py           the torch custom op with its fake, the guard's use, the routes patch() takes
             _guard.py _patch.py _loader.py
             _cuda.py ...     avo.cuda copied in, for a CUDA C++ kernel
             kernel/          the candidate's files, from its lineage commit
             MANIFEST.json

The generated code is the files in runtime/, copied as they are; templates/ holds pyproject.toml and README.md, filled
in with string.Template. Nothing in the package imports avo.
"""

from __future__ import annotations

import ast
import json
import keyword
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from string import Template

from avo import tasks
from avo.errors import UserError
from avo.package.candidate import Chosen, choose
from avo.package.coverage import capability_of, case_shapes, covered, library_faster
from avo.package.manifest import manifest_for, requirements
from avo.package.vendor import imports_of, rewrite, vendor_cuda
from avo.run.directory import Run
from avo.tasks.workload import recorded

HERE = Path(__file__).resolve().parent
RUNTIME = {"init.py": "__init__.py", "guard.py": "_guard.py", "loader.py": "_loader.py", "patch.py": "_patch.py"}
"""runtime/ file -> its name in the package; the task's own op file becomes _op.py."""
RESERVED = {"avo", "torch", "triton", "cupy", "numpy", "kernel"}
AGENT_PACKAGES = {"avo", "anthropic", "openai", "git", "typer", "rich"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXAMPLES = {"attention": "out = $name.attention(q, k, v, causal=True)   # q [B, Hq, S, D], k and v [B, Hkv, S, D]",
             "gemm": "c = $name.gemm(a, b)   # a [M, K], b [K, N]"}
_ROUTES = {"attention": "torch.nn.functional.scaled_dot_product_attention calls (no mask, no dropout)",
           "gemm": "torch.matmul of two matrices and nn.Linear (F.linear) calls"}


@dataclass(frozen=True)
class Built:
    out: Path
    name: str
    chosen: Chosen
    manifest: dict


def package_name(given: str | None, task: str, run_id: str) -> str:
    """`--name`, checked, or one made of the task and the run id (attention_20261130_004738)."""
    if given is None:
        stem = re.sub(r"[^A-Za-z0-9]+", "_", run_id.replace(task, "")).strip("_").lower()
        given = f"{task}_{stem}" if stem else task
    if not _NAME.fullmatch(given) or keyword.iskeyword(given) or given in RESERVED:
        raise UserError(f"--name {given!r} is not usable as a package and op name: use letters, digits and '_', "
                        f"not starting with a digit, and none of {', '.join(sorted(RESERVED))}")
    return given


def build(run: Run, rev: str, out: Path, *, name: str | None = None, allow_unmeasured: bool = False,
          keep_slower: bool = False, weigh_host: bool = True) -> Built:
    """Write candidate `rev` of `run` as a package in `out` (which must not exist, or be empty). The timed shapes
    at which the library was faster stay the library's, unless `keep_slower`; so do, with `weigh_host`, those at
    which the kernel saved less GPU time than it added host time."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out {out} exists and is not empty: name a new folder")
    chosen = choose(run, rev, allow_unmeasured=allow_unmeasured)
    name = package_name(name, chosen.task, run.id)
    task = tasks.load(chosen.task, recorded(run.info().get("config")))  # a workload's cases known by name
    shapes, unread = case_shapes(task, chosen.result)
    measured_on = chosen.result.versions.get("gpu_device", "") if chosen.result.timing_source == "gpu" else ""
    guard = covered(chosen.task, shapes, measured_on, capability_of(chosen.result))
    guard["library_faster"] = {**library_faster(task, chosen.result, weigh_host=weigh_host),
                               "enforced": not keep_slower}
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        manifest = _write(staging, run, chosen, name, guard, unread)
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Built(out=out, name=name, chosen=chosen, manifest=manifest)


def _write(root: Path, run: Run, chosen: Chosen, name: str, guard: dict, unread: list[str]) -> dict:
    package = root / name
    run.lineage.checkout(chosen.cid, package / "kernel")
    imported = _carry_candidate(package / "kernel", name)
    for source, target in RUNTIME.items():
        shutil.copyfile(HERE / "runtime" / source, package / target)
    shutil.copyfile(HERE / "runtime" / f"{chosen.task}.py", package / "_op.py")
    language = "cuda" if "avo" in imported else "triton" if "triton" in imported else "python"
    if language == "cuda":
        vendor_cuda(package, name)
        shutil.copyfile(HERE / "runtime" / "extras.py", package / "_extras.py")
    needs = requirements(imported, chosen.result.versions.get("cuda", ""))
    manifest = manifest_for(run.id, chosen, name=name, guard=guard, unread=unread, needs=needs, language=language,
                            cuda_graphs=declares(package / "kernel" / "kernel.py", "CUDA_GRAPHS"))
    (package / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    _fill("pyproject.toml", root, name=name, manifest=manifest)
    _fill("README.md", root, name=name, manifest=manifest)
    leaked = imports_of(root) & AGENT_PACKAGES
    if leaked:  # a guarantee of the package, not a user's mistake: say so loudly
        raise RuntimeError(f"the package at {root} would import {', '.join(sorted(leaked))}")
    return manifest


def declares(path: Path, flag: str) -> bool:
    """Whether the module at `path` sets `flag = True` at its top level: read, never imported (a candidate's code
    runs only in its sandbox, or in the user's process once packaged)."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True
               and any(isinstance(target, ast.Name) and target.id == flag for target in node.targets)
               for node in tree.body)


def _carry_candidate(folder: Path, name: str) -> set[str]:
    """Rewrite the candidate's imports of avo.cuda to the package's copy; the top-level modules it imports."""
    imported: set[str] = set()
    for path in sorted(folder.rglob("*.py")):
        text, found = rewrite(path.read_text(), name, f"kernel/{path.relative_to(folder).as_posix()}")
        path.write_text(text)
        imported |= found
    return imported


def _fill(template: str, root: Path, *, name: str, manifest: dict) -> None:
    measured = manifest["measured"]
    where = (f"on {measured['gpu_device'] or measured['gpu']} against {measured['library']}"
             if measured["timing"] == "gpu" else f"only under the {measured['timing']} timing (not on a GPU)")
    description = f"{manifest['op']} kernel evolved by avo, {manifest['kernel']}, fitness {manifest['fitness']:.3f}"
    values = {"name": name, "version": f"1.0+{manifest['cid']}.{manifest['commit'][:8]}",
              "description": description, "cid": manifest["cid"], "run_id": manifest["run_id"],
              "commit": manifest["commit"][:12], "measured": where, "op": manifest["op"],
              "library": measured["library"] or "the library",
              "dependencies": ", ".join(json.dumps(r) for r in manifest["requirements"]),
              "example": Template(_EXAMPLES[manifest["op"]]).substitute(name=name),
              "routes": _ROUTES[manifest["op"]]}
    text = Template((HERE / "templates" / f"{template}.tmpl").read_text()).substitute(values)
    (root / template).write_text(text)
