"""Several evaluations at once: one worker per GPU it is given, N interpreter CPU workers, or Ray tasks.

An `EvalPool` holds slots, each an evaluator of its own (harness.Evaluator pinned to one GPU with
CUDA_VISIBLE_DEVICES, an interpreter worker, or a Ray slot from avo/cluster/ray.py), and one thread per slot that
takes jobs from a shared queue in the order they were submitted. Every evaluation is still a fresh isolated process;
a slot keeps its next one started and set up while it waits (`prewarm`). A side-by-side confirmation is one job,
so candidate and incumbent are timed in one process on one GPU. Nothing here commits or decides: the agent's side
(agent/batch.py) files results in call order. The pool has the Evaluator's interface (`evaluate`, `confirm`) plus
`submit`, so the code that scores one candidate at a time uses it unchanged.
"""

from __future__ import annotations

import os
import queue
import re
import socket
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

from avo.errors import UserError
from avo.evaluate.result import EvalResult

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class EvalPool:
    def __init__(self, slots: list, stop: threading.Event | None = None, where: str = ""):
        if not slots:
            raise ValueError("a pool needs at least one slot")
        self.slots = slots
        self.stop = stop or threading.Event()
        self.where = where or ", ".join(getattr(s, "worker", "") or "worker" for s in slots)
        """The workers, for people: 'gpu 0, gpu 1' or 'cpu 0, cpu 1' or 'Ray at ray://host:10001, 4 GPUs'."""
        self._jobs: queue.Queue = queue.Queue()
        self._threads = [threading.Thread(target=self._serve, args=(slot,), daemon=True,
                                          name=f"avo-eval-{i}") for i, slot in enumerate(slots)]
        for thread in self._threads:
            thread.start()

    @property
    def size(self) -> int:
        return len(self.slots)

    def submit(self, candidate_dir: Path) -> Future:
        """Score a candidate on the next free worker; the future holds its EvalResult."""
        folder = Path(candidate_dir)
        return self._put(lambda slot: slot.evaluate(folder))

    def evaluate(self, candidate_dir: Path) -> EvalResult:
        return self.submit(candidate_dir).result()

    def confirm(self, candidate_dir: Path, incumbent_dir: Path) -> tuple[EvalResult, EvalResult]:
        """Both re-run in one process on one worker, timed interleaved (harness.Evaluator.confirm)."""
        a, b = Path(candidate_dir), Path(incumbent_dir)
        return self._put(lambda slot: slot.confirm(a, b)).result()

    def close(self) -> None:
        """Kill what is running, let the prepared workers go, end the threads."""
        self.stop.set()
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join(timeout=30)
        for slot in self.slots:
            slot.close()

    def _put(self, job: Callable[[Any], Any]) -> Future:
        future: Future = Future()
        self._jobs.put((future, job))
        return future

    def _serve(self, slot) -> None:
        # Every worker process of this slot is started from this thread, which lives as long as the pool: a child
        # is set to die with the thread that started it (procs.die_with_parent).
        try:
            slot.warm()
        except Exception:  # a worker that cannot start shows up in the first evaluation's result
            pass
        while True:
            item = self._jobs.get()
            if item is None:
                return
            future, job = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job(slot))
            except BaseException as exc:  # an avo bug: the agent's tool call reports it, the run goes on
                future.set_exception(exc)


def make_pool(task_spec: str, *, device: str, gpu, config, pool, hide: tuple[Path, ...] = ()) -> EvalPool:
    """The pool of this machine `pool` (config.PoolConfig) asks for: one Evaluator per GPU of `--gpus` (default:
    one on the first GPU), or `--workers` interpreter workers. (`--cluster`: avo.cluster.make_pool.) `hide`: what
    the sandbox masks besides the home folder (the runs folder)."""
    from avo.evaluate.harness import Evaluator

    if pool.cluster:
        raise ValueError("a cluster's pool comes from avo.cluster.make_pool")
    stop, known = threading.Event(), {}
    host = socket.gethostname()

    def evaluator(worker: str, env: dict[str, str]) -> Evaluator:
        return Evaluator(task_spec, device=device, gpu=gpu, config=config, prewarm=pool.prewarm, env=env,
                         known=known, stop=stop, worker=worker, node=host, hide=hide)

    if device == "interpret":
        if pool.gpus:
            raise UserError("--gpus names GPUs, and --device interpret runs on the CPU: use --workers N for N "
                            "interpreter workers")
        count = pool.workers or 1
        threads = str(max(1, (os.cpu_count() or 1) // count))
        env = {name: threads for name in THREAD_VARS if name not in os.environ} if count > 1 else {}
        return EvalPool([evaluator(f"cpu {i}", env) for i in range(count)], stop)
    if pool.workers not in (None, 1):
        raise UserError("--workers sets how many interpreter CPU workers run (--device interpret); on GPUs give "
                        "--gpus 0,1,2,3 or --gpus all, one worker per GPU")
    if not pool.gpus:
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"  # without asking NVML
        return EvalPool([evaluator(f"gpu {first}", {})], stop)
    chosen = choose_gpus(pool.gpus, visible_gpus())
    check_same_kind(chosen, gpu)
    return EvalPool([evaluator(f"gpu {g}", {"CUDA_VISIBLE_DEVICES": g}) for g in chosen], stop)


def visible_gpus() -> list[str]:
    """The GPUs avo may use, as CUDA_VISIBLE_DEVICES names them (indices or UUIDs), else NVML's indices."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip()]
    from avo.gpus import nvml_device_count

    return [str(i) for i in range(nvml_device_count())]


def choose_gpus(text: str, visible: list[str]) -> list[str]:
    """`--gpus 0,1,3` (positions among the visible GPUs) or `all`, as the names a worker's CUDA_VISIBLE_DEVICES
    takes; a UserError in one line for anything else."""
    if not visible:
        raise UserError("--gpus: no NVIDIA GPU found: run on a GPU machine, or use --device interpret --workers N")
    if text.strip().lower() == "all":
        return list(visible)
    if not re.fullmatch(r"\s*\d+\s*(,\s*\d+\s*)*", text):
        raise UserError(f"--gpus {text}: give GPU indices separated by commas (e.g. --gpus 0,1,2,3) or --gpus all")
    indices = [int(part) for part in text.split(",")]
    if len(set(indices)) != len(indices):
        raise UserError(f"--gpus {text} names a GPU twice: one worker per GPU")
    missing = [i for i in indices if i >= len(visible)]
    if missing:
        raise UserError(f"--gpus {text}: there is no GPU {missing[0]}; this machine shows {len(visible)} "
                        f"(0-{len(visible) - 1})")
    return [visible[i] for i in indices]


def check_same_kind(chosen: list[str], gpu) -> None:
    """Every GPU given is the model the run is for (its bench numbers must be comparable)."""
    from avo.gpus import nvml_device_name, profile_named

    for name in chosen:
        if not name.isdigit():  # a UUID: NVML's index for it is not known here
            continue
        present = nvml_device_name(int(name))
        if present is not None and getattr(profile_named(present), "name", None) != gpu.name:
            raise UserError(f"--gpus: GPU {name} is '{present}', not a {gpu.name}: give the GPUs of one kind")
