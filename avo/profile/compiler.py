"""What the compiler made of a candidate, without a GPU: registers, spills, shared memory, instruction mix.

Triton kernels are compiled for the GPU profile's target in a child process (avo.profile.triton_capture) that runs
the wrapper on meta tensors of one bench case, so constexprs, num_warps and num_stages are the wrapper's own; that
child runs the candidate's code, so it runs inside the evaluations' OS sandbox where its policy wants it (confine.py).
CUDA
sources (*.cu next to kernel.py) go through `nvcc -cubin -arch=<target> -Xptxas -v`. Both are read back with
cuobjdump: per-kernel resource usage and a SASS opcode histogram (HGMMA, UTMALDG, LDGSTS, LDL/STL, BAR, ...); for
sm_100a the Blackwell instructions are counted too (tcgen05.mma as UTCHMMA/UTCQMMA, tcgen05.ld/st as LDTM/STTM).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from avo.cuda import Build
from avo.util import procs
from avo.evaluate.cuda_compile import CompilerUnavailable, compile_check
from avo.profile import ProfileError, confine, sass
from avo.profile.ncu import pick_case, run_command

DEFAULT_TIMEOUT_S = 300.0
PTX_KEYS = ("tcgen05.mma", "tcgen05.ld", "tcgen05.st", "wgmma.mma_async", "mma.sync", "cp.async.bulk.tensor",
            "cp.async", "ld.local", "st.local", "bar.sync", "mbarrier.try_wait", "ex2.approx")


@dataclass
class CompileReport:
    data: dict
    text: str


def inspect_candidate(candidate_dir: Path, task_spec: str, *, gpu, case_index: int = 0, suite: str = "bench",
                      timeout_s: float = DEFAULT_TIMEOUT_S, sandbox: str = "auto",
                      hide: Sequence[Path] = ()) -> CompileReport:
    """Compile facts for every kernel of the candidate; ProfileError when none could be compiled. `sandbox`:
    EvalConfig.sandbox's policy for the compile capture; `hide`: what it masks besides the home folder and /root."""
    candidate_dir = Path(candidate_dir).resolve()
    kernel_py = candidate_dir / "kernel.py"
    if not kernel_py.is_file():
        raise ProfileError(f"no kernel.py in {candidate_dir}: a candidate is a folder whose kernel.py defines the "
                           "entry")
    _task, case = pick_case(task_spec, suite, case_index)
    kernels, problems = [], []
    if "triton" in kernel_py.read_text(errors="replace"):
        result = _triton_child(candidate_dir, task_spec, suite, case_index, gpu, timeout_s, sandbox, hide)
        kernels += result.get("kernels", [])
        problems += [p for p in (result.get("error"), result.get("note")) if p]
    if any(candidate_dir.glob("*.cu")):
        try:
            builds = _declared_builds(candidate_dir, task_spec, timeout_s, sandbox, hide, problems)
            kernels += nvcc_inspect(candidate_dir, gpu, builds=builds)
        except ProfileError as exc:
            problems.append(str(exc))
    if not kernels:
        why = problems[0] if problems else "no Triton kernel or .cu file"
        failure = ProfileError(f"compile inspection found no kernel: {why.splitlines()[0]}")
        failure.detail = why  # the candidate's traceback, for the agent
        raise failure
    data = _data(kernels, gpu, case.name, suite, problems)
    return CompileReport(data=data, text=render(data))


def _triton_child(candidate_dir: Path, task_spec: str, suite: str, case_index: int, gpu, timeout_s: float,
                  sandbox: str, hide: Sequence[Path]) -> dict:
    return _child("avo.profile.triton_capture", "compiling the Triton kernels", "the Triton compile inspection",
                  candidate_dir, task_spec, ["--suite", suite, "--case", str(case_index), "--gpu", gpu.name],
                  timeout_s, sandbox, hide)


def _child(module: str, doing: str, what: str, candidate_dir: Path, task_spec: str, extra: list[str],
           timeout_s: float, sandbox: str, hide: Sequence[Path]) -> dict:
    """`python -m module --candidate ... --kernel ... --out ...` on the candidate, confined as `sandbox` says; the
    JSON it wrote."""
    task_spec = confine.task_spec_for_child(task_spec)
    with procs.temp_dir("inspect") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", module, "--candidate", str(candidate_dir), "--kernel", task_spec, *extra,
               "--out", str(out)]
        child = confine.command(cmd, mode=sandbox, scratch=Path(tmp), candidate=candidate_dir, task_spec=task_spec,
                                hide=hide)
        returncode, output = run_command(child.cmd, timeout_s=timeout_s, cwd=Path(tmp), env=child.env)
        if returncode is None:
            raise ProfileError(f"{doing} took longer than {timeout_s:.0f} s and was stopped")
        if not out.exists():
            tail = " ".join(output.strip().splitlines()[-2:])[-400:]
            raise ProfileError(f"{what} crashed (exit {returncode}): {tail}")
        return json.loads(out.read_text())


def _declared_builds(candidate_dir: Path, task_spec: str, timeout_s: float, sandbox: str, hide: Sequence[Path],
                     problems: list[str]) -> list[Build] | None:
    """The builds kernel.py declares, read by importing it in a confined child; None (each .cu file compiled with no
    defines), with the reason in `problems`, when that import failed."""
    result = _child("avo.profile.cuda_builds", "importing kernel.py for its CUDA builds", "reading kernel.py's CUDA "
                    "builds", candidate_dir, task_spec, [], timeout_s, sandbox, hide)
    if not result.get("ok"):
        problems.append(f"kernel.py could not be imported to read its CUDA builds, so each .cu file was compiled "
                        f"with no defines: {result.get('error')}")
        return None
    folder = Path(candidate_dir).resolve()
    builds = []
    for declared in result["builds"]:
        source = (folder / declared["source"]).resolve()
        if not source.is_relative_to(folder):  # the child's answer is the candidate's word: its folder only
            raise ProfileError(f"kernel.py declared a build of {declared['source']}, outside its folder")
        builds.append(Build(source, folder, tuple(str(flag) for flag in declared["flags"])))
    return builds


