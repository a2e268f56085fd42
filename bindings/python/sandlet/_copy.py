"""Directory copies into and out of a sandbox (``Sandbox.copy_in`` and friends), as ``docker cp`` makes them:
modes, times, symlinks (never followed), hard links, FIFOs and empty directories are kept; nothing a copy
writes leaves its destination. The semantics are sandlet_copy.h's (docs/COPY.md)."""
from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from typing import IO, Any, Callable, NamedTuple, Optional, Union

from ._errors import Error, os_flavoured

PathLike = Union[str, "os.PathLike[str]"]
# progress(entries, bytes, skipped) after each entry and every 4 MiB; raising stops the copy.
CopyProgressFn = Callable[[int, int, int], None]
# A file object with a descriptor (opened in binary mode), or a descriptor.
Archive = Union[int, IO[bytes]]


class CopyStats(NamedTuple):
    entries: int  # directories, files, links and FIFOs (the root included)
    bytes: int  # file data
    skipped: int  # sockets and device nodes, which a copy leaves out


def _options(user: Optional[str], keep_owners: bool, follow_links: bool, max_bytes: int, max_entries: int,
             progress: Optional[CopyProgressFn], allow_outside_links: bool = False) -> dict:
    return dict(user=user or "", keep_owners=keep_owners, follow_links=follow_links,
                allow_outside_links=allow_outside_links, max_bytes=max_bytes, max_entries=max_entries,
                progress=progress)


def _fd(archive: Archive) -> int:
    if isinstance(archive, int):
        return archive
    if hasattr(archive, "flush"):
        archive.flush()
    return archive.fileno()


class SandboxCopies:
    """The copy methods of ``Sandbox`` (mixed in; ``self._h`` is the extension's handle)."""

    _h: Any

    def copy_in(self, src: PathLike, dst: str, *, user: Optional[str] = None, keep_owners: bool = False,
                follow_links: bool = False, progress: Optional[CopyProgressFn] = None) -> CopyStats:
        """``src`` on the host (a directory, file, symlink or FIFO) becomes ``dst`` (absolute) in the sandbox;
        an existing directory there is merged into. Everything made belongs to ``user`` (default: the spec's
        user) unless ``keep_owners``; a symlink named as ``src`` is copied as a link unless ``follow_links``."""
        path = os.fspath(src)
        try:
            return CopyStats(*self._h.copy_in(path, dst, **_options(user, keep_owners, follow_links, 0, 0, progress)))
        except Error as e:
            raise os_flavoured(e, path) from None

    def copy_out(self, src: str, dst: PathLike, *, user: Optional[str] = None, keep_owners: bool = False,
                 follow_links: bool = False, allow_outside_links: bool = False, max_bytes: int = 0,
                 max_entries: int = 0, progress: Optional[CopyProgressFn] = None) -> CopyStats:
        """``src`` in the sandbox becomes ``dst`` on the host. What the sandbox sends cannot write outside
        ``dst`` (no symlink below it is followed) and loses set-user/group-ID bits; a symlink that would point
        outside ``dst`` is left out (counted in ``skipped``) unless ``allow_outside_links``; ``max_bytes``
        (default 8 GiB) and ``max_entries`` (default 1,048,576) cap it."""
        try:
            return CopyStats(*self._h.copy_out(src, os.fspath(dst), **_options(
                user, keep_owners, follow_links, max_bytes, max_entries, progress, allow_outside_links)))
        except Error as e:
            raise os_flavoured(e, src) from None

    def put_archive(self, dst: str, archive: Union[Archive, bytes], *, user: Optional[str] = None,
                    keep_owners: bool = False, progress: Optional[CopyProgressFn] = None) -> CopyStats:
        """Unpacks a tar stream (plain, gzip or zstd) at ``dst``, which becomes the archive's root: from a
        binary file object, a descriptor (read to its end), or bytes."""
        opts = _options(user, keep_owners, False, 0, 0, progress)
        try:
            if isinstance(archive, (bytes, bytearray, memoryview)):
                with tempfile.TemporaryFile() as f:
                    f.write(archive)
                    f.seek(0)
                    return CopyStats(*self._h.put_archive(f.fileno(), dst, **opts))
            return CopyStats(*self._h.put_archive(_fd(archive), dst, **opts))
        except Error as e:
            raise os_flavoured(e, dst) from None

    def get_archive(self, src: str, archive: Optional[Archive] = None, *, user: Optional[str] = None,
                    follow_links: bool = False, max_bytes: int = 0, max_entries: int = 0,
                    progress: Optional[CopyProgressFn] = None) -> Union[bytes, CopyStats]:
        """``src`` as a POSIX tar stream whose members are named under its last component (as ``docker cp
        ID:src -`` writes it): written to ``archive`` (returns the CopyStats), or returned as bytes."""
        opts = _options(user, False, follow_links, max_bytes, max_entries, progress)
        try:
            if archive is None:
                with tempfile.TemporaryFile() as f:
                    self._h.get_archive(src, f.fileno(), **opts)
                    f.seek(0)
                    return f.read()
            return CopyStats(*self._h.get_archive(src, _fd(archive), **opts))
        except Error as e:
            raise os_flavoured(e, src) from None


class AsyncSandboxCopies:
    """The same for ``AsyncSandbox``, each on a worker thread (a copy is disk and socket work that blocks).
    Cancelling the awaiting task stops the copy at its next entry (or 4 MiB) and waits for it to end."""

    sync: Any

    async def _in_thread(self, fn: Callable[..., Any], *args: Any, progress: Optional[CopyProgressFn] = None,
                         **kwargs: Any) -> Any:
        stop = threading.Event()

        def checked(entries: int, nbytes: int, skipped: int) -> None:  # (on the copying thread)
            if stop.is_set():
                raise _Stopped()
            if progress is not None:
                progress(entries, nbytes, skipped)

        work = asyncio.ensure_future(asyncio.to_thread(fn, *args, progress=checked, **kwargs))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            stop.set()
            try:
                await work
            except BaseException:  # (_Stopped, or whatever the copy ended with meanwhile)
                pass
            raise

    async def copy_in(self, src: PathLike, dst: str, **kwargs: Any) -> CopyStats:
        return await self._in_thread(self.sync.copy_in, src, dst, **kwargs)

    async def copy_out(self, src: str, dst: PathLike, **kwargs: Any) -> CopyStats:
        return await self._in_thread(self.sync.copy_out, src, dst, **kwargs)

    async def put_archive(self, dst: str, archive: Union[Archive, bytes], **kwargs: Any) -> CopyStats:
        return await self._in_thread(self.sync.put_archive, dst, archive, **kwargs)

    async def get_archive(self, src: str, archive: Optional[Archive] = None, **kwargs: Any) -> Union[bytes, CopyStats]:
        return await self._in_thread(self.sync.get_archive, src, archive, **kwargs)


class _Stopped(Exception):
    """Raised in a copy's progress callback to stop it (its awaiting task was cancelled)."""
