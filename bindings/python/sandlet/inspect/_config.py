"""The Inspect provider's configuration: a sandlet sandbox (or several named ones) described by a model,
a YAML/JSON file of that model, a recipe (Dockerfile subset) or a compose-file subset.

Every refusal names the file, the field and the reason: a task author should never have to guess why
their sandbox config was not accepted.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field


class SandletServiceConfig(BaseModel):
    """One sandbox. Its root filesystem comes from exactly one of ``environment`` (a sandlet environment or
    an imported OCI image), ``layers`` (store layers or host directories, lowest first) or ``recipe`` (a
    Dockerfile subset built with ``sandlet build`` once per task; ``context`` defaults to its directory)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Optional[str] = None  # "container" (default) or "microvm": a kernel of its own
    environment: Optional[str] = None
    layers: List[str] = Field(default_factory=list)
    recipe: Optional[str] = None
    context: Optional[str] = None
    build_args: Dict[str, str] = Field(default_factory=dict)
    user: Optional[str] = None
    workdir: Optional[str] = None
    env: Dict[str, str] = Field(default_factory=dict)
    hostname: Optional[str] = None
    cpus: Optional[float] = None
    memory: Optional[Union[int, str]] = None
    pids: Optional[int] = None
    disk: Optional[Union[int, str]] = None
    network: Optional[Union[str, Dict[str, Any]]] = None
    labels: Dict[str, str] = Field(default_factory=dict)
    policy: Optional[Dict[str, Any]] = None

    def check(self, where: str) -> None:
        sources = [name for name in ("environment", "layers", "recipe") if getattr(self, name)]
        if len(sources) != 1:
            raise ValueError(f"{where}: give exactly one of environment, layers or recipe "
                             f"(got {', '.join(sources) if sources else 'none'})")
        if self.context and not self.recipe:
            raise ValueError(f"{where}: 'context' applies to a recipe only")

    def spec_fields(self) -> Dict[str, Any]:
        """The sandbox spec's fields (sandlet.h's JSON schema), without the root filesystem's source."""
        doc: Dict[str, Any] = {}
        for name in ("backend", "user", "workdir", "hostname", "network", "policy"):
            if getattr(self, name) is not None:
                doc[name] = getattr(self, name)
        if self.env:
            doc["env"] = dict(self.env)
        limits = {k: getattr(self, k) for k in ("cpus", "memory", "pids", "disk") if getattr(self, k) is not None}
        if limits:
            doc["limits"] = limits
        if self.labels:
            doc["labels"] = dict(self.labels)
        return doc


class SandletSandboxConfig(SandletServiceConfig):
    """The provider's config: one sandbox (the fields of SandletServiceConfig), or ``services``, several
    named sandboxes of one sample, the first being Inspect's ``default`` unless one is named so. ``root`` is
    the runtime root (default: $SANDLET_ROOT, else the library's default)."""

    services: Dict[str, SandletServiceConfig] = Field(default_factory=dict)
    root: Optional[str] = None

    def resolved_services(self) -> Dict[str, SandletServiceConfig]:
        """The named sandboxes, the default first."""
        if not self.services:
            single = SandletServiceConfig(**self.model_dump(exclude={"services", "root"}))
            single.check("sandlet sandbox config")
            return {"default": single}
        own = {k: v for k, v in self.model_dump(exclude={"services", "root"}).items()
               if v not in (None, [], {})}
        if own:
            raise ValueError(f"sandlet sandbox config: with 'services', give {', '.join(sorted(own))} per service")
        for name, svc in self.services.items():
            svc.check(f"sandlet sandbox config: service '{name}'")
        names = list(self.services)
        first = "default" if "default" in self.services else names[0]
        return {first: self.services[first], **{n: self.services[n] for n in names if n != first}}


# Compose keys taken (their sandlet meaning) and keys accepted as having nothing to do here.
_COMPOSE_IGNORED = frozenset({"command", "entrypoint", "init", "tty", "stdin_open", "restart", "container_name",
                              "healthcheck", "platform", "pull_policy", "x-local", "x-default"})


