"""A Ray cluster of several nodes on this host for the tests: ray.cluster_utils.Cluster in a process of its own.

Every node listens on 127.0.0.1 (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which Ray reads at import: hence the process of
its own) with its own temp dir; the head's GCS port is a free one of tests.ports. A test kills a node for good with
``kill(i)`` (SIGKILL of its raylet and every process it started, as a lost machine) and stops the rest by pid with
``stop()``; nothing here runs ``ray stop``, which would end every Ray process on the machine.

Run as ``python -m tests.cluster NODES CPUS TEMP_DIR``: answers with {address, nodes: [node_id, ...]} in JSON, then
takes ``kill I``, ``add``, ``actors NAMESPACE`` and ``stop`` on stdin and answers each; an answer is a line starting with
ANSWER (Ray prints other lines there).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# Ray's health checks of each node every second, 3 missed: a killed node is known dead in about 5 s (defaults: 30 s)
FAST_NODE_DEATH = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_health_check_timeout_ms": "1000",
}
ANSWER = "tests.cluster: "  # the start of each line the cluster process answers with
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}


class LocalCluster:
    """``nodes`` nodes of ``cpus`` CPUs each (node 0 is the head); ``env`` reaches every node's processes (a storage
    server's credentials, say)."""

    def __init__(self, log_dir: Path, nodes: int, cpus: int = 1, env: dict[str, str] | None = None) -> None:
        self.log = log_dir / "cluster.log"
        self.temp_dir = Path(tempfile.mkdtemp(prefix="gs-ray-"))  # short: Ray's socket paths must fit 107 bytes
        full = {**os.environ, **LOOPBACK, **FAST_NODE_DEATH, **(env or {})}
        cmd = [sys.executable, "-m", "tests.cluster", str(nodes), str(cpus), str(self.temp_dir)]
        root = Path(__file__).resolve().parent.parent
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=full,
                cwd=root,
                text=True,
                start_new_session=True,
            )
        started = json.loads(self._answer())
        self.address, self.node_ids = started["address"], started["nodes"]

    def _ask(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self._answer()

    def _answer(self) -> str:
        """The next line the cluster process answers (its Ray driver prints other lines on stdout too)."""
        while True:
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            assert line, f"the cluster process ended: {self.log.read_text()[-3000:]}"
            if line.startswith(ANSWER):
                return line[len(ANSWER) :].strip()

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (not the head): its raylet and every process it started, as a machine lost."""
        assert self._ask(f"kill {index}") == f"killed {index}"

    def add(self) -> str:
        """Start one more node of the same shape (a lost machine back, or a new one); returns its node id."""
        node_id = self._ask("add")
        self.node_ids.append(node_id)
        return node_id

    def named_actors(self, namespace: str) -> list[str]:
        """The names of the live named actors of ``namespace`` (a controller's detached workers)."""
        return json.loads(self._ask(f"actors {namespace}"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self._ask("stop")
                self.proc.wait(timeout=60)
            except (OSError, AssertionError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _serve(nodes: int, cpus: int, temp_dir: Path) -> None:
    from ray.cluster_utils import Cluster

    from tests.ports import free_port

    head = {"num_cpus": cpus, "temp_dir": str(temp_dir / "node-0"), "include_dashboard": False, "gcs_server_port": free_port()}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    members = [cluster.head_node] + [
        cluster.add_node(num_cpus=cpus, temp_dir=str(temp_dir / f"node-{i}")) for i in range(1, nodes)
    ]
    print(ANSWER + json.dumps({"address": cluster.address, "nodes": [n.node_id for n in members]}), flush=True)
    for line in sys.stdin:
        verb, *args = line.split()
        if verb == "kill":
            cluster.remove_node(members[int(args[0])], allow_graceful=False)  # SIGKILL, not a drain
            print(f"{ANSWER}killed {args[0]}", flush=True)
        elif verb == "add":
            members.append(cluster.add_node(num_cpus=cpus, temp_dir=str(temp_dir / f"node-{len(members)}")))
            print(ANSWER + members[-1].node_id, flush=True)
        elif verb == "actors":
            import ray

            if not ray.is_initialized():
                ray.init(address=cluster.address, log_to_driver=False)
            names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == args[0]]
            print(ANSWER + json.dumps(names), flush=True)
        elif verb == "stop":
            import ray

            ray.shutdown()  # the driver of ``actors`` first: Cluster refuses to remove the node a driver is on
            cluster.shutdown()
            print(f"{ANSWER}stopped", flush=True)
            return


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
