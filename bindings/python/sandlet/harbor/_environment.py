"""The Harbor ``BaseEnvironment`` over an ``AsyncRuntime`` of this process: one sandbox per trial (and one per
separate verifier), exec as argv ``bash -c COMMAND`` with the user, cwd and environment Harbor asks for, timeouts
that kill the command's whole tree, directories in and out through the tree copies (``copy_in`` / ``copy_out``)."""
from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import inspect
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.options import EnvironmentOptions
from harbor.models.task.config import NetworkMode

import sandlet

from .._frameworks import runtime_for

# Labels every sandbox of this environment carries (`sandlet ps --label harbor.session=...` finds one).
PROVIDER_LABEL = "harbor.provider"
SESSION_LABEL = "harbor.session"

_builds: Dict[tuple, str] = {}  # (root, Dockerfile path, its digest) -> the environment built from it
_build_locks: Dict[tuple, asyncio.Lock] = {}
_kept: List[sandlet.AsyncSandbox] = []  # stopped without delete: held so that they live on


def _label_value(text: str) -> str:
    """Label values are short and plain; a session id is both, a long one is cut and hashed."""
    clean = "".join(c if c.isalnum() or c in "-_." else "-" for c in text)
    if len(clean) <= 60:
        return clean
    return clean[:40] + "-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class SandletOptions(EnvironmentOptions):
    """The user's options (``--ek key=value``): Harbor validates them with this model (extra keys forbidden)."""

    root: Optional[str] = None  # the runtime root; default $SANDLET_ROOT, else the library's
    environment: Optional[str] = None  # a sandlet environment for every task, instead of its image or Dockerfile
    network: Union[str, Dict[str, Any], None] = None  # a sandlet network value, instead of the task's mode
    backend: Optional[str] = None  # "container" (the default) or "microvm"
    # The network of the RUN steps of a task's Dockerfile (a sandlet network value). Default: public
    # addresses, as Harbor's docker environment builds (installs reach package mirrors); "none" forbids it.
    build_network: Union[str, Dict[str, Any], None] = None


# What Harbor itself passes to every environment (task, paths, overrides, mounts...): never a user option.
_FRAMEWORK_KEYS = frozenset(
    name for name, p in inspect.signature(BaseEnvironment.__init__).parameters.items()
    if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and name not in ("self", "auto_mounting"))


def _host_resolvers() -> List[str]:
    """The host's nameservers (/etc/resolv.conf), at most 4, loopback ones (a local stub) left out."""
    out: List[str] = []
    try:
        with open("/etc/resolv.conf") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "nameserver":
                    try:
                        addr = ipaddress.ip_address(parts[1].split("%")[0])
                    except ValueError:
                        continue
                    if not addr.is_loopback and str(addr) not in out:
                        out.append(str(addr))
    except OSError:
        pass
    return out[:4]


