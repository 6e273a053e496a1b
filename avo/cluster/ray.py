"""Evaluations as Ray tasks: `avo evolve --cluster ray` (the cluster this machine belongs to) or `ray://host:port`.

Each worker slot of the pool is a Ray actor holding one GPU of the cluster (on a cluster without GPUs, under
`--device interpret`, one CPU); each evaluation is one task of that actor. The candidate folder travels as bytes; on
the node it is written to a temp folder and scored by the same worker command as a local evaluation
(harness.Evaluator: a fresh isolated process with stage limits and a scrubbed environment, pinned by Ray's
CUDA_VISIBLE_DEVICES to the actor's GPU, the next one prepared ahead); the EvalResult comes back as JSON. The agent,
the lineage and the run directory stay on the machine that runs `avo evolve`. An actor reports where it runs when it
is placed, so a node lost mid-evaluation gives that candidate a `crash` result naming the node; the slot places a
new actor for its next evaluation, and the run goes on. Ray is an optional extra (`avo[ray]`); every node needs avo
and its dependencies installed.
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
from avo.util.format import first_line

INSTALL = "pip install -e '.[ray]' in avo's checkout (or pip install 'ray[client]>=2.40')"
MAX_FOLDER_BYTES = 64 << 20
SCHEDULE_LIMIT_S = 900.0
"""How long a slot waits for its actor to be placed (a GPU to come free) before its candidate is a crash."""
POLL_S = 0.5
CONNECT_ATTEMPTS = 3


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
    for attempt in range(CONNECT_ATTEMPTS):
        if ray.is_initialized():
            return ray
        try:
            ray.init(address="auto" if address == "ray" else address, log_to_driver=False, logging_level="ERROR")
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            # Ray Client's server starts a driver per client; on a busy head that can fail once and then work
            if "Initialization failure from server" in first and attempt + 1 < CONNECT_ATTEMPTS:
                time.sleep(2.0 * (attempt + 1))
                continue
            raise UserError(f"--cluster {address}: no Ray cluster could be reached ({first}): start one with "
                            "`ray start --head` on this machine, or give ray://host:port") from None
    return ray


def ray_pool(address: str, task_spec: str, *, device: str, gpu, config, workers: int | None,
             stop: threading.Event, known: dict, prewarm: bool = True):
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
    count = min(workers, default) if workers else default  # an actor beyond the cluster's GPUs would never start
    spec = {"task": task_spec, "device": device, "gpu": gpu.name, "config": config.model_dump(mode="json"),
            "prewarm": prewarm}
    path = task_spec.partition("?")[0]
    if path.endswith(".py"):  # a KernelBench file: its bytes go along, the nodes need not share the path
        spec["task_file"] = (Path(path).name, Path(path).read_bytes())
    actor = ray.remote(NodeEvaluator).options(max_restarts=0, **per_task)
    slots = [RaySlot(ray, actor, spec, stop, known, unit) for _ in range(count)]
    return EvalPool(slots, stop, where=f"Ray at {address}: {count} at once, one {unit} each")


class RaySlot:
    """One evaluation at a time, on a Ray actor that holds one GPU of the cluster (a new one after a loss)."""

    def __init__(self, ray, actor_class, spec: dict, stop: threading.Event, known: dict, unit: str = "GPU"):
        self.ray, self.actor_class, self.spec, self.stop, self.known, self.unit = (ray, actor_class, spec, stop,
                                                                                   known, unit)
        self.actor, self.where = None, {}

    def warm(self) -> None:
        """Place the actor now (it takes its GPU and starts its first worker), not at the first candidate."""
        try:
            self._placed()
        except Exception:  # a cluster that cannot place it says so at the first evaluation
            self._drop()

    def close(self) -> None:
        """End the actor after it closed its evaluator and removed its folder (ray.kill alone skips that)."""
        if self.actor is not None:
            try:
                self.ray.get(self.actor.close.remote(), timeout=10)
            except Exception:  # gone with its node, or stuck: killed below
                pass
        self._drop()

    def evaluate(self, candidate_dir: Path) -> EvalResult:
        return self._run([Path(candidate_dir)], "evaluate")[0]

    def confirm(self, candidate_dir: Path, incumbent_dir: Path) -> tuple[EvalResult, EvalResult]:
        first, second = self._run([Path(candidate_dir), Path(incumbent_dir)], "confirm")
        return first, second

    def _run(self, folders: list[Path], mode: str) -> list[EvalResult]:
        ray = self.ray
        try:
            files = [pack(f) for f in folders]
        except ValueError as exc:
            return [self._failure(str(exc)) for _ in folders]
        started = time.monotonic()
        try:
            actor = self._placed()
            reply = json.loads(self._wait(actor.run.remote(mode, files, dict(self.known)), None))
        except _Stopped:
            self._drop()
            return [self._failure("the evaluation was stopped: the run is ending") for _ in folders]
        except _NotScheduled:
            self._drop()
            message = (f"no Ray actor could be placed within {SCHEDULE_LIMIT_S:g} s: no {self.unit} of the cluster "
                       "came free")
            return [self._failure(message) for _ in folders]
        except ray.exceptions.RayError as exc:
            node = self.where.get("node") or "of the cluster"
            message = (f"the Ray node {node} running this evaluation was lost, or its worker died "
                       f"({first_line(exc)[:300]})")
            failures = [self._failure(message) for _ in folders]
            self._drop()
            return failures
        if reply.get("known", {}).get("forbidden") is not None:
            self.known.setdefault("forbidden", reply["known"]["forbidden"])
        results = [EvalResult.model_validate(r) for r in reply["results"]]
        for r in results:
            r.wall_s = round(time.monotonic() - started, 3)
        return results

    def _placed(self):
        """The slot's actor, created (and where it runs learned) when there is none."""
        if self.actor is None:
            self.where = {}
            self.actor = self.actor_class.remote(self.spec)
            self.where = self._wait(self.actor.where.remote(), SCHEDULE_LIMIT_S)
        return self.actor

    def _drop(self) -> None:
        if self.actor is not None:
            try:
                self.ray.kill(self.actor)
            except Exception:  # already gone with its node
                pass
        self.actor = None

    def _wait(self, ref, limit_s: float | None) -> Any:
        """The value of `ref`, waiting while the run goes on."""
        began = time.monotonic()
        while True:
            if self.stop.is_set():
                raise _Stopped
            ready, _ = self.ray.wait([ref], timeout=POLL_S)
            if ready:
                return self.ray.get(ready[0])
            if limit_s is not None and time.monotonic() - began > limit_s:
                raise _NotScheduled

    def _failure(self, message: str) -> EvalResult:
        return EvalResult(status="crash", rule="crash", message=message, device=self.spec["device"],
                          gpu=self.spec["gpu"], worker=self.where.get("worker", ""), node=self.where.get("node", ""))


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


