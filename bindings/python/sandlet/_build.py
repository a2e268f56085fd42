"""Builds from a recipe (a Dockerfile subset; docs/BUILD.md): the pieces Runtime.build and AsyncRuntime.build
share. Both run the library's asynchronous build and read its events from a completion queue, so progress
callbacks run on the caller's thread and Ctrl-C / task cancellation cancel the build (its sandbox is destroyed
and the layers it made are removed)."""
from __future__ import annotations

import json
import os
from typing import Any, Callable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import _sandlet
from ._errors import InvalidArgument

PathLike = Union[str, "os.PathLike[str]"]


class BuildEvent(NamedTuple):
    """A step begins (``stream`` 0; ``cached``: its layer comes from the build cache), or its RUN wrote
    ``data`` on ``stream`` 1 (stdout) or 2 (stderr)."""
    step: int
    steps: int
    line: int
    text: str
    cached: bool
    stream: int
    data: bytes


BuildProgressFn = Callable[[BuildEvent], None]


# Build secrets: {"id": path} (the file's bytes), or the CLI's "id=NAME,src=FILE" / "id=NAME,env=VAR" strings.
SecretsArg = Union[Mapping[str, PathLike], Sequence[str]]


def secret_args(secrets: Optional[SecretsArg]) -> List[str]:
    """The library's "id=NAME,src=FILE" form of ``secrets`` (values are read by the library, never here)."""
    if secrets is None:
        return []
    if isinstance(secrets, str):
        raise InvalidArgument("invalid build field 'secrets': a list of 'id=NAME,src=FILE' strings or a mapping id -> file")
    if isinstance(secrets, Mapping):
        out = []
        for k, v in secrets.items():
            if not isinstance(k, str) or not k or "," in k or "=" in k:
                raise InvalidArgument(f"invalid build field 'secrets': bad secret id {k!r}")
            path = os.fspath(v)
            if "," in path:
                raise InvalidArgument(f"invalid build field 'secrets': secret {k}: a path with ',' is not supported")
            out.append(f"id={k},src={path}")
        return out
    return [str(s) for s in secrets]


# A build's network: "none", a policy as JSON text, or a policy as a dict (as a sandbox spec's "network").
NetworkArg = Union[str, Mapping[str, Any]]


def network_arg(network: Optional[NetworkArg]) -> str:
    """The library's text of ``network`` ("" = none); the library checks it as a sandbox's "network"."""
    if network is None:
        return ""
    if isinstance(network, str):
        return network
    if isinstance(network, Mapping):
        return json.dumps(dict(network))
    raise InvalidArgument(f"invalid spec field 'network': expected \"none\" or a policy object, got {type(network).__name__}")


def build_call_args(runtime: Any, recipe: PathLike, context: PathLike, tag: Optional[str],
                    build_args: Optional[Mapping[str, str]], no_cache: bool, keep_tmp: bool,
                    cancel_fd: int, progress: bool,
                    secrets: Optional[SecretsArg] = None,
                    network: Optional[NetworkArg] = None) -> Callable[[_sandlet.CompletionQueue, int], None]:
    """The call that starts the build on ``queue`` with ``token``."""
    secret_sources = secret_args(secrets)
    network_text = network_arg(network)
    args: List[str] = []
    for k, v in (build_args or {}).items():
        if not isinstance(k, str) or not k or "=" in k:
            raise InvalidArgument(f"invalid build argument name {k!r}")
        args.append(f"{k}={v}")
    r, c = os.fspath(recipe), os.fspath(context)

    def begin(queue: _sandlet.CompletionQueue, token: int) -> None:
        runtime.build_async(queue, token, r, c, tag or "", args, no_cache, keep_tmp, cancel_fd, progress,
                            secret_sources, network_text)
    return begin


def handle(kind: int, payload: Any, progress: Optional[BuildProgressFn]) -> Tuple[bool, Any]:
    """(final, value) for one completion: events go to ``progress``; the final one is the result JSON text or
    the error (raised by the caller)."""
    if kind == _sandlet.COMPLETION_BUILD_EVENT:
        if progress is not None:
            progress(BuildEvent(*payload))
        return False, None
    return True, payload
