"""sandlet's exceptions: one class per status code of the C ABI (see sandlet.h for the retry rules).

Every failing library call raises a subclass of :class:`Error` carrying ``code`` (the C enum value),
``code_name`` ("NOT_FOUND"), the message (it names the object, the operation and, for bad input, the field)
and ``errno`` (0 when none applies). Some also derive from the matching built-in, so that
``except LookupError`` or ``except ValueError`` work as a Python user expects.
"""
from __future__ import annotations

from typing import Any, Dict, Type


class Error(Exception):
    """A sandlet call failed. ``code``/``code_name`` tell which way; see sandlet.h for retry rules."""

    code: int = 2
    code_name: str = "UNKNOWN"

    def __init__(self, message: str = "", code: int | None = None, errno: int = 0) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
            self.code_name = _NAMES.get(code, "UNKNOWN")
        self.message = message
        self.errno = errno

    def __str__(self) -> str:
        return f"{self.code_name}: {self.message}"

    def __reduce__(self) -> Any:  # picklable (multiprocessing, Ray, ...)
        return (type(self), (self.message, self.code, self.errno))


class Cancelled(Error):
    """The operation was cancelled by the caller."""


class Unknown(Error):
    """An error the library could not classify."""


class InvalidArgument(Error, ValueError):
    """Bad input; the message names the field. Do not retry unchanged."""


class DeadlineExceeded(Error, TimeoutError):  # type: ignore[misc]  # (errno: int, never None)
    """A timeout expired."""


class NotFound(Error, LookupError):
    """No such sandbox, file, command, layer or backend."""


class AlreadyExists(Error):
    """The object exists already."""


class PermissionDenied(Error):
    """The host or the sandbox refused the operation."""


class ResourceExhausted(Error):
    """A limit was hit (memory, pids, disk, output). Retry only after freeing something."""


class FailedPrecondition(Error):
    """Wrong state (sandbox destroyed, handle closed, layer in use). Fix the state first."""


class Aborted(Error):
    """The operation was aborted (a conflict); retry the whole sequence."""


class OutOfRange(Error):
    """A size or position beyond what is allowed (e.g. a file larger than max_bytes)."""


class Unimplemented(Error, NotImplementedError):
    """The backend or a kernel feature is missing on this host; the message says which."""


class Internal(Error):
    """A bug or an unexpected kernel answer; the message carries the operation and errno."""


class Unavailable(Error):
    """Transient (node full, agent restarting, sandbox paused). Retry later with backoff."""


class DataLoss(Error):
    """Stored data failed verification (e.g. a corrupted layer); it was not used."""


class CommandFailed(Exception):
    """Raised by ``ExecResult.check()`` (and ``exec(..., check=True)``) when a command did not exit with 0."""

    def __init__(self, result: Any) -> None:
        self.result = result
        how = "timed out" if result.timed_out else (
            f"was killed by signal {result.signal}" if result.signal else f"exited with {result.exit_code}")
        tail = result.stderr[-400:].decode("utf-8", "replace").strip() if result.stderr else ""
        super().__init__(f"command {how}" + (f": {tail}" if tail else ""))

    @property
    def exit_code(self) -> int:
        return int(self.result.exit_code)


_CLASSES: Dict[int, Type[Error]] = {
    1: Cancelled, 2: Unknown, 3: InvalidArgument, 4: DeadlineExceeded, 5: NotFound, 6: AlreadyExists,
    7: PermissionDenied, 8: ResourceExhausted, 9: FailedPrecondition, 10: Aborted, 11: OutOfRange,
    12: Unimplemented, 13: Internal, 14: Unavailable, 15: DataLoss,
}
_NAMES: Dict[int, str] = {
    1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
    6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
    10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE", 15: "DATA_LOSS",
}
for _code, _cls in _CLASSES.items():
    _cls.code = _code
    _cls.code_name = _NAMES[_code]


def from_code(code: int, message: str, errno: int = 0) -> Error:
    """The exception for a C status code (used by the extension module)."""
    return _CLASSES.get(code, Unknown)(message, code, errno)
