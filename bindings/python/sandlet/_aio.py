"""The asyncio API, driven by the library's own event loop.

Each asyncio loop gets one bridge: a CompletionQueue whose eventfd the loop watches (``add_reader``). An
operation is started with a token; the library's event-loop thread queues its completion (never touching
the GIL), and the bridge resolves the matching future on the asyncio thread. One Python thread can thus
keep thousands of commands in flight.
"""
from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _sandlet
from ._common import Command, SpecLike, build_spec, call_args, exec_args, run_args
from ._errors import Error, FailedPrecondition, command_error, os_flavoured
from ._build import BuildProgressFn, NetworkArg, SecretsArg, build_call_args, handle as build_handle
from ._fork import (AsyncForkResult, Excludes, close_handles, fork_args, fork_result, snapshot_args,
                    snapshot_fork_args)
from ._store import StoreURL
from ._session import AsyncSession, Session
from ._stream import StreamControl
from ._sync import PathLike, ProgressFn, Runtime, Sandbox
from ._bridge import _bridge, _start
from ._copy import AsyncSandboxCopies

class AsyncSandbox(AsyncSandboxCopies):
    """The asyncio face of a sandbox (see Sandbox for the semantics). Leaving ``async with`` destroys a
    sandbox that ``create`` made with the default ``owned`` lifetime and closes the handle."""

    def __init__(self, handle: _sandlet.Sandbox, owned: bool = False) -> None:
        self._h = handle
        self._owned = owned

    @property
    def id(self) -> str:
        return self._h.id

    @property
    def closed(self) -> bool:
        return self._h.closed

    @property
    def sync(self) -> Sandbox:
        """The same sandbox with the synchronous API (shares the handle)."""
        return Sandbox(self._h, owned=self._owned)

    async def exec(
        self,
        cmd: Command,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        stdin: Union[bytes, str, None] = None,
        timeout: Optional[float] = None,
        output_limit: Optional[int] = None,
        kill_on_output_limit: bool = False,
        keep_background: bool = False,
        toolkit: bool = False,
        tty: bool = False,
        tty_size: Optional[Tuple[int, int]] = None,
        check: bool = False,
    ) -> _sandlet.ExecResult:
        """Runs a command (see Sandbox.exec). Cancelling the awaiting task kills every process of it."""
        args = exec_args(cmd, env, cwd, user, stdin, timeout, output_limit, kill_on_output_limit,
                             keep_background, toolkit, False, tty, tty_size)
        control, fut = _start(lambda queue, token: self._h.exec_start(queue, token, False, *args))
        try:
            result = await fut
        except asyncio.CancelledError:
            control.cancel()  # the late CANCELLED completion is dropped by the bridge
            raise
        except Error as e:
            raise command_error(e) from None
        return result.check() if check else result

    def exec_stream(
        self,
        cmd: Command,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        stdin: Union[bytes, str, None] = None,
        timeout: Optional[float] = None,
        output_limit: Optional[int] = None,
        kill_on_output_limit: bool = False,
        keep_background: bool = False,
        toolkit: bool = False,
        open_stdin: bool = False,
        tty: bool = False,
        tty_size: Optional[Tuple[int, int]] = None,
    ) -> "AsyncExecStream":
        """Starts a command; ``async for stream, data in ...`` yields its output as it arrives, then
        ``await stream.wait()`` (or ``.result``) gives the exit status. Must be called with a running loop.
        ``open_stdin`` and ``tty`` as in Sandbox.exec_stream (``await stream.write(data)``)."""
        args = exec_args(cmd, env, cwd, user, stdin, timeout, output_limit, kill_on_output_limit,
                             keep_background, toolkit, open_stdin, tty, tty_size)
        return AsyncExecStream(self._h, args)

    async def session(
        self,
        shell: Optional[Sequence[str]] = None,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        output_limit: Optional[int] = None,
    ) -> AsyncSession:
        """A shell kept alive across calls (see Sandbox.session): ``await session.run("make")``."""
        return AsyncSession(await asyncio.to_thread(Session.open, self._h, shell, env, cwd, user, output_limit))

    async def write_file(self, path: str, data: Union[bytes, str], mode: int = 0o644) -> None:
        payload = data.encode() if isinstance(data, str) else bytes(data)
        try:
            _, fut = _start(lambda queue, token: self._h.write_file_async(queue, token, path, payload, mode))
            await fut
        except Error as e:
            raise os_flavoured(e, path) from None

    async def read_file(self, path: str, max_bytes: int = 0) -> bytes:
        try:
            _, fut = _start(lambda queue, token: self._h.read_file_async(queue, token, path, max_bytes))
            data, _mode = await fut
        except Error as e:
            raise os_flavoured(e, path) from None
        return data

    async def info(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.info)

    async def destroy(self) -> None:
        _, fut = _start(self._h.destroy_async)
        await fut

    async def pause(self) -> None:
        await asyncio.to_thread(self.sync.pause)

    async def resume(self) -> None:
        await asyncio.to_thread(self.sync.resume)

    async def net_update(self, allow: Sequence[Dict[str, Any]] = (), *, dns: Sequence[str] = ()) -> None:
        await asyncio.to_thread(self.sync.net_update, allow, dns=dns)

    async def net_stats(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.net_stats)

    async def seccomp_stats(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.seccomp_stats)

    async def snapshot(
        self,
        *,
        exclude: Excludes = (),
        default_excludes: bool = True,
        full: bool = False,
        name: Optional[str] = None,
        max_depth: int = 0,
    ) -> Dict[str, Any]:
        """Snapshots the sandbox on the library's side (see Sandbox.snapshot). A cancelled await does not
        stop the snapshot; its result is dropped."""
        args = snapshot_args(exclude, default_excludes, full, name, max_depth)
        _, fut = _start(lambda queue, token: self._h.snapshot_async(queue, token, *args))
        return json.loads(await fut)

    async def fork(
        self,
        n: int,
        *,
        labels: Optional[Mapping[str, str]] = None,
        exclude: Excludes = (),
        copy_secrets: bool = False,
    ) -> "AsyncForkResult[AsyncSandbox]":
        """One snapshot, then ``n`` children on it (see Sandbox.fork), as AsyncSandbox objects; ``async with``
        the result destroys the owned children. If the awaiting task is cancelled, the children that still
        arrive are closed (owned ones destroyed)."""
        args = fork_args(n, labels, exclude, copy_secrets)
        owned = self._owned or (await self.info()).get("spec", {}).get("lifetime", "owned") != "detached"
        _, fut = _start(lambda queue, token: self._h.fork_async(queue, token, *args), on_orphan=close_handles)
        return fork_result(AsyncForkResult, AsyncSandbox, owned, await fut)

    def close(self) -> None:
        """Releases the handle (idempotent; never blocks). The last handle of an owned sandbox destroys it."""
        self._h.close()

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._owned and not self._h.closed:
            try:
                await self.destroy()
            except FailedPrecondition:
                pass  # destroyed already, or its runtime is closed (which destroyed it)
        self.close()

    def __repr__(self) -> str:
        return f"<sandlet.AsyncSandbox {self.id}{' closed' if self.closed else ''}>"


