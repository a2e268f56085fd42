"""Shell sessions: one shell kept alive across calls (Sandbox.session; docs/SHELLS.md)."""
from __future__ import annotations

import asyncio
import os
from typing import Any, Mapping, Optional, Sequence

from . import _sandlet
from ._errors import Error, InvalidArgument, command_error


class Session:
    """A shell in a sandbox that runs one command per ``run()``: the working directory, exported variables,
    functions and background jobs carry over. Each result holds that command's own stdout and stderr (the
    shell reads from a pipe: no echo, no prompt) and its exit code; a command's stdin is /dev/null.

    A timeout kills the shell and everything it started and ends the session (``alive`` turns False; later
    runs raise FailedPrecondition); so does ``exit`` (its status is the run's exit code). Ctrl-C during a run
    kills the session too. Use it as a context manager, or ``close()`` it: that kills what it left running.
    """

    def __init__(self, handle: _sandlet.Session) -> None:
        self._h = handle

    @classmethod
    def open(cls, sandbox: _sandlet.Sandbox, shell: Optional[Sequence[str]], env: Optional[Mapping[str, str]],
             cwd: Optional[str], user: Optional[str], output_limit: Optional[int]) -> "Session":
        if isinstance(shell, (str, bytes)):
            raise InvalidArgument("shell: pass an argv sequence, e.g. ['bash', '--norc']", 3)
        argv = [os.fspath(a) for a in shell] if shell is not None else []
        if shell is not None and not argv:
            raise InvalidArgument("shell: empty argv (None means the default shell)", 3)
        if output_limit is not None and output_limit < 0:
            raise InvalidArgument(f"output_limit: must be >= 0 bytes, got {output_limit}", 3)
        try:
            h = sandbox.open_session(argv, [f"{k}={v}" for k, v in (env or {}).items()], os.fspath(cwd) if cwd else "",
                                     str(user) if user is not None else "", int(output_limit or 0))
        except Error as e:
            raise command_error(e) from None
        return cls(h)

    def run(self, command: str, *, timeout: Optional[float] = None, check: bool = False) -> _sandlet.ExecResult:
        """Runs ``command`` (shell syntax; may span lines) in the session's shell and waits for it."""
        if not isinstance(command, str):
            raise InvalidArgument(f"command: expected a str, got {type(command).__name__}", 3)
        if "\0" in command:
            raise InvalidArgument("command: contains a NUL character", 3)
        if timeout is not None and timeout < 0:
            raise InvalidArgument(f"timeout: must be >= 0 seconds, got {timeout}", 3)
        try:
            r = self._h.run(command, float(timeout or 0.0))
        except Error as e:
            raise command_error(e) from None
        return r.check() if check else r

    @property
    def alive(self) -> bool:
        """True while the shell runs (no timeout, exit or close yet)."""
        return self._h.alive

    def close(self) -> None:
        """Kills the shell and everything it started. Idempotent."""
        self._h.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSession:
    """The asyncio face of Session (AsyncSandbox.session): each call runs in a worker thread; cancelling an
    awaiting ``run`` kills the session (the shell cannot stop one command alone)."""

    def __init__(self, session: Session) -> None:
        self.sync = session

    async def run(self, command: str, *, timeout: Optional[float] = None, check: bool = False) -> _sandlet.ExecResult:
        task = asyncio.ensure_future(asyncio.to_thread(self.sync.run, command, timeout=timeout, check=check))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.to_thread(self.sync.close)  # ends the run in flight, which then raises Cancelled
            try:
                await task
            except Exception:
                pass
            raise

    @property
    def alive(self) -> bool:
        return self.sync.alive

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
