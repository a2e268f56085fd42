"""The synchronous output stream of a running command (Sandbox.exec_stream)."""
from __future__ import annotations

from typing import Any, Iterator, List, Optional, Tuple

from . import _sandlet
from ._errors import command_error


class ExecStream:
    """Output of a running command, chunk by chunk (see Sandbox.exec_stream)."""

    def __init__(self, handle: _sandlet.Sandbox, args: Tuple[Any, ...]) -> None:
        self._queue = _sandlet.CompletionQueue()
        self._control = handle.exec_start(self._queue, 1, True, *args)
        self._pending: List[Tuple[int, int, Any]] = []
        self.result: Optional[_sandlet.ExecResult] = None

    def __iter__(self) -> Iterator[Tuple[int, bytes]]:
        try:
            while True:
                while not self._pending:
                    self._queue.wait(0.2)  # returns on a signal too, so Ctrl-C is handled here
                    self._pending.extend(self._queue.drain())
                _, kind, payload = self._pending.pop(0)
                if kind == _sandlet.COMPLETION_OUTPUT:
                    yield payload
                elif kind == _sandlet.COMPLETION_RESULT:
                    self.result = payload
                    return
                else:
                    raise command_error(payload) from None
        finally:
            if self.result is None:
                self.cancel()

    def wait(self) -> _sandlet.ExecResult:
        """Discards the remaining output and returns the result."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result

    def signal(self, signo: int) -> None:
        self._control.signal(signo)

    def cancel(self) -> None:
        """Kills every process of the command."""
        self._control.cancel()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.result is None:
            self.cancel()