def _compose_service(name: str, svc: Mapping[str, Any], base: Path, where: str) -> SandletServiceConfig:
    if not isinstance(svc, Mapping):
        raise ValueError(f"{where}: service '{name}' is not a mapping")
    out: Dict[str, Any] = {}
    for key, value in svc.items():
        field = f"{where}: services.{name}.{key}"
        if key in _COMPOSE_IGNORED:
            continue
        if key == "image":
            out["environment"] = str(value)
        elif key == "build":
            ctx, dockerfile = (value, "Dockerfile") if isinstance(value, str) else (
                value.get("context", "."), value.get("dockerfile", "Dockerfile"))
            if isinstance(value, Mapping):
                unknown = set(value) - {"context", "dockerfile", "args"}
                if unknown:
                    raise ValueError(f"{field}: {', '.join(sorted(unknown))} not supported (context, dockerfile, args are)")
                if value.get("args"):
                    out["build_args"] = _mapping_or_list(value["args"], f"{field}.args")
            context = (base / str(ctx)).resolve()
            out["recipe"] = str(context / str(dockerfile))
            out["context"] = str(context)
        elif key == "user":
            out["user"] = str(value)
        elif key == "working_dir":
            out["workdir"] = str(value)
        elif key == "hostname":
            out["hostname"] = str(value)
        elif key == "environment":
            out["env"] = _mapping_or_list(value, field)
        elif key in ("mem_limit", "memory"):
            out["memory"] = value
        elif key == "cpus":
            out["cpus"] = float(value)
        elif key == "pids_limit":
            out["pids"] = int(value)
        elif key == "network_mode":
            if value != "none":
                raise ValueError(f"{field}: only 'none' is supported (a sandbox's network is its own; see "
                                 "the sandlet 'network' field for an allow-list)")
            out["network"] = "none"
        elif key == "labels":
            out["labels"] = _mapping_or_list(value, field)
        elif key == "deploy":
            limits = (value or {}).get("resources", {}).get("limits", {})
            if "memory" in limits:
                out["memory"] = limits["memory"]
            if "cpus" in limits:
                out["cpus"] = float(limits["cpus"])
        elif key.startswith("x-sandlet"):
            out.update(value or {})
        else:
            raise ValueError(f"{field}: not supported by the sandlet provider (supported: image, build, user, "
                             "working_dir, hostname, environment, mem_limit, cpus, pids_limit, network_mode: none, "
                             "labels, deploy.resources.limits, x-sandlet)")
    svc_config = SandletServiceConfig(**out)
    svc_config.check(f"{where}: service '{name}'")
    return svc_config


def _mapping_or_list(value: Any, field: str) -> Dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        out = {}
        for item in value:
            key, sep, val = str(item).partition("=")
            if not sep:
                raise ValueError(f"{field}: '{item}' is not KEY=VALUE")
            out[key] = val
        return out
    raise ValueError(f"{field}: expected a mapping or a list of KEY=VALUE")


def config_from_compose(doc: Mapping[str, Any], base: Path, where: str) -> SandletSandboxConfig:
    services = doc.get("services")
    if not isinstance(services, Mapping) or not services:
        raise ValueError(f"{where}: no services")
    unknown = set(doc) - {"services", "version", "name", "x-sandlet", "x-inspect"}
    if unknown:
        raise ValueError(f"{where}: top-level {', '.join(sorted(unknown))} not supported (volumes and networks "
                         "are not sandlet concepts: mount directories or set 'network' per service)")
    named = {str(n): _compose_service(str(n), s, base, where) for n, s in services.items()}
    default = next((n for n, s in services.items() if isinstance(s, Mapping) and s.get("x-default")), None)
    if default is not None and default != "default":
        named = {"default": named.pop(str(default)), **named}
    return SandletSandboxConfig(services=named, root=(doc.get("x-sandlet") or {}).get("root"))


def load_config(config: Union[None, str, BaseModel, Mapping[str, Any]]) -> SandletSandboxConfig:
    """The provider's config from what Inspect passes: a SandletSandboxConfig, a dict of its fields, or a
    file name: ``*.yaml``/``*.yml``/``*.json`` holding its fields, a compose file (a document with
    ``services`` in compose form, e.g. ``compose.yaml``), or a recipe (``Dockerfile`` or ``*.Dockerfile``)."""
    if config is None:
        raise ValueError("the sandlet sandbox needs a config: an environment name, layers or a recipe "
                         "(e.g. sandbox=('sandlet', 'sandlet.yaml'), or a SandletSandboxConfig)")
    if isinstance(config, SandletSandboxConfig):
        return config
    if isinstance(config, BaseModel):
        return SandletSandboxConfig(**config.model_dump())
    if isinstance(config, Mapping):
        return SandletSandboxConfig(**config)
    path = Path(config).expanduser()
    if not path.is_file():
        raise ValueError(f"sandlet sandbox config {config!r}: no such file")
    where = str(path)
    name = path.name
    if name == "Dockerfile" or name.endswith(".Dockerfile") or name.startswith("Dockerfile."):
        return SandletSandboxConfig(recipe=str(path.resolve()), context=str(path.resolve().parent))
    text = path.read_text()
    if name.endswith(".json"):
        doc = json.loads(text)
    else:
        import yaml  # inspect-ai depends on PyYAML

        doc = yaml.safe_load(text)
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where}: expected a mapping at the top level")
    services = doc.get("services")
    compose_like = isinstance(services, Mapping) and any(
        isinstance(s, Mapping) and ({"image", "build"} & set(s)) for s in services.values())
    if compose_like:
        return config_from_compose(doc, path.parent, where)
    cfg = SandletSandboxConfig(**doc)
    return _relative_to(cfg, path.parent)


def _relative_to(cfg: SandletSandboxConfig, base: Path) -> SandletSandboxConfig:
    """Recipe, context and directory layers of a config file are relative to the file's directory."""
    def fix(svc: SandletServiceConfig) -> Dict[str, Any]:
        d = svc.model_dump()
        for key in ("recipe", "context"):
            if d.get(key) and not os.path.isabs(d[key]):
                d[key] = str((base / d[key]).resolve())
        d["layers"] = [str((base / layer).resolve()) if layer.startswith(".") else layer for layer in d["layers"]]
        return d

    top = fix(cfg)
    top["services"] = {n: SandletServiceConfig(**fix(s)) for n, s in cfg.services.items()}
    return SandletSandboxConfig(**top)
