"""A Ray cluster of two nodes on one machine (`ray start --head`, then `ray start --address`),
as a user spreads verification over machines: the pool's two actors land on the two nodes
(SPREAD), batches travel one round trip each, and the verdicts equal the process pool's.

The nodes are started with --block in their own process group and ended by signalling that
group, so no other Ray cluster on the machine is touched; the head's note of the "current
cluster" is put back as it was (a later `ray.init()` would try to join the dead cluster). The pool runs in a subprocess, which
joins the cluster by address (a pytest process may already hold a local Ray of its own)."""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420),
              pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the `ray` extra is not installed")]

SCRIPT = """
import json, sys
import verifiers
from verifiers import Call
calls = [Call("math", f"We add {a} and {b}. The answer is \\\\boxed{{{a + b + (i % 3 == 0)}}}.", str(a + b), {"timeout": 60})
         for i, (a, b) in enumerate((k, 3 * k + 1) for k in range(300))]
calls += [Call("exact", "abc", "abc", {}), Call("exact", "x", "y", {}), Call("math", "7", None, {})]
with verifiers.VerifierPool(num_workers=2, cache_size=0) as local:
    want = [(v.status.value, v.score, v.detail) for v in local.run(calls)]
pool = verifiers.VerifierPool(num_workers=2, cache_size=0, backend="ray", ray_address=sys.argv[1])
try:
    got = [(v.status.value, v.score, v.detail) for v in pool.run(calls)]
    import ray
    nodes = sorted(ray.get(w.actor.node.remote()) for w in pool._workers)
    alive = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
finally:
    pool.close()
print(json.dumps({"same": got == want, "n": len(got), "actor_nodes": nodes, "cluster_nodes": sorted(alive),
                  "replaced": pool.workers_replaced}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_node_cluster_verdicts_equal_the_process_pool(root):
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    # token authentication (Ray's default) would need the token on every node: off for a cluster of one machine
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    common = ["--num-cpus=1", "--block", "--disable-usage-stats"]
    current = "/tmp/ray/ray_current_cluster"
    before = open(current).read() if os.path.exists(current) else None
    head = subprocess.Popen([ray_bin, "start", "--head", f"--port={port}", "--include-dashboard=false", *common], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    nodes = [head]
    try:
        time.sleep(8)
        nodes.append(subprocess.Popen([ray_bin, "start", f"--address={address}", *common], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        time.sleep(8)
        out = subprocess.run([sys.executable, "-c", SCRIPT, address], env=env, capture_output=True, text=True,
                             timeout=300, cwd=str(root))
        assert out.returncode == 0, out.stderr[-3000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        for p in reversed(nodes):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                    p.wait(timeout=20)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
        if os.path.exists(current) and open(current).read().strip().endswith(f":{port}"):
            if before is None:
                os.remove(current)
            else:
                with open(current, "w") as f:
                    f.write(before)
    assert got["same"] and got["n"] == 303 and got["replaced"] == 0
    assert len(got["cluster_nodes"]) == 2 and got["actor_nodes"] == got["cluster_nodes"]  # one actor per node
