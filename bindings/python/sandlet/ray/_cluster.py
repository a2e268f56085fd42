"""The cluster-wide client: node actors on every node that advertises sandbox capacity, placement,
routing of calls to the owning node, and label operations across the cluster (docs/RAY.md)."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import sandlet

from ._node import NodeInfo, Outcome, SandletNode, sandbox_memory

NAMESPACE = "sandlet"
CAPACITY_RESOURCE = "sandlet"                # per node: how many sandboxes it takes
MEMORY_RESOURCE = "sandlet_memory_mb"        # per node (optional): the memory budget placement counts

_NodeActor = ray.remote(SandletNode)


def node_actor_name(node_id: str) -> str:
    return f"sandlet-node-{node_id}"


def _actor(name: str) -> Any:
    return ray.get_actor(name, namespace=NAMESPACE)


def _start(name: str, method: str, *args: Any) -> Any:
    try:
        return getattr(_actor(name), method).remote(*args)
    except ValueError as e:  # no such actor
        raise sandlet.Unavailable(f"sandlet node {name}: {e}", 14) from None


def _result(name: str, ref: Any) -> Any:
    """A node actor call's result. The node's own errors come back as the sandlet errors they are; a node actor
    that died during the call is Unavailable (the call may or may not have run; Ray restarts the actor and
    later calls wait for it)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, sandlet.Error):
            raise e.cause from None
        raise
    except ray.exceptions.RayActorError as e:
        raise sandlet.Unavailable(f"sandlet node {name}: {e}", 14) from None


def _call(name: str, method: str, *args: Any) -> Any:
    """One call on a node actor (errors as _result gives them)."""
    return _result(name, _start(name, method, *args))


class ClusterSandbox:
    """A sandbox on some node of the cluster: picklable (its node's actor name and its id), so it can be
    handed to any Ray task or actor, which then routes its calls to that node."""

    def __init__(self, node: str, sandbox_id: str) -> None:
        self.node = node
        self.id = sandbox_id

    def __repr__(self) -> str:
        return f"<sandlet.ray.ClusterSandbox {self.id} on {self.node}>"

    def __reduce__(self) -> Tuple[Any, ...]:
        return (ClusterSandbox, (self.node, self.id))

    def exec(self, cmd: Union[str, Sequence[str]], *, check: bool = False, **kwargs: Any) -> Outcome:
        """Runs a command on the owning node (Sandbox.exec's keyword arguments)."""
        r = _call(self.node, "exec", self.id, cmd if isinstance(cmd, str) else list(cmd), kwargs)
        return r.check() if check else r

    def write_file(self, path: str, data: Union[bytes, str], mode: int = 0o644) -> None:
        _call(self.node, "write_file", self.id, path, data.encode() if isinstance(data, str) else bytes(data), mode)

    def read_file(self, path: str, max_bytes: int = 0) -> bytes:
        return _call(self.node, "read_file", self.id, path, max_bytes)

    def info(self) -> Dict[str, Any]:
        return _call(self.node, "sandbox_info", self.id)

    def destroy(self) -> None:
        _call(self.node, "destroy", self.id)


