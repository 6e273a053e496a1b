"""`avo package`: a run's candidate as an installable Python package (a torch custom op, the library its fallback)."""

from __future__ import annotations

from pathlib import Path

import typer

from avo.commands.runs import RUNS_DIR


def register(app: typer.Typer) -> None:
    app.command("package")(package)


def package(run: str = typer.Argument(..., help="Run id, path, or 'latest'."),
            cid: str = typer.Argument("best", help="The candidate: best (default), a cid, or a git revision."),
            out: Path = typer.Option(..., "--out", help="Folder to write the package to (new, or empty)."),
            name: str | None = typer.Option(None, "--name", help="Package and op namespace; default from the task "
                                            "and run, e.g. attention_20261130_004738."),
            allow_unmeasured: bool = typer.Option(False, "--allow-unmeasured", help="Package a candidate measured "
                                                  "only under the interpreter (never timed on a GPU)."),
            keep_slower: bool = typer.Option(False, "--keep-slower", help="Send to the kernel the timed shapes at "
                                             "which the library measured faster, too (by default they stay the "
                                             "library's)."),
            ignore_host_time: bool = typer.Option(False, "--ignore-host-time", help="Judge the timed shapes by GPU "
                                                  "time alone: by default a shape at which the kernel saved less GPU "
                                                  "time per call than it added host time stays the library's."),
            runs_dir: Path = RUNS_DIR) -> None:
    """Write a candidate (best by default) as a package: a torch custom op with a fake implementation, a guard that
    sends every input the run did not check to the library, patch() to route library calls, and MANIFEST.json."""
    from avo.package.build import build
    from avo.package.manifest import host_times
    from avo.run.directory import Run

    opened = Run.open(run, runs_dir)
    try:
        built = build(opened, cid, out, name=name, allow_unmeasured=allow_unmeasured, keep_slower=keep_slower,
                      weigh_host=not ignore_host_time)
    finally:
        opened.close()
    manifest = built.manifest
    measured = manifest["measured"]
    where = measured["gpu_device"] or measured["gpu"] or measured["device"]
    print(f"packaged {built.chosen.cid} of run {opened.id} ({manifest['kernel']} {manifest['op']}, fitness "
          f"{manifest['fitness']:.3f}x {measured['library']}, {measured['timing']} timing on {where}) as "
          f"{built.name} in {built.out}")
    ranges = ", ".join(f"{d} {lo}..{hi}" for d, (lo, hi) in manifest["guard"]["ranges"].items())
    values = ", ".join(f"{d} {v}" for d, v in manifest["guard"]["values"].items())
    print(f"guard: {', '.join(manifest['guard']['dtypes'])}; {ranges}" + (f"; {values}" if values else ""))
    _say_timed_shapes(manifest, keep_slower, where)
    hosted = host_times(manifest)
    if hosted:
        print(f"host time per call (median of {hosted[2]} timed cases): kernel {hosted[0]:.0f} µs, library "
              f"{hosted[1]:.0f} µs; the speedups are GPU time, and a model that waits on each call pays the difference")
    if manifest["kernel"] == "cuda" or manifest["cuda_graphs"]:
        print("CUDA graphs: " + ("kernel.py declares CUDA_GRAPHS: the kernel runs inside a torch.cuda.graph capture"
                                 if manifest["cuda_graphs"] else "kernel.py does not declare CUDA_GRAPHS: inside a "
                                 "CUDA graph capture the library takes the calls"))
    print(f"install: pip install {built.out}   then: import {built.name}   (op {built.name}::{manifest['op']})")


def _say_timed_shapes(manifest: dict, keep_slower: bool, where: str) -> None:
    """Which timed shapes the guard leaves to the library, and how shapes and GPUs the run never timed are judged."""
    measured = manifest["measured"]
    faster = manifest["guard"]["library_faster"]
    if faster["timed"]:
        kept = "kept on the kernel (--keep-slower)" if keep_slower else "left to the library"
        slower = [" ".join(f"{dim}={value}" for dim, value in zip(faster["dims"], shape)) + f" {speedup:.3f}x"
                  + (f" (saves {host[0]:.0f} µs of GPU time, adds {host[1]:.0f} µs of host time)"
                     if reason == "host" else "")
                  for shape, speedup, reason, host in zip(faster["shapes"], faster["speedups"], faster["reasons"],
                                                          faster["host_us"])]
        print(f"timed shapes where the library was faster, or the kernel's GPU saving under its added host time, "
              f"{kept}: {len(slower)} of {faster['timed']}" + (f": {'; '.join(slower)}" if slower else ""))
        if not keep_slower and manifest["kernel"] != "python" and measured["timing"] == "gpu":
            print("other shapes inside the guard's ranges: checked and timed by their first call on the user's GPU, "
                  "kernel against library, and judged by the same rules")
            capabilities = manifest["guard"].get("capabilities") or []
            if capabilities:
                kin = " or ".join(".".join(map(str, c)) for c in capabilities)
                print(f"on a GPU other than {where} of compute capability {kin}: every covered shape judged so; on "
                      f"any other GPU every call goes to the library")
