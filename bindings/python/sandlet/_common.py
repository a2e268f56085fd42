"""Argument handling shared by the synchronous and the asyncio API."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _sandlet
from ._errors import InvalidArgument

Command = Union[str, Sequence[Union[str, "os.PathLike[str]"]]]
SpecLike = Union[_sandlet.Spec, Mapping[str, Any], str, None]

# The spec's JSON fields (sandlet.h); keyword arguments of create() use the same names.
SPEC_FIELDS = frozenset({
    "backend", "layers", "environment", "env", "workdir", "hostname", "user", "limits", "network", "labels",
    "lifetime", "max_lifetime_s", "idle_timeout_s", "on_expiry", "keep_s", "accept_weaker", "mounts", "secrets",
    "policy", "toolkit",
})


def argv_of(cmd: Command) -> List[str]:
    """A string runs through ``/bin/sh -c`` (as agents write commands); a sequence is an argv."""
    if isinstance(cmd, str):
        return ["/bin/sh", "-c", cmd]
    if isinstance(cmd, (bytes, bytearray)):
        raise InvalidArgument("argv: pass str or a sequence of str, not bytes", 3)
    argv = [os.fspath(a) for a in cmd]
    if not argv:
        raise InvalidArgument("argv: empty command", 3)
    for a in argv:
        if not isinstance(a, str):
            raise InvalidArgument(f"argv: {a!r} is not a str", 3)
    return argv


def exec_args(
    cmd: Command,
    env: Optional[Mapping[str, str]],
    cwd: Optional[str],
    user: Optional[str],
    stdin: Union[bytes, str, None],
    timeout: Optional[float],
    output_limit: Optional[int],
    kill_on_output_limit: bool,
    keep_background: bool,
    toolkit: bool = False,
    open_stdin: bool = False,
    tty: bool = False,
    tty_size: Optional[Tuple[int, int]] = None,
) -> Tuple[Any, ...]:
    """The extension's exec arguments, validated, positionally (keyword matching would add to every
    call): argv, env, cwd, user, stdin, timeout_s, output_limit, kill_on_output_limit, keep_background, toolkit,
    stdin_stream, tty, tty_rows, tty_cols."""
    if timeout is not None and timeout < 0:
        raise InvalidArgument(f"timeout: must be >= 0 seconds, got {timeout}", 3)
    if output_limit is not None and output_limit < 0:
        raise InvalidArgument(f"output_limit: must be >= 0 bytes, got {output_limit}", 3)
    if isinstance(stdin, str):
        stdin = stdin.encode()
    rows, cols = 0, 0
    if tty_size is not None:
        if not tty:
            raise InvalidArgument("tty_size: only with tty=True", 3)
        try:
            rows, cols = (int(v) for v in tty_size)
        except (TypeError, ValueError):
            raise InvalidArgument(f"tty_size: expected (rows, columns), got {tty_size!r}", 3) from None
        if not (1 <= rows <= 4096 and 1 <= cols <= 4096):
            raise InvalidArgument(f"tty_size: rows and columns must be 1..4096, got {tty_size!r}", 3)
    return (
        argv_of(cmd),
        [f"{k}={v}" for k, v in env.items()] if env else [],
        os.fspath(cwd) if cwd else "",
        str(user) if user is not None else "",
        bytes(stdin) if stdin else b"",
        float(timeout or 0.0),
        int(output_limit or 0),
        bool(kill_on_output_limit),
        bool(keep_background),
        bool(toolkit),
        bool(open_stdin),
        bool(tty),
        rows,
        cols,
    )


def fd_of(stream: Any, name: str) -> int:
    """A one-shot run's stdio: None (/dev/null inside the sandbox), a descriptor number, or an object with
    ``fileno()`` (a file, a socket, ``sys.stdout``): the descriptor is passed into the sandbox."""
    if stream is None:
        return -1
    if isinstance(stream, int) and not isinstance(stream, bool):
        fd = stream
    elif hasattr(stream, "fileno"):
        if hasattr(stream, "flush"):
            stream.flush()  # what Python buffered goes out before the command's own output
        fd = stream.fileno()
    else:
        raise InvalidArgument(f"{name}: expected None, a file descriptor or an object with fileno(), "
                              f"got {type(stream).__name__}", 3)
    if fd < 0:
        raise InvalidArgument(f"{name}: {fd} is not a file descriptor", 3)
    return fd


def call_args(
    cmd: Optional[Command],
    script: Optional[str],
    env: Optional[Mapping[str, str]],
    stdin: Any,
    timeout: Optional[float],
) -> Tuple[Any, ...]:
    """The extension's FnCall arguments after the spec: argv, script, env, stdin bytes, timeout_s."""
    if (cmd is None) == (script is None):
        raise InvalidArgument("argv: give exactly one of a command and script=", 3)
    if timeout is not None and timeout < 0:
        raise InvalidArgument(f"timeout: must be >= 0 seconds, got {timeout}", 3)
    if stdin is None:
        data = b""
    elif isinstance(stdin, str):
        data = stdin.encode()
    elif isinstance(stdin, (bytes, bytearray, memoryview)):
        data = bytes(stdin)
    else:
        raise InvalidArgument(f"stdin: bytes or str, got {type(stdin).__name__}", 3)
    return (
        argv_of(cmd) if cmd is not None else [],
        script or "",
        [f"{k}={v}" for k, v in env.items()] if env else [],
        data,
        float(timeout or 0.0),
    )


