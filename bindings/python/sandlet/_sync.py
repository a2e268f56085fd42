"""The synchronous API: Runtime and Sandbox. Every blocking call releases the GIL."""
from __future__ import annotations

import json
import os
import threading
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _audit, _sandlet
from ._common import (Command, SpecLike, build_spec, capability_names, env_defaults_json, exec_args, import_kwargs,
                      listed, run_args, call_args)
from ._build import BuildProgressFn, NetworkArg, SecretsArg, build_call_args, handle as build_handle
from ._errors import Error, FailedPrecondition, InvalidArgument, command_error, os_flavoured
from ._operations import RuntimeOperations
from ._fork import Excludes, ForkResult, fork_args, fork_result, snapshot_args, snapshot_fork_args
from ._store import StoreURL, call_store, lazy_flag, open_kwargs
from ._session import Session
from ._stream import ExecStream
from ._copy import SandboxCopies

PathLike = Union[str, "os.PathLike[str]"]
ProgressFn = Callable[[int, int, int], None]


def _plain_argv(argv: List[Any]) -> bool:
    return bool(argv) and all(type(a) is str for a in argv)


class Sandbox(SandboxCopies):
    """One sandbox. Use it as a context manager: leaving the block of a sandbox made by ``create`` with the
    default ``owned`` lifetime destroys it before going on; a ``detached`` or attached one is only closed
    (it lives on; ``destroy()`` removes it for good).

    Thread-safe: several threads may exec in one sandbox at once.
    """

    def __init__(self, handle: _sandlet.Sandbox, owned: bool = False) -> None:
        self._h = handle
        self._owned = owned  # created here with lifetime "owned": the with-block ends its life

    @property
    def id(self) -> str:
        """The sandbox id (attach to it from another process with ``Runtime.attach``)."""
        return self._h.id

    @property
    def closed(self) -> bool:
        return self._h.closed

    def exec(
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
        """Runs a command and waits for it and everything it started.

        ``cmd``: a string (run by ``/bin/sh -c``) or an argv sequence. A timeout kills every process of the
        command and sets ``timed_out``; Ctrl-C (KeyboardInterrupt) kills them too. A command that cannot be
        started raises NotFound/PermissionDenied; one that ran and failed is a result with ``exit_code != 0``
        (``check=True`` raises CommandFailed instead). ``tty=True`` runs it on a pseudo-terminal of
        ``tty_size`` (rows, columns; default 24 x 80): all its output is stdout, with ``\r\n`` line ends.
        """
        try:
            if type(cmd) is list and not (env or cwd or user or stdin or timeout or output_limit or tty
                                          or kill_on_output_limit or keep_background or toolkit) and _plain_argv(cmd):
                r = self._h.exec(cmd)  # the common case, without the argument plumbing
            else:
                r = self._h.exec(*exec_args(cmd, env, cwd, user, stdin, timeout, output_limit,
                                            kill_on_output_limit, keep_background, toolkit, False, tty, tty_size))
        except Error as e:
            raise command_error(e) from None
        return r.check() if check else r

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
    ) -> "ExecStream":
        """Starts a command and yields its output as it arrives: ``for stream, data in sb.exec_stream(...)``
        (stream is sandlet.STDOUT or sandlet.STDERR); ``.result`` then holds the exit status. Leaving the
        loop early (or closing the stream) kills the command.

        ``open_stdin=True`` keeps its stdin open after ``stdin``: feed it with ``.write(data)``, end it with
        ``.close_stdin()``. ``tty=True`` gives it a pseudo-terminal (``tty_size`` rows and columns; resize
        with ``.resize(rows, cols)``): what is written is typed into it, all output comes as STDOUT."""
        return ExecStream(self._h, exec_args(cmd, env, cwd, user, stdin, timeout, output_limit,
                                             kill_on_output_limit, keep_background, toolkit, open_stdin, tty,
                                             tty_size))

    def session(
        self,
        shell: Optional[Sequence[str]] = None,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        output_limit: Optional[int] = None,
    ) -> "Session":
        """Starts a shell kept alive across calls: ``session.run("cd /src && make")`` returns that command's
        stdout, stderr and exit code; the directory, variables and background jobs stay for the next run.
        ``shell`` (an argv reading commands from stdin) defaults to bash where the sandbox has it, else
        /bin/sh. See sandlet.Session."""
        return Session.open(self._h, shell, env, cwd, user, output_limit)

    def write_file(self, path: str, data: Union[bytes, str], mode: int = 0o644) -> None:
        """Creates or replaces ``path`` inside the sandbox (parents created; symlinks cannot escape).
        Errors the sandbox's kernel gave are also OSErrors (PermissionError, IsADirectoryError, ...)."""
        try:
            self._h.write_file(path, data.encode() if isinstance(data, str) else bytes(data), mode)
        except Error as e:
            raise os_flavoured(e, path) from None

    def read_file(self, path: str, max_bytes: int = 0) -> bytes:
        """Reads a whole file (0 = up to 64 MiB; a larger file raises OutOfRange). Errors the sandbox's
        kernel gave are also OSErrors (FileNotFoundError, PermissionError, IsADirectoryError, ...)."""
        try:
            return self._h.read_file(path, max_bytes)
        except Error as e:
            raise os_flavoured(e, path) from None

    def info(self) -> Dict[str, Any]:
        """The sandbox's record: id, state, backend, spec (its labels, env, limits, ...), environment,
        layers, created_at, deadline, ..."""
        return json.loads(self._h.info_json())

    def destroy(self) -> None:
        """Kills every process and removes the sandbox (also a detached one). The handle stays usable for
        close() only."""
        self._h.destroy()

    def pause(self) -> None:
        """Freezes every process of the sandbox (memory, files and connections stay). An exec or file call
        resumes it first."""
        self._h.pause()

    def resume(self) -> None:
        """Lets a paused sandbox's processes run on."""
        self._h.resume()

    def net_update(self, allow: Sequence[Dict[str, Any]] = (), *, dns: Sequence[str] = ()) -> None:
        """Replaces the network allowlist in one step: `allow` holds rules as in the spec's "network"
        ({"cidr": "10.0.0.0/8", "ports": "443", "protocol": "tcp"}); empty denies everything but the
        sandbox's own loopback. Open connections stay, but their packets to destinations no longer allowed
        are dropped (docs/NETWORK.md)."""
        self._h.net_update(json.dumps({"allow": list(allow), "dns": list(dns)}))

    def net_stats(self) -> Dict[str, Any]:
        """Network denials so far: connect_denied, sendmsg_denied, egress_dropped (and "filtered")."""
        return json.loads(self._h.net_stats_json())

    def seccomp_stats(self) -> Dict[str, Any]:
        """System calls the seccomp policy refused so far: "denied", "by_syscall" and the last 64 "records"."""
        return json.loads(self._h.seccomp_stats_json())

    def snapshot(
        self,
        *,
        exclude: Excludes = (),
        default_excludes: bool = True,
        full: bool = False,
        name: Optional[str] = None,
        max_depth: int = 0,
    ) -> Dict[str, Any]:
        """Packs the sandbox's changes to its files (since its last snapshot; ``full=True``: since it was
        created) into a layer of the store and returns the result: {"layer" (the layer object: "digest",
        "stack" of the store layers below it, ...), "existed", "frozen_ns", "total_ns", "entries", "bytes",
        "flattened"}. The sandbox keeps running; its processes are frozen only for a short second pass.
        ``rt.create(layers=[digest])`` restores it with its stack below. Only store layers are stacked: a
        sandbox on host directories gives a snapshot of its changes alone.

        ``exclude``: absolute paths left out with all below them (components may be fnmatch globs). Unless
        ``default_excludes=False``, /tmp and /var/tmp's contents, /root/.cache and apt's caches are left out
        too. ``name`` names the layer (a named snapshot is kept by layer gc). ``max_depth`` >= 2: merge the
        chain below into one layer once it is that deep (0: the runtime's setting). Unimplemented where the
        backend cannot snapshot."""
        return json.loads(self._h.snapshot(*snapshot_args(exclude, default_excludes, full, name, max_depth)))

    def fork(
        self,
        n: int,
        *,
        labels: Optional[Mapping[str, str]] = None,
        exclude: Excludes = (),
        copy_secrets: bool = False,
    ) -> "ForkResult[Sandbox]":
        """One snapshot, then ``n`` (1..1024) children made on it at once; returns when each is ready or has
        failed. Each child has exactly this sandbox's files at the snapshot (nothing excluded unless
        ``exclude`` says so) on a writable layer of its own, its spec (limits, env, network, lifetime), a new
        id, hostname "<this one's>-<i>", a fresh SANDLET_SEED and /etc/machine-id, this sandbox's labels plus
        ``labels`` and "sandlet.parent", "sandlet.snapshot", "sandlet.fork_index". Secrets only with
        ``copy_secrets=True``. Processes are not forked (the container backend forks files).

        Raises only when nothing could be forked (bad input, the snapshot failed); a child that failed has
        its exception in ``errors``. Use the result as a context manager: its exit destroys owned children.
        """
        args = fork_args(n, labels, exclude, copy_secrets)
        owned = self._owned or self._lifetime() != "detached"
        return fork_result(ForkResult, Sandbox, owned, self._h.fork(*args))

    def _lifetime(self) -> str:
        return str(self.info().get("spec", {}).get("lifetime", "owned"))

    def close(self) -> None:
        """Releases the handle (idempotent). Closing the last handle of an ``owned`` sandbox destroys it in
        the background (leaving a ``with`` block destroys it before returning)."""
        self._h.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owned and not self._h.closed:
            try:
                self._h.destroy()
            except FailedPrecondition:
                pass  # destroyed already, or its runtime is closed (which destroyed it)
        self.close()

    def __repr__(self) -> str:
        return f"<sandlet.Sandbox {self.id}{' closed' if self.closed else ''}>"


