"""The asyncio bridge: each event loop watches one completion queue of the extension (its eventfd) and
resolves the futures of the library calls started from that loop (docs/ARCHITECTURE.md, "Python binding")."""
from __future__ import annotations

import asyncio
import itertools
import weakref
from typing import Any, Callable, Dict, Optional, Tuple

from . import _sandlet

_Handler = Callable[[int, Any], bool]  # (kind, payload) -> True when it was the final completion


class _Bridge:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.queue = _sandlet.CompletionQueue()
        self._handlers: Dict[int, _Handler] = {}
        self._tokens = itertools.count(1)
        loop.add_reader(self.queue.fd(), self._drain)

    def register(self, handler: _Handler) -> int:
        token = next(self._tokens)
        self._handlers[token] = handler
        return token

    def forget(self, token: int) -> None:
        self._handlers.pop(token, None)

    def future(self, loop: asyncio.AbstractEventLoop,
               on_orphan: Optional[Callable[[Any], None]] = None) -> Tuple[int, "asyncio.Future[Any]"]:
        """A token whose final completion resolves the returned future. ``on_orphan(payload)`` disposes of
        a value that arrives after the awaiting task was cancelled (e.g. a sandbox nobody will close)."""
        fut: asyncio.Future[Any] = loop.create_future()

        def handle(kind: int, payload: Any) -> bool:
            if fut.done():
                if on_orphan is not None and kind != _sandlet.COMPLETION_ERROR:
                    on_orphan(payload)
            elif kind == _sandlet.COMPLETION_ERROR:
                fut.set_exception(payload)
            else:
                fut.set_result(payload)
            return True

        return self.register(handle), fut

    def _drain(self) -> None:
        for token, kind, payload in self.queue.drain():
            handler = self._handlers.get(token)
            if handler is not None and handler(kind, payload):
                del self._handlers[token]


_bridges: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Bridge]" = weakref.WeakKeyDictionary()


def _bridge() -> Tuple[asyncio.AbstractEventLoop, _Bridge]:
    loop = asyncio.get_running_loop()
    b = _bridges.get(loop)
    if b is None:
        b = _bridges[loop] = _Bridge(loop)
    return loop, b


def _start(begin: Callable[[_sandlet.CompletionQueue, int], Any],
           on_orphan: Optional[Callable[[Any], None]] = None) -> Tuple[Any, "asyncio.Future[Any]"]:
    """Starts a library call that completes on the running loop's bridge: ``begin(queue, token)`` issues it.
    Returns what ``begin`` returned and the future of the completion. If ``begin`` raises, nothing is
    left registered."""
    loop, bridge = _bridge()
    token, fut = bridge.future(loop, on_orphan)
    try:
        return begin(bridge.queue, token), fut
    except BaseException:
        bridge.forget(token)
        raise
