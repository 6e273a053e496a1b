"""Evaluation on several machines: ray.py runs the evaluation workers as Ray actors (`avo evolve --cluster`).

`make_pool` is the run's pool: Ray slots with `--cluster`, else this machine's (avo.evaluate.pool). It lives here,
above evaluate, so evaluate never imports the cluster code that imports it.
"""

from __future__ import annotations

import threading

from avo.errors import UserError
from avo.evaluate.pool import EvalPool
from avo.evaluate.pool import make_pool as local_pool


def make_pool(task_spec: str, *, device: str, gpu, config, pool, hide: tuple = ()) -> EvalPool:
    """The pool `pool` (config.PoolConfig) asks for: Ray slots with a cluster, else this machine's workers (whose
    sandbox masks `hide` too)."""
    if not pool.cluster:
        return local_pool(task_spec, device=device, gpu=gpu, config=config, pool=pool, hide=hide)
    if pool.gpus:
        raise UserError("--gpus picks GPUs of this machine; with --cluster, Ray places each evaluation on a GPU "
                        "of the cluster: leave --gpus out (--workers caps how many run at once)")
    from avo.cluster.ray import ray_pool

    return ray_pool(pool.cluster, task_spec, device=device, gpu=gpu, config=config, workers=pool.workers,
                    stop=threading.Event(), known={}, prewarm=pool.prewarm)