class Runtime(RuntimeOperations):
    """A sandlet runtime rooted at a state directory (default $SANDLET_ROOT, else /var/lib/sandlet).

    Opening sweeps what crashed runs left behind. Closing (or leaving the ``with`` block) destroys every
    ``owned`` sandbox this runtime created. One per process is typical; it is thread-safe.

    ``store``: the remote store of ``layer_push``/``layer_pull`` when they are given none (a URL: a
    directory, http(s)://, s3://...; default $SANDLET_STORE). The node's loader of lazy layers takes
    ``cache_max_bytes`` (default 10 GiB), ``fetch_unit`` (bytes per store request, a multiple of 64 KiB up
    to 64 MiB; default 64 KiB), ``fetch_concurrency`` (1..256; default 8) and ``fill_timeout_ms`` (a read
    of data not fetched yet fails with EIO after it, >= 100; default 60000) when this runtime starts it;
    None or 0 is the default, a value out of range raises InvalidArgument naming it.

    ``audit_max_bytes`` (>= 65536; default 64 MiB) and ``audit_keep`` (<= 1000; default 5): rotation of the
    root's audit log as this runtime writes it (see ``audit``).

    ``registries``: how OCI registries are reached, a dict or its JSON (docs/REGISTRIES.md; default
    $SANDLET_REGISTRIES).
    """

    def __init__(
        self,
        root: Optional[PathLike] = None,
        *,
        worker_threads: int = 0,
        gc_on_open: bool = True,
        warm_pool: bool = True,
        create_soon: bool = False,
        store: Optional[StoreURL] = None,
        cache_max_bytes: Optional[int] = None,
        fetch_unit: Optional[int] = None,
        fetch_concurrency: Optional[int] = None,
        fill_timeout_ms: Optional[int] = None,
        audit_max_bytes: Optional[int] = None,
        audit_keep: Optional[int] = None,
        registries: Union[None, str, Dict[str, Any]] = None,
    ) -> None:
        # create_soon: a create follows at once (a one-shot script); its network namespace is made
        # during the open.
        loader = open_kwargs(store, cache_max_bytes, fetch_unit, fetch_concurrency, fill_timeout_ms, registries)
        self._h = _sandlet.Runtime(os.fspath(root) if root is not None else None, worker_threads,
                                   not gc_on_open, not warm_pool, create_soon, **loader,
                                   audit_keep=audit_keep or 0, audit_max_bytes=audit_max_bytes or 0)

    @property
    def root(self) -> str:
        return self._h.root

    @property
    def closed(self) -> bool:
        return self._h.closed

    @property
    def audit_path(self) -> str:
        """The live file of the root's audit log ("<root>/audit/audit.jsonl"; rotated files beside it)."""
        return self._h.audit_path

    def audit(
        self,
        sandbox: Optional[str] = None,
        labels: Optional[Mapping[str, str]] = None,
        since: Optional[float] = None,
        follow: bool = False,
        *,
        poll_interval: float = 0.1,
        timeout: Optional[float] = None,
    ) -> Iterator[Dict[str, Any]]:
        """The audit log's records (dicts, oldest first, rotated files included; docs/AUDIT.md): only
        ``sandbox``'s, only of sandboxes carrying every one of ``labels``, only at or after ``since`` (Unix
        seconds or a datetime). With ``follow``, keeps yielding records as they are written (across
        rotations), polling every ``poll_interval`` seconds, until ``timeout`` seconds have passed (None:
        until the caller stops iterating). The reader is independent of this runtime."""
        return _audit.audit_records(self._h.audit_path, sandbox, labels, since, follow, poll_interval, timeout)

    def create(self, spec: SpecLike = None, **fields: Any) -> Sandbox:
        """Creates a sandbox from a Spec, a dict / JSON string of the spec schema, and/or keyword fields of
        the same names (``layers=[...]``, ``environment="swe@2"``, ``env={...}``, ``limits={...}``,
        ``labels={...}``, ``lifetime="detached"``, ``mounts=["/data:/data:ro"]``, ``secrets={...}``, ...). On
        failure nothing is left behind. ``layers=[snapshot_digest]`` restores a snapshot (its whole chain).

        ``secrets``: env variables every command sees but ``info``/``list`` never show (their values read
        "<hidden>") and fork children get only with ``copy_secrets=True``; a key may not be in ``env`` too."""
        s, owned = build_spec(spec, fields)
        return Sandbox(self._h.create(s), owned=owned)

    def run(
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
        """Runs one command in a new sandbox and destroys it (the library's one-shot run: the sandbox's init
        starts the command itself, cheaper than create + exec + destroy). The spec is given as for
        ``create`` and must be owned. ``stdin``/``stdout``/``stderr``: None (the sandbox's /dev/null), a file
        descriptor, or an object with ``fileno()`` such as ``sys.stdout``: the command reads and writes it
        directly, so the result's stdout/stderr are empty. A timeout kills every process of the sandbox;
        Ctrl-C (KeyboardInterrupt, main thread) does too, and the sandbox is gone before it is raised.
        """
        s, _ = build_spec(spec, fields)
        args = run_args(cmd, env, cwd, user, timeout, stdin, stdout, stderr)
        if threading.current_thread() is not threading.main_thread():
            try:
                r = self._h.run(s, *args, -1)  # signals reach only the main thread: nothing to cancel on
            except Error as e:
                raise command_error(e) from None
            return r.check() if check else r
        # The call blocks in the library; on a helper thread, this one can take Ctrl-C and cancel it through
        # the cancel descriptor. (Waiting on an Event: a Thread.join interrupted by Ctrl-C may afterwards
        # report the thread finished while it still runs, on Python 3.11.)
        cancel_r, cancel_w = os.pipe()
        outcome: Dict[str, Any] = {}
        done = threading.Event()

        def call() -> None:
            try:
                outcome["result"] = self._h.run(s, *args, cancel_r)
            except BaseException as e:  # noqa: B036 -- re-raised in the caller's thread
                outcome["error"] = e
            finally:
                done.set()

        threading.Thread(target=call, name="sandlet-run", daemon=True).start()
        try:
            while not done.wait(0.1):
                pass
        except KeyboardInterrupt:
            os.write(cancel_w, b"x")
            done.wait()  # the sandbox is gone when the library returns
            raise
        finally:
            if done.is_set():
                os.close(cancel_r)
                os.close(cancel_w)
        if "error" in outcome:
            raise command_error(outcome["error"]) from None
        r = outcome["result"]
        return r.check() if check else r

    def call(
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
        """One short stateless call (FnCall, docs/FNCALL.md): ``cmd`` (or ``script=``, run by /bin/sh -c) in a
        pooled running container of the spec's environment, given back to the pool only if the call left
        nothing behind. ``stdin``: bytes or str. Returns a result like ``Sandbox.exec``'s."""
        s, _ = build_spec(spec, fields)
        args = call_args(cmd, script, env, stdin, timeout)
        try:
            r = self._h.call(s, *args)
        except Error as e:
            raise command_error(e) from None
        return r.check() if check else r

    def fork_snapshot(
        self,
        snapshot: str,
        n: int,
        spec: SpecLike = None,
        *,
        labels: Optional[Mapping[str, str]] = None,
        copy_secrets: bool = False,
        **fields: Any,
    ) -> "ForkResult[Sandbox]":
        """``n`` children restored from the snapshot layer ``snapshot`` (digest, unique prefix or name), made
        at once, each with the spec given as for ``create`` (limits, env, labels, lifetime, ...; its layers
        and environment are the snapshot's) and the identity of a fork child (see ``Sandbox.fork``; no
        "sandlet.parent" label). NotFound for an unknown snapshot, InvalidArgument for a layer that is not
        one. ``result.snapshot`` holds the layer object under "layer"."""
        args, owned = snapshot_fork_args(snapshot, n, spec, fields, labels, copy_secrets)
        return fork_result(ForkResult, Sandbox, owned, self._h.fork_snapshot(*args))

    def attach(self, sandbox_id: str) -> Sandbox:
        """A handle on an existing sandbox, also one created by another (maybe dead) process."""
        return Sandbox(self._h.attach(sandbox_id))

    def list(self, label: Optional[str] = None, *, labels: Optional[Mapping[str, str]] = None) -> List[Dict[str, Any]]:
        """Every sandbox under this root, from every process (records as in ``Sandbox.info``).
        ``label="key=value"`` keeps those carrying that label; ``labels={...}`` those carrying all of them."""
        wanted = dict(labels or {})
        if label:
            key, sep, value = label.partition("=")
            if not sep or not key:
                raise InvalidArgument(f"label: {label!r} is not key=value", 3)
            wanted[key] = value
        first = next(iter(wanted.items()), None)
        rows = listed(self._h.list(f"{first[0]}={first[1]}" if first else ""))
        return [r for r in rows if all(r.get("spec", {}).get("labels", {}).get(k) == v for k, v in wanted.items())]

    def gc(self) -> int:
        """Removes what crashed or expired runs left behind (and the node's idle "sandlet" parent
        cgroups); returns how many sandboxes went."""
        return self._h.gc()

    def backends(self) -> List[Dict[str, Any]]:
        """Backends of this build and whether this host can run each (and if not, why), with what each
        supports beyond create, exec, files and destroy: "capabilities", a list of "prepare_ahead" (warm
        pool), "one_shot", "pause", "snapshot", "fork", "store_layers", "layer_images", "set_limits",
        "reuse_check", "machine_state"; "summary" (what it is for) and "details" (its own facts, e.g. a VM
        backend's "accelerator": "kvm" or "tcg", and why)."""
        return [{"name": n, "available": a, "reason": r, "capabilities": capability_names(c), "summary": s,
                 "details": json.loads(d) if d else {}}
                for n, a, r, c, s, d in self._h.backends()]

    def features(self) -> Dict[str, Any]:
        """Every kernel feature sandlet uses on this host, probed: present or not, and the path taken;
        and the guarantees this host weakens (what ``sandlet doctor`` prints; see sandlet.h)."""
        return json.loads(self._h.features_json())

    # ---- layer store and environments (blocking) ----

    def layer_import(
        self,
        path: PathLike,
        *,
        role: Optional[str] = None,
        name: Optional[str] = None,
        parent: Optional[str] = None,
        dedupe: bool = True,
        progress: Optional[ProgressFn] = None,
    ) -> Dict[str, Any]:
        """Imports a directory, tar / tar.gz / tar.zst, OCI layout or ``docker save`` tarball as
        content-addressed EROFS layer(s). Returns {"layers": [...], "existed": [...], "environment": ...}.
        ``progress(bytes, total_bytes, files)`` is called every few hundred files."""
        return json.loads(self._h.layer_import(os.fspath(path), progress=progress,
                                               **import_kwargs(role, name, parent, dedupe)))

    def layer_export(self, ref: str, path: PathLike, *, zstd_level: int = 0) -> Dict[str, Any]:
        """Writes layer ``ref`` to one file (a pax tar; zstd when ``path`` ends in ".zst") that
        ``layer_import`` reads on any machine, giving the same digest, role, parent and stack. Atomic.
        Returns {"digest", "path", "bytes", "files", "compression"}."""
        return json.loads(self._h.layer_export(ref, os.fspath(path), zstd_level))

    def layer_list(self) -> List[Dict[str, Any]]:
        return json.loads(self._h.layer_list())

    def layer_inspect(self, ref: str) -> Dict[str, Any]:
        """A layer by digest, unique hex prefix (>= 12) or name."""
        return json.loads(self._h.layer_inspect(ref))

    def layer_remove(self, ref: str) -> None:
        """Refused (FailedPrecondition) while an environment or a live sandbox uses it."""
        self._h.layer_remove(ref)

    def layer_gc(self) -> Dict[str, Any]:
        """Removes unreferenced layers, then unused data: {"removed_layers","removed_blobs","bytes_freed"}."""
        return json.loads(self._h.layer_gc())

    def layer_merge(self, refs: Sequence[str], *, role: Optional[str] = None, name: Optional[str] = None,
                    dedupe: bool = True) -> Dict[str, Any]:
        """Flattens >= 2 consecutive layers (lowest first) into one."""
        return json.loads(self._h.layer_merge(list(refs), **import_kwargs(role, name, None, dedupe)))

    # ---- remote stores and lazy layers (blocking; see sandlet_store.h, docs/LAZY.md) ----

    def layer_push(self, ref: str, store: Optional[StoreURL] = None) -> Dict[str, Any]:
        """Sends layer ``ref`` with the layers it needs (parent chain, snapshot stack) and its name to
        ``store`` (None: the runtime's). Returns {"digest", "store", "layers", "objects_sent", "bytes_sent",
        "objects_skipped"}. InvalidArgument: no store anywhere, or a bad URL; Unavailable: unreachable."""
        return json.loads(self._h.layer_push(ref, call_store(store)))

    def layer_pull(self, ref: str, store: Optional[StoreURL] = None, lazy: bool = False) -> Dict[str, Any]:
        """Fetches layer ``ref`` (a digest or a name the store holds) with the layers it needs into this
        runtime's store. ``lazy=True``: metadata only; the node's loader fetches data on first read. Returns
        {"digest", "store", "layers", "lazy", "eager_reason", "bytes_fetched", "image_bytes"}."""
        return json.loads(self._h.layer_pull(ref, call_store(store), lazy_flag(lazy)))

    def loader_status(self) -> Dict[str, Any]:
        """The node's loader (starts none): {"running", "pid", "fetcher_pid", "started", "settings", "cache",
        "layers": [per lazy layer: "digest", "name", "image_bytes", "fetched_bytes", "hits", "misses", ...]}."""
        return json.loads(self._h.loader_status())

    def env_create(self, name: str, layers: Sequence[str], *, env: Optional[Mapping[str, str]] = None,
                   workdir: Optional[str] = None, user: Optional[str] = None) -> Dict[str, Any]:
        """A new version of environment ``name`` (layers lowest first, plus env/workdir/user defaults)."""
        return json.loads(self._h.env_create(name, list(layers), env_defaults_json(env, workdir, user)))

    def env_list(self) -> List[Dict[str, Any]]:
        return json.loads(self._h.env_list())

    def env_remove(self, name: str) -> None:
        self._h.env_remove(name)

    # ---- builds ----

    def build(self, recipe: PathLike, context: PathLike = ".", *, tag: Optional[str] = None,
              build_args: Optional[Mapping[str, str]] = None, no_cache: bool = False, keep_tmp: bool = False,
              progress: Optional[BuildProgressFn] = None, secrets: Optional[SecretsArg] = None,
              network: Optional[NetworkArg] = None) -> Dict[str, Any]:
        """Builds an environment from ``recipe`` (a Dockerfile subset: docs/BUILD.md) with ``context`` as the
        directory COPY reads from, and returns the result (see sandlet.h: "layers", "environment" when
        ``tag`` names one, "env", "workdir", "user", "labels", "steps", "cached_steps", "sandboxes", ...).
        ``progress(BuildEvent)`` runs on this thread as each step begins and with each RUN's output. Bad input
        raises InvalidArgument before any sandbox is made; a failing step raises Aborted naming it. Ctrl-C
        cancels the build (nothing it made is left) and then raises KeyboardInterrupt. ``secrets``: {"id": file}
        or ["id=NAME,src=FILE", ...] for RUN --mount=type=secret; ``network``: RUN's policy (docs/BUILD.md)."""
        queue, (cancel_r, cancel_w) = _sandlet.CompletionQueue(), os.pipe()
        try:
            build_call_args(self._h, recipe, context, tag, build_args, no_cache, keep_tmp, cancel_r,
                            progress is not None, secrets, network)(queue, 1)
            final: Any = None
            try:
                while final is None:
                    queue.wait(0.1)  # returns on a signal too: Python then runs its handlers
                    for _token, kind, payload in queue.drain():
                        done, value = build_handle(kind, payload, progress)
                        if done:
                            final = (kind, value)
            except BaseException:
                os.write(cancel_w, b"x")  # the build ends soon, cleaning up; wait for it
                while final is None:
                    queue.wait(0.1)
                    for _token, kind, payload in queue.drain():
                        if kind != _sandlet.COMPLETION_BUILD_EVENT:
                            final = (kind, payload)
                raise
        finally:
            os.close(cancel_r)
            os.close(cancel_w)
        kind, value = final
        if kind == _sandlet.COMPLETION_ERROR:
            raise value
        return json.loads(value)

    def close(self) -> None:
        """Destroys the owned sandboxes and frees the runtime (idempotent)."""
        self._h.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sandlet.Runtime {self.root}{' closed' if self.closed else ''}>"
