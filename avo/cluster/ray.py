"""Evaluations as Ray tasks: `avo evolve --cluster ray` (the cluster this machine belongs to) or `ray://host:port`.

Each evaluation is one Ray task that takes one GPU (on a cluster without GPUs, under `--device interpret`, one CPU).
The candidate folder travels as bytes; on the node the task lands on it is written to a temp folder and scored by
the same worker command as a local evaluation (harness.Evaluator: a fresh isolated process with stage limits and a
scrubbed environment, pinned by Ray's CUDA_VISIBLE_DEVICES to the task's GPU); the EvalResult comes back as JSON.
The agent, the lineage and the run directory stay on the machine that runs `avo evolve`. The task first reports
where it runs, so a node lost mid-evaluation gives that candidate a `crash` result naming the node, and the run
goes on. Ray is an optional extra (`avo[ray]`); every node needs avo and its dependencies installed.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any

from avo.errors import UserError
from avo.evaluate.result import EvalResult

INSTALL = "pip install -e '.[ray]' in avo's checkout (or pip install 'ray>=2.40')"
MAX_FOLDER_BYTES = 64 << 20
SCHEDULE_LIMIT_S = 900.0
"""How long a task may wait for a free GPU before its candidate is given up as a crash."""
POLL_S = 0.5


def import_ray():
    try:
        import ray
    except ImportError:
        raise UserError(f"--cluster needs Ray, which is not installed here: {INSTALL}") from None
    return ray


def connect(address: str):
    """Ray, connected to the cluster `address` names (reused when this process is connected already)."""
    if address != "ray" and not address.startswith("ray://"):
        raise UserError(f"--cluster {address}: give ray (the Ray cluster this machine belongs to, as `ray start` "
                        "made it) or ray://host:port (a cluster's Ray Client address)")
    ray = import_ray()
    if not ray.is_initialized():
        try:
            ray.init(address="auto" if address == "ray" else address, log_to_driver=False, logging_level="ERROR")
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise UserError(f"--cluster {address}: no Ray cluster could be reached ({first}): start one with "
                            "`ray start --head` on this machine, or give ray://host:port") from None
    return ray


def ray_pool(address: str, task_spec: str, *, device: str, gpu, config, workers: int | None,
             stop: threading.Event, known: dict):
    from avo.evaluate.pool import EvalPool

    ray = connect(address)
    resources = ray.cluster_resources()
    gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 0))
    if gpus:
        per_task, default, unit = {"num_gpus": 1}, gpus, "GPU"
    elif device == "interpret":
        per_task, default, unit = {"num_cpus": 1}, max(1, cpus), "CPU"
    else:
        raise UserError(f"--cluster {address}: the Ray cluster has no GPUs (resources: {cpus} CPUs); start its "
                        "nodes on GPU machines, or use --device interpret")
    count = workers or default
    spec = {"task": task_spec, "device": device, "gpu": gpu.name, "config": config.model_dump(mode="json")}
    path = task_spec.partition("?")[0]
    if path.endswith(".py"):  # a KernelBench file: its bytes go along, the nodes need not share the path
        spec["task_file"] = (Path(path).name, Path(path).read_bytes())
    remote = ray.remote(evaluate_on_node).options(max_retries=0, **per_task)
    slots = [RaySlot(ray, remote, spec, stop, known, unit) for _ in range(count)]
    return EvalPool(slots, stop, where=f"Ray at {address}: {count} at once, one {unit} each")


class RaySlot:
    """One evaluation at a time, as a Ray task; the pool runs as many slots as evaluations may run at once."""

    worker = ""

    def __init__(self, ray, remote, spec: dict, stop: threading.Event, known: dict, unit: str = "GPU"):
        self.ray, self.remote, self.spec, self.stop, self.known, self.unit = ray, remote, spec, stop, known, unit

    def warm(self) -> None:
        pass

    def close(self) -> None:
        pass

    def evaluate(self, candidate_dir: Path) -> EvalResult:
        return self._run([Path(candidate_dir)], "evaluate")[0]

    def confirm(self, candidate_dir: Path, incumbent_dir: Path) -> tuple[EvalResult, EvalResult]:
        first, second = self._run([Path(candidate_dir), Path(incumbent_dir)], "confirm")
        return first, second

    def _run(self, folders: list[Path], mode: str) -> list[EvalResult]:
        ray = self.ray
        try:
            payload = dict(self.spec, mode=mode, files=[pack(f) for f in folders], known=dict(self.known))
        except ValueError as exc:
            return [self._failure(str(exc), {}) for _ in folders]
        started = time.monotonic()
        where: dict = {}
        refs = self.remote.remote(payload)
        try:
            where = self._next(refs, SCHEDULE_LIMIT_S)
            reply = json.loads(self._next(refs, None))
        except _Stopped:
            ray.cancel(refs, force=True)
            return [self._failure("the evaluation was stopped: the run is ending", where) for _ in folders]
        except _NotScheduled:
            ray.cancel(refs, force=True)
            message = (f"no Ray task could start within {SCHEDULE_LIMIT_S:g} s: no {self.unit} of the cluster "
                       "came free")
            return [self._failure(message, where) for _ in folders]
        except (ray.exceptions.RayError, StopIteration) as exc:
            node = where.get("node") or "of the cluster"
            text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            message = (f"the Ray node {node} running this evaluation was lost, or its task died "
                       f"({type(exc).__name__}: {text})")
            return [self._failure(message, where) for _ in folders]
        if reply.get("known", {}).get("forbidden") is not None:
            self.known.setdefault("forbidden", reply["known"]["forbidden"])
        results = [EvalResult.model_validate(r) for r in reply["results"]]
        for r in results:
            r.wall_s = round(time.monotonic() - started, 3)
        return results

    def _next(self, refs, limit_s: float | None) -> Any:
        """The task's next item, waiting while the run goes on."""
        began = time.monotonic()
        while True:
            if self.stop.is_set():
                raise _Stopped
            ready, _ = self.ray.wait([refs], timeout=POLL_S)
            if ready:
                return self.ray.get(next(refs))
            if limit_s is not None and time.monotonic() - began > limit_s:
                raise _NotScheduled

    def _failure(self, message: str, where: dict) -> EvalResult:
        return EvalResult(status="crash", rule="crash", message=message, device=self.spec["device"],
                          gpu=self.spec["gpu"], worker=where.get("worker", ""), node=where.get("node", ""))


