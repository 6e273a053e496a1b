"""MANIFEST.json of a package: where the kernel came from (run, candidate, commit), what it was measured against
and with what (per case: times, speedup; the GPU, the library, the versions), what the guard lets through to it,
and what the package needs installed."""

from __future__ import annotations

from avo import extras
from avo.errors import UserError
from avo.util.shipped import CHECKOUT

FORMAT = "avo-package"
TORCH = "torch>=2.4"
"""torch.library.custom_op and register_fake arrived in torch 2.4."""
_CASE_FIELDS = ("case", "suite", "dtype", "correct", "rel_err", "tolerance", "ms", "library_ms", "tflops",
                "library_tflops", "speedup", "host_us", "library_host_us")
"""Per case: the measured GPU times and speedup, and the host time per call of the kernel and of the library (None
where the run predates it or timed no GPU): a caller that waits on each call pays the host time's difference."""


def requirements(imported: set[str], cuda_version: str) -> list[str]:
    """What the package's kernel needs besides the standard library: torch, and triton or the CUDA extra's
    packages (for the CUDA major the candidate was measured with)."""
    needs = [TORCH]
    if "triton" in imported:
        needs.append("triton")
    if "numpy" in imported:
        needs.append("numpy")
    if "avo" in imported:  # avo.cuda, carried as a copy: it compiles and launches through CuPy
        major = int(cuda_version.split(".")[0]) if cuda_version[:1].isdigit() else extras.DEFAULT_CUDA
        extra = extras.CUDA_EXTRAS.get(major)
        found = (extras.extra_requirements(extra) or _checkout_extra(extra)) if extra else []
        if not found:
            raise UserError(f"cannot tell the packages of avo's {extra or 'CUDA'} extra for a CUDA C++ kernel "
                            f"measured with CUDA {cuda_version or '?'}: install avo with `pip install -e .` "
                            "in its checkout")
        needs += [r for r in found if not r.startswith("numpy")]
    return needs


def _checkout_extra(extra: str) -> list[str]:
    """The extra's requirements from the pyproject.toml of the checkout avo runs from, where avo is not installed
    (its metadata is what extras.extra_requirements reads)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return []
    pyproject = CHECKOUT / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return []
    return list(project.get("optional-dependencies", {}).get(extra, [])) if project.get("name") == "avo" else []


def manifest_for(run_id: str, chosen, *, name: str, guard: dict, unread: list[str], needs: list[str],
                 language: str, cuda_graphs: bool) -> dict:
    result = chosen.result
    return {
        "format": FORMAT, "version": 1, "name": name, "op": chosen.task, "run_id": run_id, "cid": chosen.cid,
        "commit": chosen.sha, "kernel": language, "fitness": result.fitness,
        "measured": {"timing": result.timing_source, "gpu": result.gpu,
                     "gpu_device": result.versions.get("gpu_device", ""), "device": result.device,
                     "library": result.library, "versions": result.versions, "seed": result.seed},
        "cases": [{key: getattr(case, key) for key in _CASE_FIELDS} for case in result.cases],
        "guard": guard,
        "cases_not_guarded": unread,
        "requirements": needs,
        "cuda_graphs": cuda_graphs,
    }


def host_times(manifest: dict) -> tuple[float, float, int] | None:
    """(the kernel's, the library's median host µs per call, cases) over the timed cases that recorded both; None
    where none did (a run from before the library's was kept, or one timed with no GPU)."""
    import statistics

    pairs = [(c["host_us"], c["library_host_us"]) for c in manifest["cases"]
             if c.get("host_us") is not None and c.get("library_host_us") is not None]
    if not pairs:
        return None
    return statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs), len(pairs)
