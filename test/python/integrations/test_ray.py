"""sandlet.ray on a local multi-node Ray cluster (Ray's own cluster utilities: a head without sandbox capacity
and two nodes of capacity 4 each, in zones a and b, each with its own runtime root): placement by room and by
node labels, calls routed to the owning node from the driver, a task and an actor, label operations across
the cluster, a node actor killed mid-run (its sandboxes survive and are reattached), and a driver killed and
restarted (the new one finds its job's sandboxes by label). All traffic stays on loopback."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Iterator, List

import pytest

# A cluster on one machine: every Ray process on loopback (else Ray advertises the host's address). Read by
# Ray at import; inherited by its processes.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import ray  # noqa: E402  (scripts/setup.sh installs it into the venv)
from ray.cluster_utils import Cluster as RayCluster  # noqa: E402

import sandlet  # noqa: E402
import sandlet.ray as sray  # noqa: E402
from conftest import REPO, mounts_under, python_env  # noqa: E402

NODE_MEMORY_MB = 1024


class LocalCluster:
    def __init__(self) -> None:
        self.base = tempfile.mkdtemp(prefix="sandlet-ray-")  # short: Ray's socket paths live under it
        self.saved_tmpdir = os.environ.get("RAY_TMPDIR")
        os.environ["RAY_TMPDIR"] = self.base  # Ray's files (else under /tmp/ray), its processes' too
        self.roots: List[str] = []
        common = {"node_ip_address": "127.0.0.1", "temp_dir": os.path.join(self.base, "ray")}
        # What docs/RAY.md asks of every node: Ray must not kill a dead node actor's child processes (its
        # detached sandboxes' inits) when Ray restarts it.
        system = {"kill_child_processes_on_worker_exit": False,
                  "kill_child_processes_on_worker_exit_with_raylet_subreaper": False}
        self.ray = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": system, **common})
        for i, zone in enumerate(["a", "b"]):
            root = os.path.join(self.base, f"node-{zone}")
            self.roots.append(root)
            self.ray.add_node(num_cpus=1, resources={"sandlet": 4, "sandlet_memory_mb": NODE_MEMORY_MB},
                              labels={"zone": zone}, env_vars={"SANDLET_ROOT": root}, **common)
        ray.init(address=self.ray.address, namespace="sandlet-tests", log_to_driver=False)

    def close(self) -> None:
        try:
            try:
                cluster = sray.Cluster()
                for sb in cluster.list():
                    sb.destroy()
                cluster.shutdown_nodes()
            finally:
                ray.shutdown()
                self.ray.shutdown()
            for root in self.roots:  # what the node actors' runtimes left (nothing, if all went well)
                if os.path.isdir(root):
                    with sandlet.Runtime(root, warm_pool=False) as rt:
                        left = rt.list()
                        rt.gc()
                    assert left == [] and mounts_under(root) == []
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
            if self.saved_tmpdir is None:
                os.environ.pop("RAY_TMPDIR", None)
            else:
                os.environ["RAY_TMPDIR"] = self.saved_tmpdir


@pytest.fixture(scope="module")
def registry(rootfs: str) -> Iterator[str]:
    """A real registry on loopback holding one image (test/support/registry_world.py); the nodes' runtimes
    reach it through $SANDLET_REGISTRIES, which Ray's processes inherit. Yields the image's reference."""
    sys.path.insert(0, os.path.join(REPO, "test", "support"))
    from registry_world import Registry, write_oci_layout
    layouts = tempfile.mkdtemp(prefix="sandlet-ray-layout.")
    saved = os.environ.get("SANDLET_REGISTRIES")
    with Registry.mode("http") as reg:
        reg.push(write_oci_layout(layouts, [rootfs, {"etc/task": "from-the-registry\n"}]), "rl/task", "1")
        os.environ["SANDLET_REGISTRIES"] = f'{{"insecure": ["{reg.host}"]}}'
        try:
            yield reg.ref("rl/task", "1")
        finally:
            if saved is None:
                os.environ.pop("SANDLET_REGISTRIES", None)
            else:
                os.environ["SANDLET_REGISTRIES"] = saved
            shutil.rmtree(layouts, ignore_errors=True)


@pytest.fixture(scope="module")
def local_cluster(registry: str) -> Iterator[LocalCluster]:
    c = LocalCluster()
    try:
        yield c
    finally:
        c.close()


def test_registry_image_sandboxes_are_placed_on_both_nodes(local_cluster: LocalCluster, registry: str) -> None:
    """Each node's runtime pulls the image the spec names on its first use there, no environment made by hand."""
    cluster = sray.Cluster()
    boxes = [cluster.create(environment=registry, node_labels={"zone": z}, labels={"job": "registry"})
             for z in ("a", "b")]
    assert sorted(b.node for b in boxes) == sorted(n.name for n in cluster.nodes())
    assert [b.exec("cat /etc/task").stdout_text for b in boxes] == ["from-the-registry\n"] * 2
    assert sorted(cluster.destroy({"job": "registry"})) == sorted(b.id for b in boxes)