class Cluster:
    """sandlet across a Ray cluster. Works from a driver, a task or an actor (ray.init first, or inside Ray).

    Every alive node whose Ray resources include ``sandlet`` (its sandbox capacity, e.g. ``ray start
    --resources '{"sandlet": 64}'``) gets one node actor, named, detached and restarted by Ray when it dies;
    its runtime root is that node's ``$SANDLET_ROOT`` (default /var/lib/sandlet)."""

    def __init__(self, *, retry_s: float = 30) -> None:
        if not ray.is_initialized():
            raise sandlet.FailedPrecondition("sandlet.ray: call ray.init() first (or use it inside a Ray task)", 9)
        self.retry_s = retry_s
        self._nodes: List[str] = self._ensure_node_actors()

    def _ensure_node_actors(self) -> List[str]:
        names = []
        for node in ray.nodes():
            resources = node.get("Resources", {})
            if not node.get("Alive") or resources.get(CAPACITY_RESOURCE, 0) < 1:
                continue
            node_id = node["NodeID"]
            name = node_actor_name(node_id)
            _NodeActor.options(
                name=name, namespace=NAMESPACE, lifetime="detached", get_if_exists=True, max_restarts=-1,
                num_cpus=0, max_concurrency=64,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            ).remote(name, node_id, int(resources[CAPACITY_RESOURCE]), float(resources.get(MEMORY_RESOURCE, 0)),
                     dict(node.get("Labels") or {}))
            names.append(name)
        if not names:
            raise sandlet.Unavailable(f"sandlet.ray: no alive Ray node advertises the '{CAPACITY_RESOURCE}' resource "
                                      "(start nodes with --resources '{\"sandlet\": N}')", 14)
        return names

    # ---- nodes and placement -----------------------------------------------------------------------------

    def nodes(self) -> List[NodeInfo]:
        """What each node reports (a node whose actor does not answer within retry_s is left out)."""
        refs = {name: _actor(name).info.remote() for name in self._nodes}
        out = []
        for name, ref in refs.items():
            try:
                out.append(ray.get(ref, timeout=self.retry_s))
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                pass
        return out

    def _candidates(self, memory: int, node_labels: Mapping[str, str]) -> List[NodeInfo]:
        """Nodes that fit, best first: most free sandbox slots, then most free memory (spreads the load)."""
        fitting = [n for n in self.nodes() if all(n.labels.get(k) == v for k, v in node_labels.items())]
        if not fitting:
            raise sandlet.Unavailable(f"sandlet.ray: no node carries the labels {dict(node_labels)}", 14)
        roomy = [n for n in fitting if n.room_for(memory)]
        if not roomy:
            raise sandlet.Unavailable(
                f"sandlet.ray: no node has room for a sandbox of {memory >> 20} MiB: " +
                ", ".join(f"{n.name[-8:]}: {n.count}/{n.capacity} sandboxes, "
                          f"{n.memory_used >> 20}/{n.memory_budget >> 20} MiB" for n in fitting), 14)
        return sorted(roomy, key=lambda n: (n.capacity - n.count, n.memory_budget - n.memory_used), reverse=True)

    def create(self, spec: Optional[Mapping[str, Any]] = None, *, node_labels: Optional[Mapping[str, str]] = None,
               wait_s: float = 0, **fields: Any) -> ClusterSandbox:
        """Creates a sandbox on a node with room: fewer sandboxes than its capacity and its memory budget not
        exceeded by the spec's ``limits.memory`` (512 MiB counted when unset); ``node_labels`` restricts it
        to Ray nodes carrying those labels. Fields are Runtime.create's (``layers``, ``environment``,
        ``labels``, ``limits``, ...); every cluster sandbox is detached with a max lifetime (6 h unless given).
        With no room: Unavailable at once, or after ``wait_s`` seconds of retrying."""
        merged: Dict[str, Any] = {**dict(spec or {}), **fields}
        memory = sandbox_memory(merged)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                last: Optional[Exception] = None
                for node in self._candidates(memory, node_labels or {}):
                    try:
                        return ClusterSandbox(node.name, _call(node.name, "create", merged))
                    except sandlet.Unavailable as e:  # filled up since it reported (or its actor is down)
                        last = e
                raise last or sandlet.Unavailable("sandlet.ray: no node took the sandbox", 14)
            except sandlet.Unavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    # ---- finding sandboxes ---------------------------------------------------------------------------------

    def _each(self, method: str, *args: Any) -> Dict[str, Any]:
        """The same call on every node at once; errors as _call gives them."""
        refs = {name: _start(name, method, *args) for name in self._nodes}
        return {name: _result(name, ref) for name, ref in refs.items()}

    def get(self, sandbox_id: str) -> ClusterSandbox:
        for name, found in self._each("ids", [sandbox_id]).items():
            if found:
                return ClusterSandbox(name, sandbox_id)
        raise sandlet.NotFound(f"sandlet.ray: no node has sandbox {sandbox_id}", 5)

    def list(self, labels: Optional[Mapping[str, str]] = None) -> List[ClusterSandbox]:
        """Every sandbox of the cluster carrying all of ``labels`` (a restarted driver finds its job's so)."""
        return [ClusterSandbox(name, row["id"]) for name, rows in self._each("list", dict(labels or {})).items()
                for row in rows]

    def pause(self, labels: Mapping[str, str]) -> Dict[str, Any]:
        """Freezes every sandbox carrying all of ``labels``, on every node. Per node: Runtime.pause's result."""
        return self._each("pause", dict(labels))

    def resume(self, labels: Mapping[str, str]) -> Dict[str, Any]:
        return self._each("resume", dict(labels))

    def destroy(self, labels: Mapping[str, str]) -> List[str]:
        """Destroys every sandbox carrying all of ``labels``; returns their ids."""
        if not labels:
            raise sandlet.InvalidArgument("labels: destroying every sandbox of the cluster needs explicit labels", 3)
        return [i for ids in self._each("destroy_matching", dict(labels)).values() for i in ids]

    def shutdown_nodes(self) -> None:
        """Closes every node actor's runtime and kills the actors (their sandboxes stay; a later Cluster()
        starts new actors, which reattach)."""
        for name in self._nodes:
            try:
                actor = _actor(name)
                ray.get(actor.shutdown.remote())
                ray.kill(actor, no_restart=True)
            except (ValueError, ray.exceptions.RayActorError):
                pass
