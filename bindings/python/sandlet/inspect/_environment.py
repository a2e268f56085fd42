"""Inspect's SandboxEnvironment over sandlet sandboxes.

A sample's sandboxes are created in-process (no daemon, no `docker exec` per call) and are owned by the
eval's process: when it dies — Ctrl-C, a crash, a killed job — the library destroys them, so nothing leaks
past the eval. Every exec keeps the processes a tool starts in the background (Inspect's tool servers), and
a timeout kills the command's whole tree, background processes included.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import posixpath
from pathlib import Path
from typing import Any, Dict, List, Literal, Tuple, Union, overload

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)
from inspect_ai.util._sandbox.environment import SandboxUnavailableError
from pydantic import BaseModel

import sandlet

from .._frameworks import close_runtimes, runtime_for  # noqa: F401 (close_runtimes: for the tests and benches)
from ._config import SandletSandboxConfig, SandletServiceConfig, load_config

log = logging.getLogger(__name__)

# Labels every sandbox of this provider carries (cleanup and `sandlet ls -l` find them by these).
PROVIDER_LABEL = "inspect.provider"
TASK_LABEL = "inspect.task"

_builds: Dict[Tuple[str, ...], str] = {}  # (root, recipe, context, args...) -> environment name


def _root_of(cfg: SandletSandboxConfig) -> str:
    return cfg.root or os.environ.get("SANDLET_ROOT", "")


async def _environment_of_recipe(rt: sandlet.AsyncRuntime, root: str, svc: SandletServiceConfig) -> str:
    """Builds the service's recipe once per process (the build cache makes a rebuild cheap anyway)."""
    assert svc.recipe is not None
    recipe = str(Path(svc.recipe).resolve())
    context = str(Path(svc.context).resolve()) if svc.context else str(Path(recipe).parent)
    key = (root, recipe, context, *sorted(f"{k}={v}" for k, v in svc.build_args.items()))
    name = _builds.get(key)
    if name is None:
        digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
        name = f"inspect-{digest}"
        try:
            await rt.build(recipe, context, tag=name, build_args=svc.build_args or None)
        except sandlet.Error as e:
            raise RuntimeError(f"sandlet build of {recipe} failed: {e}") from None
        _builds[key] = name
    return name


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@sandboxenv(name="sandlet")
class SandletSandboxEnvironment(SandboxEnvironment):
    """A sandlet sandbox as an Inspect sandbox (``--sandbox sandlet:CONFIG``; see sandlet.inspect)."""

    def __init__(self, sandbox: sandlet.AsyncSandbox, workdir: str, service: str) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.workdir = workdir
        self.service = service

    # ---- lifecycle ---------------------------------------------------------------------------------------

    @classmethod
    def config_files(cls) -> List[str]:
        return ["sandlet.yaml", "sandlet.yml", "sandlet.json"]

    @classmethod
    def config_deserialize(cls, config: Dict[str, Any]) -> BaseModel:
        return SandletSandboxConfig(**config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        cfg = load_config(config)
        root = _root_of(cfg)
        rt = await runtime_for(root)
        for svc in cfg.resolved_services().values():
            if svc.recipe:
                await _environment_of_recipe(rt, root, svc)

    @classmethod
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: Dict[str, str]) -> Dict[str, SandboxEnvironment]:
        cfg = load_config(config)
        root = _root_of(cfg)
        rt = await runtime_for(root)
        made: Dict[str, SandboxEnvironment] = {}
        try:
            for name, svc in cfg.resolved_services().items():
                made[name] = await cls._create(rt, root, task_name, name, svc)
        except BaseException:
            await asyncio.gather(*(env.sandbox.destroy() for env in made.values()  # type: ignore[attr-defined]
                                   ), return_exceptions=True)
            raise
        return made

    @classmethod
    async def _create(cls, rt: sandlet.AsyncRuntime, root: str, task_name: str, name: str,
                      svc: SandletServiceConfig) -> "SandletSandboxEnvironment":
        spec = svc.spec_fields()
        spec["labels"] = {**spec.get("labels", {}), PROVIDER_LABEL: "sandlet", TASK_LABEL: _label_value(task_name),
                          "inspect.service": _label_value(name)}
        if svc.environment:
            spec["environment"] = svc.environment
        elif svc.layers:
            spec["layers"] = list(svc.layers)
        else:
            spec["environment"] = await _environment_of_recipe(rt, root, svc)
        try:
            sb = await rt.create(spec)
        except sandlet.Error as e:
            raise RuntimeError(f"sandlet sandbox '{name}' of task {task_name}: {e}") from None
        try:
            workdir = svc.workdir or await _workdir_of(sb)
        except BaseException:
            await sb.destroy()
            raise
        return cls(sb, workdir, name)

    @classmethod
    async def sample_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                             environments: Dict[str, SandboxEnvironment], interrupted: bool) -> None:
        for env in environments.values():
            sb = env.as_type(SandletSandboxEnvironment).sandbox
            try:
                await sb.destroy()
            except sandlet.Error as e:
                log.warning("sandlet: destroying sandbox %s: %s", sb.id, e)
            finally:
                sb.close()

    @classmethod
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool) -> None:
        if not cleanup:
            return
        cfg = load_config(config)
        # Only this process's: another eval of the same task may share the root.
        await _destroy_labelled(_root_of(cfg), {PROVIDER_LABEL: "sandlet", TASK_LABEL: _label_value(task_name)},
                                owner_pid=os.getpid())

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup sandlet [ID]``: destroys this provider's sandboxes left in $SANDLET_ROOT
        (or the one named)."""
        root = os.environ.get("SANDLET_ROOT", "")
        if id:
            rt = await runtime_for(root)
            sb = await rt.attach(id)
            await sb.destroy()
            sb.close()
        else:
            await _destroy_labelled(root, {PROVIDER_LABEL: "sandlet"})

    # ---- commands and files -------------------------------------------------------------------------------

    async def exec(self, cmd: List[str], input: str | bytes | None = None, cwd: str | None = None,
                   env: Dict[str, str] | None = None, user: str | None = None, timeout: int | None = None,
                   timeout_retry: bool = True, concurrency: bool = True) -> ExecResult[str]:
        if not cmd:
            raise ValueError("exec: cmd is empty")
        stdin = input.encode("utf-8") if isinstance(input, str) else input
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        try:
            r = await self.sandbox.exec(list(cmd), env=env or None, cwd=self._path(cwd) if cwd else self.workdir,
                                        user=user, stdin=stdin, timeout=float(timeout) if timeout else None,
                                        output_limit=limit, keep_background=True)
        except PermissionError:
            raise
        except FileNotFoundError as e:  # a missing command or cwd is a failed result, as docker exec gives
            return ExecResult(False, 126 if "chdir" in str(e) else 127, "", f"{e}\n")
        except sandlet.NotFound as e:  # e.g. no such user in the sandbox's /etc/passwd
            return ExecResult(False, 126, "", f"{e}\n")
        except (sandlet.FailedPrecondition, sandlet.Unavailable) as e:
            raise self._unavailable(e) from None
        if r.timed_out:
            raise TimeoutError(f"command timed out after {timeout} s (every process it started was killed)")
        if r.stdout_truncated or r.stderr_truncated:
            raise OutputLimitExceededError(limit_str=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR,
                                           truncated_output=_decode(r.stdout if r.stdout_truncated else r.stderr))
        code = 128 + r.signal if r.signal else r.exit_code
        return ExecResult(code == 0, code, _decode(r.stdout), _decode(r.stderr))

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        try:
            await self.sandbox.write_file(self._path(file), data)
        except (sandlet.FailedPrecondition, sandlet.Unavailable) as e:
            raise self._unavailable(e) from None

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> Union[str, bytes]:
        try:
            data = await self.sandbox.read_file(self._path(file), max_bytes=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE)
        except sandlet.OutOfRange:
            raise OutputLimitExceededError(limit_str=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR,
                                           truncated_output=None) from None
        except (sandlet.FailedPrecondition, sandlet.Unavailable) as e:
            raise self._unavailable(e) from None
        return data.decode("utf-8") if text else data

    def default_polling_interval(self) -> float:
        return 0.2  # an exec here costs milliseconds, not a docker round trip

    def _unavailable(self, e: sandlet.Error) -> BaseException:
        """A sandbox that is gone or does not answer is Inspect's SandboxUnavailableError; a file error the
        sandbox's kernel gave (e.g. reading a directory: FAILED_PRECONDITION and IsADirectoryError) stays."""
        return e if isinstance(e, OSError) else SandboxUnavailableError(f"sandlet sandbox {self.sandbox.id}: {e}")

    def _path(self, path: str) -> str:
        return path if path.startswith("/") else posixpath.normpath(posixpath.join(self.workdir, path))


def _label_value(value: str) -> str:
    """Label values are short and printable; a long task name keeps a readable head and a hash."""
    clean = "".join(c if c.isalnum() or c in "-_./:" else "_" for c in value)
    return clean if len(clean) <= 63 else clean[:46] + "-" + hashlib.sha256(value.encode()).hexdigest()[:16]


async def _workdir_of(sb: sandlet.AsyncSandbox) -> str:
    info = await sb.info()
    spec = info.get("spec") or {}
    workdir = spec.get("workdir") or info.get("workdir")
    return workdir if isinstance(workdir, str) and workdir.startswith("/") else "/"


async def _destroy_labelled(root: str, labels: Dict[str, str], owner_pid: int = 0) -> None:
    rt = await runtime_for(root)
    for entry in await rt.list(labels=labels):
        if owner_pid and entry.get("owner_pid") != owner_pid:
            continue
        sid = entry["id"]
        try:
            sb = await rt.attach(sid)
            await sb.destroy()
            sb.close()
        except sandlet.Error as e:
            log.warning("sandlet: cleaning up sandbox %s: %s", sid, e)


__all__ = ["SandletSandboxEnvironment"]