class SandletEnvironment(BaseEnvironment):
    """Extra options (``--ek key=value``): ``root`` (the runtime root; default $SANDLET_ROOT, else the
    library's), ``environment`` (a sandlet environment for every task, instead of its docker_image or
    Dockerfile), ``network`` (a sandlet network value, instead of the task's network mode), ``backend``
    ("container", the default, or "microvm": each trial in a VM with a kernel of its own), ``build_network``
    (the network of a Dockerfile's RUN steps; default public addresses, "none" forbids it), and Harbor's own
    ``auto_mounting``. Any other key is refused by name (a misspelt option must not be ignored)."""

    options_model = SandletOptions
    options: SandletOptions

    @classmethod
    def parse_options(cls, kwargs: Optional[Dict[str, Any]] = None) -> SandletOptions:
        # Harbor's own message names the key; this one also lists what is accepted.
        fields = SandletOptions.model_fields
        shared = [name for name in EnvironmentOptions.model_fields if not fields[name].exclude]
        accepted = [name for name in fields if name not in EnvironmentOptions.model_fields] + shared
        unknown = sorted(k for k in (kwargs or {}) if k not in SandletOptions.model_fields)
        if unknown:
            raise ValueError(f"sandlet environment: unknown option{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(repr(k) for k in unknown)} (--ek); accepted: {', '.join(accepted)}")
        return super().parse_options(kwargs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Parsed before the base __init__ (which then keeps them), since it validates the task through them.
        user = {k: v for k, v in kwargs.items() if k not in _FRAMEWORK_KEYS}
        self.options = type(self).parse_options(user)
        self._backend = self.options.backend
        self._root = self.options.root if self.options.root is not None else os.environ.get("SANDLET_ROOT", "")
        self._environment = self.options.environment
        self._network_override = self.options.network
        self._sandbox: Optional[sandlet.AsyncSandbox] = None
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return "sandlet"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        # No network (the default of a sandbox) and allowlists of addresses and CIDRs (enforced in the kernel);
        # names need a resolver the task does not give.
        return EnvironmentCapabilities(disable_internet=True, network_allowlist=True,
                                       network_allowlist_ipv4_addresses=True, network_allowlist_ipv6_addresses=True,
                                       network_allowlist_ipv4_cidrs=True, network_allowlist_ipv6_cidrs=True)

    def _dockerfile(self) -> Path:
        return self.environment_dir / "Dockerfile"

    def _validate_definition(self) -> None:
        if self._environment or self.task_env_config.docker_image:
            return
        for compose in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml"):
            if (self.environment_dir / compose).exists():
                raise ValueError(f"sandlet environment: {self.environment_dir / compose}: compose tasks are not "
                                 "supported (name a docker_image or give an environment/Dockerfile)")
        if not self._dockerfile().exists():
            raise ValueError(f"sandlet environment: the task names no [environment].docker_image and has no "
                             f"{self._dockerfile()}")

    # ---- life -------------------------------------------------------------------------------------------

    async def _environment_name(self, rt: sandlet.AsyncRuntime, force_build: bool) -> str:
        if self._environment:
            return self._environment
        if self.task_env_config.docker_image:
            return self.task_env_config.docker_image
        recipe = self._dockerfile().resolve()
        digest = hashlib.sha256(recipe.read_bytes()).hexdigest()[:16]
        key = (self._root, str(recipe), digest)
        lock = _build_locks.setdefault(key, asyncio.Lock())
        async with lock:  # trials of one task in parallel build it once
            name = _builds.get(key)
            if name is None or force_build:
                name = f"harbor-{digest}"
                try:
                    await rt.build(recipe, recipe.parent, tag=name, no_cache=force_build, network=self._build_network())
                except sandlet.Error as e:
                    raise RuntimeError(f"sandlet build of {recipe} failed: {e}") from None
                _builds[key] = name
            return name

    def _build_network(self) -> Union[str, Dict[str, Any]]:
        if self.options.build_network is not None:
            return self.options.build_network
        # Every address but the host's own, and every name through the host's resolvers (a Dockerfile's apt
        # and pip sources are names), as Harbor's docker environment builds.
        policy: Dict[str, Any] = {"allow": [{"cidr": "0.0.0.0/0"}, {"cidr": "::/0"}]}
        resolvers = _host_resolvers()
        if resolvers:
            policy["allow"].append({"host": "*"})
            policy["dns"] = resolvers
        return policy

    def _network(self) -> Union[str, Dict[str, Any]]:
        if self._network_override is not None:
            return self._network_override
        policy = self._network_policy
        if policy is None or policy.network_mode == NetworkMode.PUBLIC:
            return {"allow": [{"cidr": "0.0.0.0/0"}, {"cidr": "::/0"}]}  # (the host's own addresses stay out)
        if policy.network_mode == NetworkMode.NO_NETWORK:
            return "none"
        return {"allow": [{"cidr": host} for host in policy.allowed_hosts]}

    def _spec(self, environment: str) -> Dict[str, Any]:
        spec: Dict[str, Any] = {
            "environment": environment,
            "hostname": "sandbox",
            "network": self._network(),
            "labels": {PROVIDER_LABEL: "sandlet", SESSION_LABEL: _label_value(self.session_id)},
        }
        if self._backend:
            spec["backend"] = self._backend
        if self.task_env_config.workdir:
            spec["workdir"] = self.task_env_config.workdir
        env = self._startup_env()
        if env:
            spec["env"] = dict(env)
        limits: Dict[str, Any] = {}
        if self._effective_cpus:
            limits["cpus"] = self._effective_cpus
        if self._effective_memory_mb:
            limits["memory"] = f"{int(self._effective_memory_mb)}M"
        if self._effective_storage_mb:
            limits["disk"] = f"{int(self._effective_storage_mb)}M"
        if limits:
            spec["limits"] = limits
        return spec

    async def start(self, force_build: bool) -> None:
        rt = await runtime_for(self._root)
        environment = await self._environment_name(rt, force_build)
        try:
            self._sandbox = await rt.create(self._spec(environment))
        except sandlet.Error as e:
            raise RuntimeError(f"sandlet: a sandbox of environment '{environment}' for {self.session_id}: {e}") from None
        try:
            await self.ensure_dirs(self._mount_targets(writable_only=True))
            await self._upload_environment_dir_after_start()
        except BaseException:
            await self.stop(delete=True)
            raise

    async def stop(self, delete: bool) -> None:
        sb, self._sandbox = self._sandbox, None
        if sb is None:
            return  # never started (or stopped already)
        if not delete:
            # Kept (`harbor run --no-delete`): owned by this process, it lives until the process ends, which
            # is as long as Harbor's job does; `sandlet ps --label harbor.session=...` shows it meanwhile.
            _kept.append(sb)
            return
        try:
            await sb.destroy()
        finally:
            sb.close()

    def _live(self) -> sandlet.AsyncSandbox:
        if self._sandbox is None:
            raise RuntimeError(f"sandlet environment {self.session_id}: not started")
        return self._sandbox

    # ---- commands -------------------------------------------------------------------------------------------

    async def exec(self, command: str, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                   timeout_sec: Optional[int] = None, user: Union[str, int, None] = None) -> ExecResult:
        sb = self._live()
        who = self._resolve_user(user)
        # Cancelling this coroutine (Harbor's own phase timeouts) kills every process of the command too.
        result = await sb.exec(["bash", "-c", command], env=self._merge_env(env), cwd=cwd,
                               user=None if who is None else str(who),
                               timeout=float(timeout_sec) if timeout_sec else None)
        if result.timed_out:
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds")  # (what Harbor's docker says)
        return ExecResult(stdout=_decode(result.stdout), stderr=_decode(result.stderr), return_code=result.exit_code
                          if result.signal == 0 else 128 + result.signal)

    # ---- files ---------------------------------------------------------------------------------------------

    async def upload_file(self, source_path: Union[Path, str], target_path: str) -> None:
        await self._live().copy_in(source_path, target_path, follow_links=True)

    async def upload_dir(self, source_dir: Union[Path, str], target_dir: str) -> None:
        await self._live().copy_in(source_dir, target_dir, follow_links=True)  # merged into an existing one

    async def download_file(self, source_path: str, target_path: Union[Path, str]) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        await self._live().copy_out(source_path, target_path, follow_links=True)

    async def download_dir(self, source_dir: str, target_dir: Union[Path, str]) -> None:
        await self._live().copy_out(source_dir, target_dir, follow_links=True)
