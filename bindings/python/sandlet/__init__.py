"""sandlet: isolated, stateful sandboxes for agentic training and evaluation, in-process.

    import sandlet
    with sandlet.Runtime("/var/lib/sandlet") as rt:
        with rt.create(layers=["/srv/rootfs"]) as sb:
            print(sb.exec("echo hello").stdout)

    async with sandlet.AsyncRuntime() as rt:          # asyncio: the library's event loop does the work
        sb = await rt.create(environment="swe-task")
        r = await sb.exec(["python3", "-m", "pytest"], timeout=60)
        async with await sb.fork(4) as children:      # 4 sandboxes with sb's files, each its own
            await asyncio.gather(*(c.exec("make test") for c in children))

Errors are sandlet.Error subclasses named after the C ABI's status codes (NotFound, InvalidArgument, ...).
File transfer and command start errors that carry the kernel's errno are also the built-in OSError
subclasses (FileNotFoundError, PermissionError, IsADirectoryError, ...), as ``open`` and ``subprocess`` raise.
"""
from . import _sandlet
from ._aio import AsyncExecStream, AsyncRuntime, AsyncSandbox
from ._build import BuildEvent
from ._errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    CommandFailed,
    DataLoss,
    DeadlineExceeded,
    Error,
    FailedPrecondition,
    FileExists,
    FileNotFound,
    FilePermissionDenied,
    Internal,
    InvalidArgument,
    IsADirectory,
    NotADirectory,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
    Unimplemented,
    Unknown,
)
from ._sandlet import ExecResult, Spec
from ._fork import AsyncForkResult, ForkResult
from ._copy import CopyStats
from ._session import AsyncSession, Session
from ._sync import ExecStream, Runtime, Sandbox

STDOUT: int = _sandlet.STDOUT
STDERR: int = _sandlet.STDERR
__version__: str = _sandlet.version()
ABI_VERSION: int = _sandlet.abi_version()

__all__ = [
    "Runtime", "Sandbox", "ExecStream", "AsyncRuntime", "AsyncSandbox", "AsyncExecStream", "ExecResult", "Spec",
    "BuildEvent", "ForkResult", "AsyncForkResult", "CopyStats", "Session", "AsyncSession",
    "STDOUT", "STDERR", "Error", "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
    "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
    "Unimplemented", "Internal", "Unavailable", "DataLoss", "CommandFailed",
    "FileNotFound", "NotADirectory", "FilePermissionDenied", "IsADirectory", "FileExists",
]
