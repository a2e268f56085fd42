"""The node actor: one per Ray node, owning that node's sandlet runtime (docs/RAY.md).

Its sandboxes are detached, so they outlive the actor's process: Ray restarts a killed node actor
(max_restarts=-1) and the new process reattaches to each sandbox by id on first use. Methods run in a
thread pool (the library releases the GIL), so one node serves many callers at once."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import sandlet

DEFAULT_ROOT = "/var/lib/sandlet"
DEFAULT_MEMORY = 512 << 20  # what placement counts for a sandbox without a memory limit
DEFAULT_MAX_LIFETIME_S = 6 * 3600  # every cluster sandbox has one: a lost driver never leaves zombies
LABEL_CREATED_BY = "sandlet.ray/node"


@dataclass
class Outcome:
    """An exec's result as it crosses Ray (the binding's ExecResult is not picklable): the same fields."""
    exit_code: int
    signal: int
    timed_out: bool
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ns: int = 0

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode(errors="replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode(errors="replace")

    def check(self) -> "Outcome":
        if self.timed_out or self.signal or self.exit_code != 0:
            raise sandlet.CommandFailed(f"command failed: exit code {self.exit_code}, signal {self.signal}, "
                                        f"timed out {self.timed_out}; stderr: {self.stderr_text[-500:]}", 2)
        return self


@dataclass
class NodeInfo:
    """What placement reads of a node."""
    name: str                 # the actor's name: "sandlet-node-<ray node id>"
    node_id: str
    root: str
    capacity: int             # the node's "sandlet" Ray resource: how many sandboxes it takes
    count: int                # sandboxes under its root now
    memory_budget: int        # bytes; the node's "sandlet_memory_mb" resource, else its MemAvailable at start
    memory_used: int          # the memory limits of its sandboxes (DEFAULT_MEMORY for one without)
    labels: Dict[str, str] = field(default_factory=dict)  # the Ray node's labels

    def room_for(self, memory: int) -> bool:
        return self.count < self.capacity and self.memory_used + memory <= self.memory_budget


def sandbox_memory(spec: Mapping[str, Any]) -> int:
    limits = spec.get("limits") or {}
    mem = limits.get("memory")
    if isinstance(mem, (int, float)) and mem > 0:
        return int(mem)
    if isinstance(mem, str) and mem:
        units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
        text = mem.strip().lower().rstrip("ib").rstrip("b")
        try:
            if text and text[-1] in units:
                return int(float(text[:-1]) * units[text[-1]])
            return int(float(text))
        except ValueError:
            # Placement reads the size before the node's runtime checks the spec: the same error it would give.
            raise sandlet.InvalidArgument(f"invalid spec field 'limits.memory': expected a size like \"512M\", "
                                          f"\"1.5G\" or \"100\" (bytes), got {mem!r}", 3) from None
    return DEFAULT_MEMORY


def _mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _outcome(r: Any) -> Outcome:
    return Outcome(r.exit_code, r.signal, r.timed_out, bytes(r.stdout), bytes(r.stderr), r.stdout_truncated,
                   r.stderr_truncated, r.duration_ns)


class SandletNode:
    """The node actor's class (made a Ray actor by sandlet.ray.cluster; not used directly)."""

    def __init__(self, name: str, node_id: str, capacity: int, memory_budget_mb: float,
                 labels: Dict[str, str]) -> None:
        self.root = os.environ.get("SANDLET_ROOT") or DEFAULT_ROOT
        self.rt = sandlet.Runtime(self.root)
        self.name, self.node_id, self.capacity, self.labels = name, node_id, capacity, dict(labels)
        self.memory_budget = int(memory_budget_mb * (1 << 20)) if memory_budget_mb else _mem_available()
        self._handles: Dict[str, sandlet.Sandbox] = {}
        self._mu = threading.Lock()
        self._create_mu = threading.Lock()  # one admission decision at a time (creates themselves are quick)

    # ---- placement ---------------------------------------------------------------------------------------

    def info(self) -> NodeInfo:
        rows = self.rt.list()
        used = sum(sandbox_memory(r.get("spec", {})) for r in rows)
        return NodeInfo(self.name, self.node_id, self.root, self.capacity, len(rows), self.memory_budget, used,
                        self.labels)

    def ping(self) -> int:
        return os.getpid()

    # ---- sandboxes -----------------------------------------------------------------------------------------

    def create(self, spec: Dict[str, Any]) -> str:
        """Creates a detached sandbox, if this node still has room for it (clients place concurrently: the
        node has the last word, under its lock; Unavailable lets the client try another node)."""
        memory = sandbox_memory(spec)
        with self._create_mu:
            node = self.info()
            if not node.room_for(memory):
                raise sandlet.Unavailable(f"sandlet node {self.name}: full ({node.count}/{node.capacity} sandboxes, "
                                          f"{node.memory_used >> 20}/{node.memory_budget >> 20} MiB)", 14)
            return self._create(spec)

    def _create(self, spec: Dict[str, Any]) -> str:
        fields = dict(spec)
        fields["lifetime"] = "detached"  # survives this actor's process: a restarted actor reattaches
        fields.setdefault("max_lifetime_s", DEFAULT_MAX_LIFETIME_S)
        fields["labels"] = {**(fields.get("labels") or {}), LABEL_CREATED_BY: self.node_id[:16]}
        sb = self.rt.create(**fields)
        with self._mu:
            self._handles[sb.id] = sb
        return sb.id

    def _sandbox(self, sandbox_id: str) -> sandlet.Sandbox:
        with self._mu:
            sb = self._handles.get(sandbox_id)
        if sb is None or sb.closed:
            sb = self.rt.attach(sandbox_id)  # NotFound names it when it is not on this node
            with self._mu:
                self._handles[sandbox_id] = sb
        return sb

    def has(self, sandbox_id: str) -> bool:
        return any(r["id"] == sandbox_id for r in self.rt.list())

    def exec(self, sandbox_id: str, cmd: Any, kwargs: Dict[str, Any]) -> Outcome:
        return _outcome(self._sandbox(sandbox_id).exec(cmd, **kwargs))

    def write_file(self, sandbox_id: str, path: str, data: bytes, mode: int) -> None:
        self._sandbox(sandbox_id).write_file(path, data, mode)

    def read_file(self, sandbox_id: str, path: str, max_bytes: int) -> bytes:
        return self._sandbox(sandbox_id).read_file(path, max_bytes)

    def sandbox_info(self, sandbox_id: str) -> Dict[str, Any]:
        return self._sandbox(sandbox_id).info()

    def destroy(self, sandbox_id: str) -> None:
        sb = self._sandbox(sandbox_id)
        sb.destroy()
        sb.close()
        with self._mu:
            self._handles.pop(sandbox_id, None)

    # ---- by label ------------------------------------------------------------------------------------------

    def list(self, labels: Mapping[str, str]) -> List[Dict[str, Any]]:
        return [{"id": r["id"], "labels": r.get("spec", {}).get("labels", {}), "state": r.get("state"),
                 "node": self.name} for r in self.rt.list(labels=dict(labels))]

    def pause(self, labels: Mapping[str, str]) -> Dict[str, Any]:
        return self.rt.pause(dict(labels))

    def resume(self, labels: Mapping[str, str]) -> Dict[str, Any]:
        return self.rt.resume(dict(labels))

    def destroy_matching(self, labels: Mapping[str, str]) -> List[str]:
        gone = []
        for row in self.list(labels):
            try:
                self.destroy(row["id"])
                gone.append(row["id"])
            except sandlet.NotFound:
                pass
        return gone

    def ids(self, sandbox_ids: Sequence[str]) -> List[str]:
        """Which of these ids live on this node."""
        mine = {r["id"] for r in self.rt.list()}
        return [i for i in sandbox_ids if i in mine]

    def shutdown(self) -> None:
        """Closes the runtime (its detached sandboxes stay) before the actor is killed on purpose."""
        with self._mu:
            for sb in self._handles.values():
                sb.close()
            self._handles.clear()
        self.rt.close()
