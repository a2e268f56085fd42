"""sandlet's exceptions: one class per status code of the C ABI (see sandlet.h for the retry rules).

Every failing library call raises a subclass of :class:`Error` carrying ``code`` (the C enum value),
``code_name`` ("NOT_FOUND"), the message (it names the object, the operation and, for bad input, the field)
and ``errno`` (0 when none applies). Some also derive from the matching built-in, so that
``except LookupError`` or ``except ValueError`` work as a Python user expects.

Errors of file transfer (``read_file``, ``write_file``) and of starting a command (``exec``, ``run``) that
carry the kernel's errno are also the built-in ``OSError`` subclass of that errno, as ``open`` and
``subprocess`` raise them: ``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError``,
``NotADirectoryError``, ``FileExistsError``, or ``OSError`` itself, with ``errno``, ``strerror`` and
``filename`` set (see :func:`os_flavoured`).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Optional, Tuple, Type


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
        if isinstance(self, OSError) and type(self) in _OS_FLAVOURED.values():
            return (_rebuild_os_flavoured, (self.message, self.code, self.errno, getattr(self, "filename", None)))
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


# ---- file and command errors as the built-in OSError subclasses too ----------------------------------------


class FileNotFound(NotFound, FileNotFoundError):
    """A file, directory or command inside the sandbox does not exist (errno ENOENT)."""


class NotADirectory(NotFound, NotADirectoryError):
    """A parent of the path is not a directory (errno ENOTDIR)."""


class FilePermissionDenied(PermissionDenied, PermissionError):
    """The sandbox's kernel refused the file or command to the sandbox user (errno EACCES or EPERM)."""


class IsADirectory(FailedPrecondition, IsADirectoryError):
    """The path is a directory where a file is needed (errno EISDIR)."""


class FileExists(AlreadyExists, FileExistsError):
    """The path exists already (errno EEXIST)."""


# (sandlet class, OSError class) -> the class deriving from both; the named ones above, others made on demand.
_OS_FLAVOURED: Dict[Tuple[Type[Error], Type[OSError]], Type[Error]] = {
    (c.__bases__[0], c.__bases__[1]): c  # type: ignore[misc]
    for c in (FileNotFound, NotADirectory, FilePermissionDenied, IsADirectory, FileExists)
}


def _os_class(err_no: int) -> Type[OSError]:
    # OSError's constructor picks the subclass for an errno itself (ENOENT: FileNotFoundError, ...).
    return type(OSError(err_no, ""))


def _flavoured_class(base: Type[Error], err_no: int) -> Type[Error]:
    os_cls = _os_class(err_no)
    key = (base, os_cls)
    cls = _OS_FLAVOURED.get(key)
    if cls is None:
        cls = type(base.__name__ + os_cls.__name__.replace("Error", "") + "Error", (base, os_cls),
                   {"__doc__": f"{base.__name__} that is also a built-in {os_cls.__name__}.",
                    "__module__": __name__})
        _OS_FLAVOURED[key] = cls
    return cls


def os_flavoured(err: Error, filename: Optional[str]) -> Error:
    """``err`` as an instance of its sandlet class and of the built-in OSError subclass of its errno, with
    ``errno``, ``strerror`` and ``filename`` set as ``open`` sets them. An error without an errno (input the
    library validated itself) or one that is an OSError already (DeadlineExceeded) is returned as it is."""
    if err.errno <= 0 or isinstance(err, OSError):
        return err
    out = _flavoured_class(type(err), err.errno)(err.message, err.code, err.errno)
    out.strerror = os.strerror(err.errno)
    out.filename = filename
    return out


def _rebuild_os_flavoured(message: str, code: int, err_no: int, filename: Optional[str]) -> Error:
    return os_flavoured(from_code(code, message, err_no), filename)


def command_error(err: BaseException) -> BaseException:
    """A command that could not be started, flavoured as ``subprocess`` raises it: the agent's message
    ``... exec "ARGV0": ...`` or ``... chdir "DIR": ...`` gives the filename. Anything else is returned as
    it is."""
    if not isinstance(err, Error):
        return err
    found = _COMMAND_STEP.search(err.message)
    return os_flavoured(err, found.group(1)) if found else err


_COMMAND_STEP = re.compile(r'(?:^|: )(?:exec|chdir) "(.*?)": ')