def node_of_zone(cluster: sray.Cluster, zone: str) -> str:
    return next(n.name for n in cluster.nodes() if n.labels.get("zone") == zone)


def test_placement_routing_and_labels_across_nodes(local_cluster: LocalCluster, rootfs: str) -> None:
    cluster = sray.Cluster()
    assert sorted(n.labels["zone"] for n in cluster.nodes()) == ["a", "b"]  # the head advertises no capacity
    assert sorted(n.root for n in cluster.nodes()) == sorted(local_cluster.roots)
    boxes = [cluster.create(layers=[rootfs], labels={"job": "place"}, limits={"memory": "256M"}) for _ in range(4)]
    assert sorted(sum(1 for b in boxes if b.node == n.name) for n in cluster.nodes()) == [2, 2]  # spread
    zone_b = cluster.create(layers=[rootfs], labels={"job": "place"}, node_labels={"zone": "b"})
    assert zone_b.node == node_of_zone(cluster, "b")
    # Memory budget: 1 GiB a node, 2 x 256 MiB + 512 MiB (the default) on b; 2 x 256 MiB on a.
    with pytest.raises(sandlet.Unavailable, match="no node has room"):
        cluster.create(layers=[rootfs], limits={"memory": "768M"})
    with pytest.raises(sandlet.Unavailable, match="labels"):
        cluster.create(layers=[rootfs], node_labels={"zone": "c"})
    with pytest.raises(sandlet.InvalidArgument, match="limits.memory"):
        cluster.create(layers=[rootfs], limits={"memory": "lots"})

    # Calls go to the owning node, from the driver, a task and an actor (handles are picklable).
    boxes[0].write_file("/tmp/who", "first\n")
    assert boxes[0].read_file("/tmp/who") == b"first\n"
    assert boxes[0].exec("cat /tmp/who").stdout_text == "first\n"

    @ray.remote(num_cpus=0)
    def in_task(sb: sray.ClusterSandbox) -> str:
        return sb.exec(["sh", "-c", "echo task; cat /tmp/who 2>/dev/null || true"]).stdout_text

    @ray.remote(num_cpus=0)
    class Agent:
        def step(self, sb: sray.ClusterSandbox) -> int:
            return sb.exec("exit 7").exit_code

    assert ray.get([in_task.remote(b) for b in boxes[:2]]) == ["task\nfirst\n", "task\n"]
    assert ray.get(Agent.remote().step.remote(boxes[1])) == 7
    assert cluster.get(boxes[3].id).node == boxes[3].node

    # Label operations span the cluster.
    assert len(cluster.list({"job": "place"})) == 5
    paused = cluster.pause({"job": "place"})
    assert sum(r["paused"] for r in paused.values()) == 5
    assert all(b.info()["state"] == "paused" for b in boxes)
    assert boxes[2].exec("echo resumed-on-demand").stdout_text == "resumed-on-demand\n"  # transparent resume
    assert sum(r["resumed"] for r in cluster.resume({"job": "place"}).values()) == 4
    assert sorted(cluster.destroy({"job": "place"})) == sorted([b.id for b in boxes] + [zone_b.id])
    with pytest.raises(sandlet.InvalidArgument, match="selector"):  # a node's error, as the node raised it
        cluster.pause({"": "x"})
    assert cluster.list({"job": "place"}) == []


