"""What operators of a node do with a Runtime besides making sandboxes: counters and metrics, pause and
resume by label, the FnCall pools, node admission, and the logs kept of sandboxes past their end. A base of
``Runtime`` (``_sync.py``); the methods use only its native handle ``_h``."""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import _sandlet
from ._common import SpecLike, build_spec
from ._errors import InvalidArgument


class RuntimeOperations:
    _h: _sandlet.Runtime

    def stats(self) -> Dict[str, Any]:
        """Counters of this runtime: {"warm_pool": {"hits", "misses", "ready", ...}} (see sandlet.h)."""
        return json.loads(self._h.stats_json())

    def metrics(self) -> str:
        """Platform metrics, Prometheus text 0.0.4 (docs/METRICS.md); ``metrics_json``: the same as dicts."""
        return self._h.metrics_text()

    def metrics_json(self) -> Dict[str, Any]:
        return json.loads(self._h.metrics_json())

    def pause(self, labels: Mapping[str, str]) -> Dict[str, Any]:
        """Freezes every sandbox of the root (any process's) carrying all of ``labels``, in parallel.
        Returns {"matched", "paused", "already", "failed": [{"id", "error"}], "reclaimed_bytes", "elapsed_ns"}."""
        return json.loads(self._h.pause_jobs(_selector(labels), True))

    def resume(self, labels: Mapping[str, str]) -> Dict[str, Any]:
        """Lets every paused sandbox carrying all of ``labels`` run on (result as pause, "resumed" counted)."""
        return json.loads(self._h.pause_jobs(_selector(labels), False))

    def set_call_pool(self, spec: SpecLike = None, *, min_idle: int = 0, max_size: int = 8, reuse: str = "reset",
                      freeze_after_s: float = 30, destroy_frozen_after_s: float = 300, **fields: Any) -> None:
        """Settings of the pool behind ``call`` for this spec (given as to ``call``: the same spec, the same
        pool; docs/FNCALL.md): containers at most and kept idle, ``reuse`` "reset" (reuse one a call left
        clean) or "replace" (never), when idle ones freeze and when frozen ones go."""
        s, _ = build_spec(spec, fields)
        self._h.set_call_pool(s, min_idle, max_size, reuse, float(freeze_after_s), float(destroy_frozen_after_s))

    def call_stats(self) -> Dict[str, Any]:
        """Per pool behind ``call``: {"pools": [{"idle", "frozen", "in_use", "created", "reused",
        "discarded_dirty", "handover_p50_us", ...}]} (sandlet_fncall.h)."""
        return json.loads(self._h.call_stats_json())

    def set_admission(self, *, max_sandboxes: int = 0, max_memory: int = 0, max_pids: int = 0,
                      max_cpus: float = 0, max_initializing: int = 0, timeout_s: float = 30,
                      max_queue: int = 1024) -> None:
        """Node admission for this runtime's later creates (sandlet_metrics.h): a budget shared by every
        process on the root — sandboxes, the sum of specs' memory (bytes), pids and cpus limits, creates under
        way; 0 = unbounded, all 0 = off. A create that does not fit waits (spec label "sandlet/priority" =
        "latency" first) up to ``timeout_s``, then raises Unavailable naming the resource."""
        self._h.set_admission(max_sandboxes, max_memory, max_pids, float(max_cpus), max_initializing,
                              float(timeout_s), max_queue)

    def logs(self, sandbox_id: str) -> Dict[str, Any]:
        """What is kept of a sandbox for debugging: a live one, or one that expired under
        ``on_expiry="keep_logs"`` (state "expired", with reason, ended_at, keep_until). "last_output": its
        last 16 execs (argv, exit status, the last 4000 bytes of stdout and stderr; on_expiry keep_logs or
        keep); "audit": its last 64 audit records. NotFound for neither."""
        return json.loads(self._h.logs(sandbox_id))

    def expired(self) -> List[Dict[str, Any]]:
        """The sandboxes that expired under ``on_expiry="keep_logs"`` and are still kept (summaries)."""
        return json.loads(self._h.expired())

    def forget_expired(self, sandbox_id: str) -> None:
        """Drops what is kept of an expired sandbox now (gc does it after its keep_s). NotFound if nothing is."""
        self._h.forget_expired(sandbox_id)

    def image_pull(self, ref: str, name: Optional[str] = None,
                   progress: Optional[Callable[[str, int, int, int, int], None]] = None) -> Dict[str, Any]:
        """Pulls registry image ``ref`` ("docker://REGISTRY/REPO:TAG", "REPO@sha256:...", "debian:bookworm") into
        the store as environment ``name`` (None: the image's canonical reference). ``progress(phase, layer,
        layers, bytes, total)`` is called from the pulling threads. Returns {"reference", "environment",
        "version", "new_version", "manifest_digest", "platform", "endpoint", "layers", "blobs_fetched",
        "layers_reused", "bytes_fetched", "seconds"}. NotFound, PermissionDenied, Unavailable, DataLoss as in
        sandlet_store.h."""
        return json.loads(self._h.image_pull(ref, name or "", progress))


def _selector(labels: Mapping[str, str]) -> str:
    """{"k": "v", ...} -> "k=v,..." (a pause/resume selector: every pair must match)."""
    if not labels:
        raise InvalidArgument("labels: at least one label is required", 3)
    for k, v in labels.items():
        if not k or "=" in k or "," in k or "," in v:
            raise InvalidArgument(f"labels: {k!r}={v!r} cannot be a selector pair", 3)
    return ",".join(f"{k}={v}" for k, v in labels.items())
