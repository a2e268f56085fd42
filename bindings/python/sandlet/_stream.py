"""The synchronous output stream of a running command (Sandbox.exec_stream)."""
from __future__ import annotations

from typing import Any, Iterator, List, Optional, Tuple, Union

from . import _sandlet
from ._errors import Error, command_error


class StreamControl:
    """What both faces of a running command share: signals, its stdin's end, its terminal, cancel."""

    _control: Any

    def signal(self, signo: int) -> None:
        self._control.signal(signo)

    def close_stdin(self) -> None:
        """Ends its stdin (a tty ignores this: write b"\\x04" to end a reading program)."""
        self._control.close_stdin()

    def resize(self, rows: int, cols: int) -> None:
        """Sets its terminal's size (tty=True); its foreground processes get SIGWINCH."""
        try:
            self._control.resize(rows, cols)
        except Error as e:
            raise command_error(e) from None

    def cancel(self) -> None:
        """Kills every process of the command."""
        self._control.cancel()


class ExecStream(StreamControl):
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

    def write(self, data: Union[bytes, str]) -> None:
        """Feeds its stdin (open_stdin=True; with a tty, typed into it). Blocks while 4 MiB are in flight."""
        try:
            self._control.write_stdin(data.encode() if isinstance(data, str) else bytes(data))
        except Error as e:
            raise command_error(e) from None

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.result is None:
            self.cancel()
