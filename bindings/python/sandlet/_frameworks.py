"""What the framework integrations (sandlet.inspect, sandlet.harbor) share: one AsyncRuntime per runtime root
for the whole process — the frameworks run every sample or trial of a job on one event loop, and one runtime
(one event-loop thread, one warm pool) serves them all."""
from __future__ import annotations

import asyncio
import weakref
from typing import Dict

from ._aio import AsyncRuntime

_runtimes: Dict[str, AsyncRuntime] = {}
_locks: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = weakref.WeakKeyDictionary()


async def runtime_for(root: str) -> AsyncRuntime:
    """The process's runtime on ``root`` ("" = $SANDLET_ROOT, else the library's default), opened on first use."""
    lock = _locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    async with lock:
        rt = _runtimes.get(root)
        if rt is None or rt.closed:
            rt = _runtimes[root] = await AsyncRuntime.open(root or None)
        return rt


def close_runtimes() -> None:
    """Closes these runtimes (destroying the sandboxes they own); the next use opens them again."""
    while _runtimes:
        _, rt = _runtimes.popitem()
        rt.close()
