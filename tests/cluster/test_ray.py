"""`--cluster ray`: the two-worker heuristic evolve on a local Ray cluster that the test starts (logical GPUs, every
server on 127.0.0.1), a node lost mid-evaluation, and what the flag says without Ray. The cluster tests skip, saying
so, only where Ray is not installed (the `ray` extra)."""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import needs
import pytest

from replay_runs import untimed_single_worker_run
from worker_procs import evaluation_workers, parent_of
from avo.cluster.ray import connect
from avo.errors import UserError

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray is imported here: loopback only
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

HERE = Path(__file__).parent
REPO = HERE.parents[1]
KERNELS = REPO / "tests" / "evaluate" / "kernels"


def test_without_ray_the_flag_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` finds where Ray is not installed
    needs_ray = r"--cluster needs Ray, which is not installed here: pip install -e '\.\[ray\]'"
    with pytest.raises(UserError, match=needs_ray):
        connect("ray")


def test_an_address_that_is_not_ray_is_one_line():
    with pytest.raises(UserError, match=r"give ray .* or ray://host:port"):
        connect("tcp://10.0.0.1:6379")


@pytest.fixture
def cluster():
    needs.module("ray")
    proc = subprocess.Popen([sys.executable, str(HERE / "ray_cluster.py"), "2"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        readable, _, _ = select.select([proc.stdout], [], [], 90)
        assert readable, "the local Ray cluster did not start within 90 s"
        address, client, nodes = proc.stdout.readline().split()
        yield address, client, nodes
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def evolve(runs: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    config = runs.parent / f"{runs.name}.json"
    config.write_text(json.dumps({"evaluation": {"bench_suite": ""}}))
    env = {k: v for k, v in (env or os.environ).items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    return subprocess.run([sys.executable, "-m", "avo", "evolve", "--kernel", "gemm", "--device", "interpret",
                           "--agent", "heuristic", "--runs-dir", str(runs), "--quiet", "--config", str(config),
                           "--max-candidates", "4", *extra], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def rows(runs: Path, tmp: Path) -> list[tuple]:
    from avo.run.directory import Run

    run = Run.open("latest", runs)
    found = []
    for info in reversed(run.lineage.log()[:-1]):
        run.lineage.checkout(info.cid, tmp / info.cid)
        digest = hashlib.sha256((tmp / info.cid / "kernel.py").read_bytes()).hexdigest()
        found.append((info.parent, info.status, info.rationale, digest))
    return found


@pytest.mark.slow
def test_the_same_evolve_runs_on_a_local_ray_cluster(cluster, tmp_path, tmp_path_factory):
    from avo.run.directory import Run

    _, client, nodes = cluster
    assert nodes == "127.0.0.1", f"a Ray node listens beyond loopback: {nodes}"
    done = evolve(tmp_path / "ray", "--cluster", client)  # through Ray Client, as from another machine
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = Run.open("latest", tmp_path / "ray")
    turns = [e for e in run.events() if e["kind"] == "model_turn"]
    assert [n for n in (sum(c["name"] == "evaluate" for c in t["tool_calls"]) for t in turns) if n] == [2, 2]
    results = [run.load_eval(f"c000{i}") for i in range(5)]
    assert all(r.status == "correct" for r in results), [r.message for r in results]
    assert {r.worker for r in results} == {"gpu 0", "gpu 1"}, {r.worker for r in results}
    assert all("127.0.0.1" in r.node for r in results)
    local = untimed_single_worker_run(tmp_path_factory.mktemp("untimed"))  # the same evolve without Ray
    assert sorted(rows(tmp_path / "ray", tmp_path / "a")) == sorted(rows(local, tmp_path / "b"))


def _descends_from_this_test(pid: int) -> bool:
    """This process started the cluster's raylet, which started the actor, which started the worker."""
    for _ in range(8):
        pid = parent_of(pid)
        if pid == os.getpid():
            return True
        if pid <= 1:
            return False
    return False


def _scoring_workers() -> list[int]:
    """Evaluation workers under this test's cluster that have begun on a candidate's cases (the machine may run
    other evaluations)."""
    return evaluation_workers(_descends_from_this_test, scoring=True)


@pytest.mark.slow
def test_a_node_lost_mid_evaluation_is_a_crash_naming_it_and_the_next_evaluation_runs(tmp_path, monkeypatch):
    ray = needs.module("ray")
    from ray.cluster_utils import Cluster

    from avo.config import EvalConfig, PoolConfig
    from avo.cluster import make_pool
    from avo.gpus import PROFILES

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False})
    pool = None
    try:
        node = cluster.add_node(num_cpus=1, num_gpus=1)
        monkeypatch.setenv("RAY_ADDRESS", cluster.address)  # `--cluster ray`: the cluster this machine is in
        config = EvalConfig(check_suite="tiny", bench_suite="", seed=5, check_timeout_s=120.0)
        pool = make_pool("gemm", device="interpret", gpu=PROFILES["h200"], config=config,
                         pool=PoolConfig(cluster="ray"))
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        assert pool.size == 1
        hung = pool.submit(KERNELS / "endless_loop")
        deadline = time.monotonic() + 90
        while not _scoring_workers() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _scoring_workers(), "the evaluation never reached its first case on the node"
        lost_id = node.node_id[:8]
        cluster.remove_node(node)
        crashed = hung.result(timeout=120)
        cluster.add_node(num_cpus=1, num_gpus=1)
        after = pool.evaluate(KERNELS / "good_gemm")
    finally:
        if pool is not None:
            pool.close()
        ray.shutdown()
        cluster.shutdown()
    assert (crashed.status, crashed.rule) == ("crash", "crash"), crashed.message
    assert f"node {lost_id}" in crashed.message and "was lost" in crashed.message, crashed.message
    assert crashed.node.endswith(f"(node {lost_id})") and crashed.worker == "gpu 0"
    assert after.status == "correct", after.message
    assert lost_id not in after.node