def nvcc_inspect(folder: Path, gpu, timeout_s: float = 180.0, builds: list[Build] | None = None) -> list[dict]:
    """Per __global__ function of the folder's .cu files, built as kernel.py declares them (`builds`, read by
    importing it in a confined child; by default those declared in this process, and each .cu file no build names
    compiled with no defines): registers, spills, static shared memory, SASS histogram."""
    with procs.temp_dir("nvcc") as tmp:
        try:
            check = compile_check(Path(folder), gpu.arch, timeout_s=timeout_s, cubin_dir=Path(tmp), builds=builds)
        except CompilerUnavailable as exc:
            raise ProfileError(f"{exc}; install the CUDA toolkit to inspect .cu files") from None
        if not check.ok:
            raise ProfileError(_first_error(check.log))
        listings = {}
        for facts in check.resources.values():
            if facts["cubin"] not in listings:
                listings[facts["cubin"]] = sass.split_sass_functions(sass.sass_text(Path(facts["cubin"])))
        kernels = []
        for name, facts in check.resources.items():
            hist = sass.sass_histogram(listings[facts["cubin"]].get(name.split(" #")[0], ""))
            kernels.append({
                "name": name, "source": facts["source"], "defines": facts.get("defines", []), "target": gpu.arch,
                "registers": facts["registers"],
                "spills": {"store_bytes": facts["spill_store_bytes"], "load_bytes": facts["spill_load_bytes"]},
                "local_bytes": facts["stack_bytes"], "shared_bytes": facts["static_shared_bytes"],
                "wgmma_serialized": facts.get("wgmma_serialized"),
                "sass_instructions": sum(hist.values()),
                "families": sass.families(hist), "histogram": dict(hist.most_common()), "notes": [
                    "shared_bytes counts static shared memory only: dynamic shared memory is set at launch"],
            })
    return kernels


def _first_error(log: str) -> str:
    """'nvcc could not compile x.cu: <its first error line>' from compile_check's log."""
    lines = log.strip().splitlines() or ["?"]
    source = lines[0].split(":")[0]
    errors = [ln for ln in lines[1:] if "error" in ln] or lines[1:] or lines
    return f"nvcc could not compile {source}: {errors[0].strip()[:300]}"


def _data(kernels: list[dict], gpu, case: str, suite: str, problems: list[str]) -> dict:
    tensor_core = ("tensor core (tcgen05.mma)", "tensor core (wgmma)", "tensor core (mma.sync)")
    main = max(kernels, key=lambda k: (sum(k["families"].get(f, 0) for f in tensor_core), k["sass_instructions"]))
    return {
        "target": gpu.arch, "gpu": gpu.name, "case": case, "suite": suite, "triton": _triton_version(),
        "kernel": main["name"], "registers": main["registers"], "spills": main["spills"],
        "shared_bytes": main["shared_bytes"], "histogram": main["histogram"], "kernels": kernels, "problems": problems,
    }


def _triton_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("triton")
    except Exception:
        return None


def render(data: dict, top_opcodes: int = 8) -> str:
    lines = [f"compile report for {data['target']} ({data['gpu']}), {data['case']} of the {data['suite']} suite"
             + (f", Triton {data['triton']}" if data.get("triton") else "")]
    for k in data["kernels"]:
        shape = []
        if k.get("grid"):
            shape.append("grid " + "x".join(str(g) for g in k["grid"]))
        if k.get("num_warps"):
            shape.append(f"{k['num_warps']} warps, {k['num_stages']} stages")
        if k.get("constexprs"):
            shape.append(" ".join(f"{n}={v}" for n, v in k["constexprs"].items()))
        built = f"{k['source']}" + (f" with {' '.join(k['defines'])}" if k.get("defines") else "")
        lines.append(f"{k['name']} ({built})" + (": " + "; ".join(shape) if shape else ""))
        spills = k["spills"]
        lines.append(f"  registers {k['registers']}/thread, spills {spills['store_bytes']} B stored / "
                     f"{spills['load_bytes']} B loaded, shared memory {k['shared_bytes']:,} B/block, "
                     f"local memory {k.get('local_bytes')} B/thread")
        if k.get("wgmma_serialized"):
            lines.append(f"  ptxas serialized its wgmma (each waits for the one before): {k['wgmma_serialized']}")
        occ = k.get("occupancy")
        if occ:
            limits = {"registers": occ["by_registers"], "shared memory": occ["by_shared_memory"],
                      "warps": occ["by_warps"]}
            least = [name for name, v in limits.items() if v == occ["blocks_per_sm"]]
            lines.append(f"  about {occ['blocks_per_sm']} block(s)/SM = {occ['warps_per_sm']} warps/SM, limited by "
                         + ", ".join(least))
        lines.append(f"  SASS, {k['sass_instructions']:,} instructions in the binary: "
                     + ", ".join(f"{name} {n}" for name, n in k["families"].items()))
        lines.append("  top opcodes: " + ", ".join(f"{op} {n}" for op, n in list(k["histogram"].items())[:top_opcodes]))
        ptx = k.get("ptx_histogram")
        if ptx:
            lines.append("  PTX: " + ", ".join(f"{key} {ptx.get(key, 0)}" for key in PTX_KEYS))
        lines += [f"  note: {note}" for note in k.get("notes", [])]
    lines += [f"note: {p.splitlines()[0][:300]}" for p in data.get("problems", [])]
    return "\n".join(lines)