def run_args(
    cmd: Command,
    env: Optional[Mapping[str, str]],
    cwd: Optional[str],
    user: Optional[str],
    timeout: Optional[float],
    stdin: Any,
    stdout: Any,
    stderr: Any,
) -> Tuple[Any, ...]:
    """The extension's one-shot run arguments after the spec, validated, positionally (the cancel fd comes
    last, from the caller): argv, env, cwd, user, timeout_s, stdin_fd, stdout_fd, stderr_fd."""
    if timeout is not None and timeout < 0:
        raise InvalidArgument(f"timeout: must be >= 0 seconds, got {timeout}", 3)
    return (
        argv_of(cmd),
        [f"{k}={v}" for k, v in env.items()] if env else [],
        os.fspath(cwd) if cwd else "",
        str(user) if user is not None else "",
        float(timeout or 0.0),
        fd_of(stdin, "stdin"),
        fd_of(stdout, "stdout"),
        fd_of(stderr, "stderr"),
    )


def build_spec(spec: SpecLike, fields: Mapping[str, Any]) -> Tuple[_sandlet.Spec, bool]:
    """A validated Spec from a Spec, a dict, a JSON string and/or keyword fields (fields win), and whether
    a sandbox of it is ``owned`` (dies with its runtime; the default) rather than detached.

    Keyword names are the JSON schema's (sandlet.h); an unknown one raises InvalidArgument naming it.
    """
    doc: Dict[str, Any] = {}
    if isinstance(spec, _sandlet.Spec):
        doc = json.loads(spec.to_json())
        if not fields:
            return spec, doc.get("lifetime", "owned") == "owned"
    elif isinstance(spec, str):
        doc = json.loads(spec)
    elif spec is not None:
        doc = dict(spec)
    for key, value in fields.items():
        if key not in SPEC_FIELDS:
            raise InvalidArgument(f"{key}: unknown spec field (known: {', '.join(sorted(SPEC_FIELDS))})", 3)
        doc[key] = value
    if "layers" in doc and doc["layers"] is not None:
        if isinstance(doc["layers"], (str, os.PathLike)):
            doc["layers"] = [doc["layers"]]
        doc["layers"] = [os.fspath(layer) for layer in doc["layers"]]
    if doc.get("mounts") is not None:
        doc["mounts"] = mounts_of(doc["mounts"])
    if isinstance(doc.get("toolkit"), os.PathLike):
        doc["toolkit"] = os.fspath(doc["toolkit"])
    doc = {k: v for k, v in doc.items() if v is not None}
    return _sandlet.Spec.from_json(json.dumps(doc)), doc.get("lifetime", "owned") == "owned"


def mounts_of(mounts: Any) -> List[Any]:
    """``mounts=``: a list of "SRC:DST[:ro|rw]" strings or dicts {"source", "target", "readonly"} (paths
    may be os.PathLike); one string or dict alone counts as a list of one. The library validates them."""
    if isinstance(mounts, (str, Mapping)):
        mounts = [mounts]
    out: List[Any] = []
    for m in mounts:
        if isinstance(m, Mapping):
            m = dict(m)
            for key in ("source", "target"):
                if isinstance(m.get(key), os.PathLike):
                    m[key] = os.fspath(m[key])
        out.append(m)
    return out


def import_kwargs(role: Optional[str], name: Optional[str], parent: Optional[str], dedupe: bool) -> Dict[str, Any]:
    return {"role": role or "", "name": name or "", "parent": parent or "", "no_dedupe": not dedupe}


def env_defaults_json(env: Optional[Mapping[str, str]], workdir: Optional[str], user: Optional[str]) -> str:
    d: Dict[str, Any] = {}
    if env:
        d["env"] = dict(env)
    if workdir:
        d["workdir"] = workdir
    if user:
        d["user"] = user
    return json.dumps(d) if d else ""


# The bits of sandlet_backend_info_t.capabilities (SANDLET_CAP_* in sandlet.h), by name.
_CAPABILITIES = ("prepare_ahead", "one_shot", "pause", "snapshot", "fork", "store_layers", "layer_images",
                 "set_limits", "reuse_check", "machine_state")


def capability_names(bits: int) -> List[str]:
    return [name for i, name in enumerate(_CAPABILITIES) if bits & (1 << i)]


def listed(items: Sequence[Tuple[str, str, str]]) -> List[Dict[str, Any]]:
    """Runtime.list() rows as the records they are (dicts), id and state included."""
    out = []
    for sid, state, record in items:
        d = json.loads(record) if record else {}
        d.setdefault("id", sid)
        d["state"] = state
        out.append(d)
    return out
