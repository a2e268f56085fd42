"""Snapshots and forks: argument handling and the ForkResult both APIs return.

A snapshot packs a sandbox's changes to its files into a layer of the store (role "diff"); ``create`` with
that layer's digest as the only layer restores it. A fork is one snapshot and n children made on it at once,
each with an identity of its own (see sandlet.h, "Fork children").
"""
from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Callable, Dict, Generic, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import _sandlet
from ._common import SpecLike, build_spec
from ._errors import Error, InvalidArgument

Excludes = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
S = TypeVar("S")


def exclude_of(exclude: Optional[Excludes]) -> List[str]:
    """``exclude=``: absolute paths inside the sandbox (fnmatch globs per component); one alone counts as a
    list of one. The library validates them."""
    if exclude is None:
        return []
    if isinstance(exclude, (str, os.PathLike)):
        exclude = [exclude]
    return [os.fspath(p) for p in exclude]


def snapshot_args(exclude: Optional[Excludes], default_excludes: bool, full: bool, name: Optional[str],
                  max_depth: int) -> Tuple[Any, ...]:
    """The extension's snapshot arguments, positionally: exclude, default_excludes, full, name, max_depth."""
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise InvalidArgument(f"max_depth: must be 0 (the runtime's) or >= 2, got {max_depth!r}", 3)
    return (exclude_of(exclude), bool(default_excludes), bool(full), name or "", max_depth)


def labels_of(labels: Optional[Mapping[str, str]]) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for key, value in (labels or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgument(f"labels: {key!r}: keys and values must be str", 3)
        if "=" in key:
            raise InvalidArgument(f"labels: key {key!r} must not contain '='", 3)
        out.append((key, value))
    return out


def count_of(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidArgument(f"n: the number of children must be an int, got {type(n).__name__}", 3)
    if n < 0:
        raise InvalidArgument(f"invalid fork field 'n': {n} (1..1024)", 3)
    return n


def fork_args(n: int, labels: Optional[Mapping[str, str]], exclude: Optional[Excludes],
              copy_secrets: bool) -> Tuple[Any, ...]:
    """The extension's fork arguments, positionally: n, labels, exclude, copy_secrets."""
    return (count_of(n), labels_of(labels), exclude_of(exclude), bool(copy_secrets))


def snapshot_fork_args(snapshot: str, n: int, spec: SpecLike, fields: Mapping[str, Any],
                       labels: Optional[Mapping[str, str]], copy_secrets: bool) -> Tuple[Tuple[Any, ...], bool]:
    """The extension's fork_snapshot arguments (snapshot, base spec or None, n, labels, copy_secrets) and
    whether the children are ``owned``."""
    for key in ("layers", "environment"):
        if fields.get(key) is not None:
            raise InvalidArgument(f"{key}: the children of a snapshot get the snapshot's layers", 3)
    base: Optional[_sandlet.Spec] = None
    owned = True
    if spec is not None or fields:
        base, owned = build_spec(spec, fields)
    return (str(snapshot), base, count_of(n), labels_of(labels), bool(copy_secrets)), owned


class ForkResult(Generic[S]):
    """The outcome of a fork: ``snapshot`` (the snapshot result the children were made from, a dict as
    ``snapshot()`` returns), ``children`` (per child a sandbox, or None where that child failed) and
    ``errors`` (per child None, or the exception it failed with). Iterating yields the ready children.

    A context manager: leaving the block destroys the children whose lifetime is ``owned`` (the parent's by
    default) and closes every handle; children taken out of ``children`` before are not spared.
    """

    def __init__(self, snapshot: Dict[str, Any], children: List[Optional[S]], errors: List[Optional[Error]]) -> None:
        self.snapshot = snapshot
        self.children = children
        self.errors = errors

    @property
    def digest(self) -> str:
        """The snapshot layer's digest ("sha256:..."): ``create(layers=[digest])`` restores it."""
        return str(self.snapshot["layer"]["digest"])

    @property
    def ok(self) -> bool:
        """True when every child is ready."""
        return all(e is None for e in self.errors)

    def __iter__(self) -> Iterator[S]:
        return iter([c for c in self.children if c is not None])

    def check(self) -> "ForkResult[S]":
        """Returns self when every child is ready; else raises the first child's error (the children stay:
        close them, e.g. by leaving the ``with`` block)."""
        for e in self.errors:
            if e is not None:
                raise e
        return self

    def close(self) -> None:
        """Destroys the owned children and closes every handle (idempotent). Every child is seen to; the
        first error, if any, is raised afterwards."""
        first: Optional[BaseException] = None
        for child in self.children:
            if child is not None:
                try:
                    child.__exit__(None, None, None)  # type: ignore[attr-defined]
                except Exception as e:  # noqa: BLE001 -- raised once all are done
                    first = first or e
        if first is not None:
            raise first

    def __enter__(self) -> "ForkResult[S]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        ready = sum(c is not None for c in self.children)
        return (f"<sandlet.ForkResult {self.snapshot.get('layer', {}).get('digest', '?')}: "
                f"{ready}/{len(self.children)} ready>")


class AsyncForkResult(ForkResult[S]):
    """A ForkResult of AsyncSandbox children: ``async with`` destroys the owned ones (concurrently) and
    closes every handle; ``close()`` only closes the handles (owned children are then destroyed in the
    background)."""

    async def aclose(self) -> None:
        """Destroys the owned children (concurrently) and closes every handle; the first error, if any, is
        raised once all are done."""
        outcomes = await asyncio.gather(*(c.__aexit__(None, None, None)  # type: ignore[attr-defined]
                                          for c in self.children if c is not None), return_exceptions=True)
        for o in outcomes:
            if isinstance(o, BaseException):
                raise o

    def close(self) -> None:
        for child in self.children:
            if child is not None:
                child.close()  # type: ignore[attr-defined]

    async def __aenter__(self) -> "AsyncForkResult[S]":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def fork_result(cls: type, wrap: Callable[[_sandlet.Sandbox, bool], Any], owned: bool,
                raw: Tuple[str, List[Optional[_sandlet.Sandbox]], List[Optional[Error]]]) -> Any:
    """A ForkResult of the extension's (snapshot_json, handles, errors)."""
    snapshot_json, handles, errors = raw
    return cls(json.loads(snapshot_json), [wrap(h, owned) if h is not None else None for h in handles], list(errors))


def close_handles(raw: Any) -> None:
    """Disposes of a fork's outcome nobody awaits any more: closing an owned child destroys it."""
    for h in raw[1]:
        if h is not None:
            h.close()