def test_a_killed_node_actor_is_restarted_and_reattaches(local_cluster: LocalCluster, rootfs: str) -> None:
    cluster = sray.Cluster()
    sb = cluster.create(layers=[rootfs], labels={"job": "restart"}, node_labels={"zone": "a"})
    sb.write_file("/tmp/state", "kept\n")
    sb.exec("sleep 1000 >/dev/null 2>&1 &", keep_background=True)

    @ray.remote(num_cpus=0)
    def long_step(s: sray.ClusterSandbox) -> int:
        return s.exec("sleep 30").exit_code

    running = long_step.remote(sb)
    time.sleep(1.0)  # the step is running on the node actor
    actor = ray.get_actor(sb.node, namespace=sray.NAMESPACE)
    old_pid = ray.get(actor.ping.remote())
    ray.kill(actor, no_restart=False)  # the process dies; Ray starts it again
    with pytest.raises(sandlet.Unavailable):
        ray.get(running)  # that step's call was lost with the process (it ran in the actor)
    # The restarted actor opens the same root and reattaches: the sandbox and what it ran are still there.
    assert sb.exec("cat /tmp/state; pidof sleep >/dev/null && echo sleeper-alive").stdout_text == "kept\nsleeper-alive\n"
    assert ray.get(ray.get_actor(sb.node, namespace=sray.NAMESPACE).ping.remote()) != old_pid
    sb.destroy()


DRIVER = """
import sys, time, ray, sandlet.ray as sray
ray.init(address=sys.argv[1], log_to_driver=False)
cluster = sray.Cluster()
for i in range(2):
    sb = cluster.create(layers=[sys.argv[2]], labels={"job": "trainer-7"})
    sb.write_file("/tmp/episode", f"step {i}\\n")
print("ready", flush=True)
time.sleep(600)
"""


def test_a_restarted_driver_finds_its_jobs_sandboxes_by_label(local_cluster: LocalCluster, rootfs: str) -> None:
    p = subprocess.Popen([sys.executable, "-c", DRIVER, local_cluster.ray.address, rootfs], stdout=subprocess.PIPE,
                         env=python_env(), text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    finally:
        p.send_signal(signal.SIGKILL)  # the trainer dies without cleaning up
        p.wait()
    cluster = sray.Cluster()  # "the restarted driver"
    found = cluster.list({"job": "trainer-7"})
    assert len(found) == 2
    assert sorted(sb.read_file("/tmp/episode") for sb in found) == [b"step 0\n", b"step 1\n"]
    assert all(sb.exec("true").exit_code == 0 for sb in found)
    assert len(cluster.destroy({"job": "trainer-7"})) == 2


def test_the_ray_trainer_example_runs_across_the_cluster(local_cluster: LocalCluster, rootfs: str) -> None:
    example = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "python", "ray_trainer.py")
    p = subprocess.run([sys.executable, example, "--address", local_cluster.ray.address, "--layer", rootfs,
                        "--episodes", "6", "--iterations", "4"], env=python_env(), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    print(p.stdout)  # what README shows
    lines = p.stdout.splitlines()
    assert lines[0].startswith("sandboxes per node:") and lines[0].count(":") == 3  # both nodes used
    final = float(lines[-1].rsplit(" ", 1)[1])
    assert len(lines) == 5 and final > 1 / 3, p.stdout  # the policy moved towards the passing fix
    assert sray.Cluster().list({"job": "ray-trainer"}) == []