class NodeEvaluator:
    """The Ray actor: an evaluator on the node it was placed on, pinned by Ray to the GPU it holds, keeping its next
    worker process prepared (harness.Evaluator with prewarm). Each `run` is a fresh isolated worker process."""

    def __init__(self, spec: dict):
        import socket

        import ray

        from avo.config import EvalConfig
        from avo.evaluate.harness import Evaluator
        from avo.gpus import PROFILES

        context = ray.get_runtime_context()
        gpu_ids = ray.get_gpu_ids()
        self.node = f"{socket.gethostname()} {ray.util.get_node_ip_address()} (node {context.get_node_id()[:8]})"
        self.worker = f"gpu {gpu_ids[0]}" if gpu_ids else f"cpu (pid {os.getpid()})"
        from avo.util import procs

        procs.sweep_stale()  # folders of actors that ended without closing (their node's avo never runs here)
        self._tmp = procs.temp_dir("ray")
        task = spec["task"]
        if spec.get("task_file"):  # a KernelBench file, shipped as bytes
            name, data = spec["task_file"]
            (Path(self._tmp.name) / name).write_bytes(data)
            options = task.partition("?")[2]
            task = str(Path(self._tmp.name) / name) + (f"?{options}" if options else "")
        self.evaluator = Evaluator(task, device=spec["device"], gpu=PROFILES[spec["gpu"]],
                                   config=EvalConfig.model_validate(spec["config"]), prewarm=spec["prewarm"],
                                   worker=self.worker, node=self.node)
        self.evaluator.warm()

    def where(self) -> dict:
        return {"node": self.node, "worker": self.worker}

    def close(self) -> None:
        self.evaluator.close()
        self._tmp.cleanup()

    def run(self, mode: str, files: list[dict[str, bytes]], known: dict) -> str:
        for key, value in known.items():
            self.evaluator.known.setdefault(key, value)
        with tempfile.TemporaryDirectory(dir=self._tmp.name) as tmp:
            folders = [unpack(f, Path(tmp) / f"candidate{i}") for i, f in enumerate(files)]
            if mode == "confirm":
                results = list(self.evaluator.confirm(folders[0], folders[1]))
            else:
                results = [self.evaluator.evaluate(folders[0])]
        return json.dumps({"results": [r.model_dump(mode="json") for r in results], "known": self.evaluator.known})