class _Stopped(Exception):
    pass


class _NotScheduled(Exception):
    pass


def pack(folder: Path) -> dict[str, bytes]:
    """The candidate's files by relative path (no bytecode); ValueError past MAX_FOLDER_BYTES."""
    files, total = {}, 0
    for path in sorted(Path(folder).rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        data = path.read_bytes()
        total += len(data)
        if total > MAX_FOLDER_BYTES:
            raise ValueError(f"the candidate folder holds more than {MAX_FOLDER_BYTES >> 20} MiB: too large to ship "
                             "to a Ray node")
        files[path.relative_to(folder).as_posix()] = data
    return files


def unpack(files: dict[str, bytes], dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name, data in files.items():
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"a file path that leaves the candidate folder: {name}")
        target = dest.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return dest


def evaluate_on_node(payload: dict):
    """The Ray task (a generator): first where it runs, then the results as JSON."""
    import socket

    import ray

    from avo.config import EvalConfig
    from avo.evaluate.harness import Evaluator
    from avo.gpus import PROFILES

    context = ray.get_runtime_context()
    gpu_ids = ray.get_gpu_ids()
    node = f"{socket.gethostname()} {ray.util.get_node_ip_address()} (node {context.get_node_id()[:8]})"
    worker = f"gpu {gpu_ids[0]}" if gpu_ids else f"cpu (pid {os.getpid()})"
    yield {"node": node, "worker": worker}
    with tempfile.TemporaryDirectory(prefix="avo-ray-") as tmp:
        folders = [unpack(files, Path(tmp) / f"candidate{i}") for i, files in enumerate(payload["files"])]
        spec = payload["task"]
        if payload.get("task_file"):
            name, data = payload["task_file"]
            (Path(tmp) / name).write_bytes(data)
            options = spec.partition("?")[2]
            spec = str(Path(tmp) / name) + (f"?{options}" if options else "")
        evaluator = Evaluator(spec, device=payload["device"], gpu=PROFILES[payload["gpu"]],
                              config=EvalConfig.model_validate(payload["config"]), known=dict(payload["known"]),
                              worker=worker, node=node)
        if payload["mode"] == "confirm":
            results = list(evaluator.confirm(folders[0], folders[1]))
        else:
            results = [evaluator.evaluate(folders[0])]
        yield json.dumps({"results": [r.model_dump(mode="json") for r in results], "known": evaluator.known})