class AsyncExecStream(StreamControl):
    """Output of a running command as an async iterator of (stream, bytes)."""

    def __init__(self, handle: _sandlet.Sandbox, args: Tuple[Any, ...]) -> None:
        loop, bridge = _bridge()
        self._chunks: asyncio.Queue[Any] = asyncio.Queue()
        self._done: asyncio.Future[Any] = loop.create_future()
        self.result: Optional[_sandlet.ExecResult] = None
        self._bridge = bridge
        self._token = bridge.register(self._on_completion)
        try:
            self._control = handle.exec_start(bridge.queue, self._token, True, *args)
        except BaseException:
            bridge.forget(self._token)
            raise

    def _on_completion(self, kind: int, payload: Any) -> bool:
        if kind == _sandlet.COMPLETION_OUTPUT:
            self._chunks.put_nowait(payload)
            return False
        if not self._done.done():
            if kind == _sandlet.COMPLETION_ERROR:
                self._done.set_exception(command_error(payload))
            else:
                self.result = payload
                self._done.set_result(payload)
        self._chunks.put_nowait(None)  # end of output
        return True

    def __aiter__(self) -> "AsyncExecStream":
        return self

    async def __anext__(self) -> Tuple[int, bytes]:
        try:
            chunk = await self._chunks.get()
        except asyncio.CancelledError:
            self.cancel()
            raise
        if chunk is None:
            self._chunks.put_nowait(None)  # stay exhausted
            if self._done.done() and self._done.exception() is not None:
                raise self._done.exception()  # type: ignore[misc]
            raise StopAsyncIteration
        return chunk

    async def wait(self) -> _sandlet.ExecResult:
        """Waits for the exit (output not consumed yet is kept for iteration) and returns the result."""
        try:
            return await asyncio.shield(self._done)
        except asyncio.CancelledError:
            self.cancel()
            raise

    async def write(self, data: Union[bytes, str]) -> None:
        """Feeds its stdin (open_stdin=True; with a tty, typed into it). Waits while 4 MiB are in flight."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        try:
            await asyncio.to_thread(self._control.write_stdin, payload)
        except Error as e:
            raise command_error(e) from None

    async def __aenter__(self) -> "AsyncExecStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self._done.done():
            self.cancel()
            try:
                await asyncio.shield(self._done)
            except Exception:
                pass


def _close_orphan(handle: Any) -> None:
    handle.close()


class AsyncRuntime:
    """The asyncio face of a Runtime (same arguments). ``async with`` closes it.

    ``create``, ``exec``, file calls and ``destroy`` run on the library's event loop; calls that are
    blocking in the C ABI (attach, list, gc, the layer store) run in a worker thread."""

    def __init__(self, root: Optional[PathLike] = None, *, worker_threads: int = 0, gc_on_open: bool = True,
                 warm_pool: bool = True, create_soon: bool = False, store: Optional[StoreURL] = None,
                 cache_max_bytes: Optional[int] = None, fetch_unit: Optional[int] = None,
                 fetch_concurrency: Optional[int] = None, fill_timeout_ms: Optional[int] = None,
                 registries: Union[None, str, Dict[str, Any]] = None) -> None:
        # Opening is quick, but its sweep of a crashed run's leftovers may take longer: see open().
        self.sync = Runtime(root, worker_threads=worker_threads, gc_on_open=gc_on_open, warm_pool=warm_pool,
                            create_soon=create_soon, store=store, cache_max_bytes=cache_max_bytes,
                            fetch_unit=fetch_unit, fetch_concurrency=fetch_concurrency,
                            fill_timeout_ms=fill_timeout_ms, registries=registries)

    @classmethod
    async def open(cls, root: Optional[PathLike] = None, *, worker_threads: int = 0, gc_on_open: bool = True,
                   warm_pool: bool = True, create_soon: bool = False, store: Optional[StoreURL] = None,
                   cache_max_bytes: Optional[int] = None, fetch_unit: Optional[int] = None,
                   fetch_concurrency: Optional[int] = None, fill_timeout_ms: Optional[int] = None,
                   registries: Union[None, str, Dict[str, Any]] = None) -> "AsyncRuntime":
        """Opens the runtime in a worker thread, so that the event loop never waits on the sweep at open."""
        return await asyncio.to_thread(cls, root, worker_threads=worker_threads, gc_on_open=gc_on_open,
                                       warm_pool=warm_pool, create_soon=create_soon, store=store,
                                       cache_max_bytes=cache_max_bytes, fetch_unit=fetch_unit,
                                       fetch_concurrency=fetch_concurrency, fill_timeout_ms=fill_timeout_ms,
                                       registries=registries)

    @property
    def root(self) -> str:
        return self.sync.root

    @property
    def closed(self) -> bool:
        return self.sync.closed

    @property
    def audit_path(self) -> str:
        """The root's audit log (read it with ``self.sync.audit(...)``, which never blocks unless following)."""
        return self.sync.audit_path

    async def create(self, spec: SpecLike = None, **fields: Any) -> AsyncSandbox:
        """Creates a sandbox (see Runtime.create). If the awaiting task is cancelled, the sandbox that
        still arrives is closed (an owned one is destroyed)."""
        s, owned = build_spec(spec, fields)
        _, fut = _start(lambda queue, token: self.sync._h.create_async(queue, token, s), on_orphan=_close_orphan)
        return AsyncSandbox(await fut, owned=owned)

    async def run(
        self,
        cmd: Command,
        spec: SpecLike = None,
        *,
        stdin: Any = None,
        stdout: Any = None,
        stderr: Any = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        timeout: Optional[float] = None,
        check: bool = False,
        **fields: Any,
    ) -> _sandlet.ExecResult:
        """One command in a new sandbox, destroyed afterwards (see Runtime.run). Cancelling the awaiting
        task kills every process of it."""
        s, _ = build_spec(spec, fields)
        args = run_args(cmd, env, cwd, user, timeout, stdin, stdout, stderr)
        cancel_r, cancel_w = os.pipe()  # the library watches a duplicate of the read end
        try:
            _, fut = _start(lambda queue, token: self.sync._h.run_async(queue, token, s, *args, cancel_r))
            try:
                result = await fut
            except asyncio.CancelledError:
                os.write(cancel_w, b"x")  # the late CANCELLED completion is dropped by the bridge
                raise
            except Error as e:
                raise command_error(e) from None
        finally:
            os.close(cancel_r)
            os.close(cancel_w)
        return result.check() if check else result

    async def call(
        self,
        cmd: Optional[Command] = None,
        spec: SpecLike = None,
        *,
        script: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        stdin: Any = None,
        timeout: Optional[float] = None,
        check: bool = False,
        **fields: Any,
    ) -> _sandlet.ExecResult:
        """Runtime.call without blocking the event loop."""
        s, _ = build_spec(spec, fields)
        args = call_args(cmd, script, env, stdin, timeout)
        _, fut = _start(lambda queue, token: self.sync._h.call_async(queue, token, s, *args))
        try:
            result = await fut
        except Error as e:
            raise command_error(e) from None
        return result.check() if check else result

    async def fork_snapshot(
        self,
        snapshot: str,
        n: int,
        spec: SpecLike = None,
        *,
        labels: Optional[Mapping[str, str]] = None,
        copy_secrets: bool = False,
        **fields: Any,
    ) -> "AsyncForkResult[AsyncSandbox]":
        """Runtime.fork_snapshot in a worker thread (the C ABI's call blocks), as AsyncSandbox children. If
        the awaiting task is cancelled, the children that still arrive are closed (owned ones destroyed)."""
        args, owned = snapshot_fork_args(snapshot, n, spec, fields, labels, copy_secrets)
        work = asyncio.get_running_loop().run_in_executor(None, lambda: self.sync._h.fork_snapshot(*args))
        try:
            raw = await asyncio.shield(work)
        except asyncio.CancelledError:
            work.add_done_callback(lambda f: None if f.cancelled() or f.exception() else close_handles(f.result()))
            raise
        return fork_result(AsyncForkResult, AsyncSandbox, owned, raw)

    async def attach(self, sandbox_id: str) -> AsyncSandbox:
        h = await asyncio.to_thread(self.sync._h.attach, sandbox_id)
        return AsyncSandbox(h)

    async def list(self, label: Optional[str] = None, *,
                   labels: Optional[Mapping[str, str]] = None) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.list, label, labels=labels)

    async def pause(self, labels: Mapping[str, str]) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.pause, labels)

    async def resume(self, labels: Mapping[str, str]) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.resume, labels)

    async def gc(self) -> int:
        return await asyncio.to_thread(self.sync.gc)

    def set_call_pool(self, spec: SpecLike = None, **settings: Any) -> None:
        self.sync.set_call_pool(spec, **settings)

    def call_stats(self) -> Dict[str, Any]:
        return self.sync.call_stats()

    def set_admission(self, **budget: Any) -> None:
        self.sync.set_admission(**budget)

    async def logs(self, sandbox_id: str) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.logs, sandbox_id)

    async def expired(self) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.expired)

    async def forget_expired(self, sandbox_id: str) -> None:
        await asyncio.to_thread(self.sync.forget_expired, sandbox_id)

    def stats(self) -> Dict[str, Any]:
        return self.sync.stats()

    async def metrics(self) -> str:
        return await asyncio.to_thread(self.sync.metrics)

    async def metrics_json(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.metrics_json)

    def backends(self) -> List[Dict[str, Any]]:
        return self.sync.backends()

    async def features(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.features)

    async def layer_import(self, path: PathLike, *, role: Optional[str] = None, name: Optional[str] = None,
                           parent: Optional[str] = None, dedupe: bool = True,
                           progress: Optional[ProgressFn] = None) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.layer_import, path, role=role, name=name, parent=parent,
                                       dedupe=dedupe, progress=progress)

    async def layer_export(self, ref: str, path: PathLike, *, zstd_level: int = 0) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.layer_export, ref, path, zstd_level=zstd_level)

    async def layer_list(self) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.layer_list)

    async def layer_inspect(self, ref: str) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.layer_inspect, ref)

    async def layer_remove(self, ref: str) -> None:
        await asyncio.to_thread(self.sync.layer_remove, ref)

    async def layer_gc(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.layer_gc)

    async def layer_merge(self, refs: Sequence[str], *, role: Optional[str] = None, name: Optional[str] = None,
                          dedupe: bool = True) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.layer_merge, refs, role=role, name=name, dedupe=dedupe)

    async def layer_push(self, ref: str, store: Optional[StoreURL] = None) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.layer_push, ref, store)

    async def layer_pull(self, ref: str, store: Optional[StoreURL] = None, lazy: bool = False) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.layer_pull, ref, store, lazy)

    async def image_pull(self, ref: str, name: Optional[str] = None,
                         progress: Optional[Callable[[str, int, int, int, int], None]] = None) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.image_pull, ref, name, progress)

    async def loader_status(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.loader_status)

    async def env_create(self, name: str, layers: Sequence[str], *, env: Optional[Mapping[str, str]] = None,
                         workdir: Optional[str] = None, user: Optional[str] = None) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.env_create, name, layers, env=env, workdir=workdir, user=user)

    async def env_list(self) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.env_list)

    async def env_remove(self, name: str) -> None:
        await asyncio.to_thread(self.sync.env_remove, name)

    async def build(self, recipe: PathLike, context: PathLike = ".", *, tag: Optional[str] = None,
                    build_args: Optional[Mapping[str, str]] = None, no_cache: bool = False, keep_tmp: bool = False,
                    progress: Optional[BuildProgressFn] = None, secrets: Optional[SecretsArg] = None,
                    network: Optional[NetworkArg] = None) -> Dict[str, Any]:
        """Runtime.build without blocking the event loop: the build runs on a thread of the library's and
        ``progress`` is called on this loop. Cancelling the awaiting task cancels the build."""
        loop, bridge = _bridge()
        fut: asyncio.Future[Any] = loop.create_future()

        def on_completion(kind: int, payload: Any) -> bool:
            done, value = build_handle(kind, payload, progress if not fut.done() else None)
            if done and not fut.done():
                if kind == _sandlet.COMPLETION_ERROR:
                    fut.set_exception(value)
                else:
                    fut.set_result(value)
            return done

        cancel_r, cancel_w = os.pipe()
        token = bridge.register(on_completion)
        try:
            try:
                build_call_args(self.sync._h, recipe, context, tag, build_args, no_cache, keep_tmp, cancel_r,
                                progress is not None, secrets, network)(bridge.queue, token)
            except BaseException:
                bridge.forget(token)
                raise
            try:
                text = await fut
            except asyncio.CancelledError:
                os.write(cancel_w, b"x")  # the late CANCELLED completion is dropped by the handler
                raise
        finally:
            os.close(cancel_r)
            os.close(cancel_w)
        return json.loads(text)

    async def aclose(self) -> None:
        """Closes the runtime in a worker thread (destroying owned sandboxes takes a moment)."""
        await asyncio.to_thread(self.sync.close)

    def close(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> "AsyncRuntime":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<sandlet.AsyncRuntime {self.root}{' closed' if self.closed else ''}>"
