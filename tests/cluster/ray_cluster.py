"""A local Ray cluster for the tests, loopback only: `python ray_cluster.py GPUS` starts a head node with GPUS logical
GPUs (and as many CPUs) and a Ray Client server, prints its address, its Ray Client address and the addresses its
nodes listen on, and runs until its stdin closes; then it shuts the cluster down."""

from __future__ import annotations

import os
import sys

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # single-node mode: every Ray server binds 127.0.0.1 only
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

import socket  # noqa: E402

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(gpus: int, client_port: int) -> Cluster:
    return Cluster(initialize_head=True, head_node_args={"num_cpus": max(1, gpus), "num_gpus": gpus,
                                                         "include_dashboard": False,
                                                         "ray_client_server_port": client_port})


if __name__ == "__main__":
    port = free_port()
    cluster = start(int(sys.argv[1]), port)
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    addresses = sorted({n["NodeManagerAddress"] for n in ray.nodes()})
    ray.shutdown()
    print(f"{cluster.address} ray://127.0.0.1:{port} {','.join(addresses)}", flush=True)
    sys.stdin.read()
    cluster.shutdown()
