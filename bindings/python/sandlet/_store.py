"""Remote stores and lazy layers (sandlet_store.h): the argument checks Runtime and AsyncRuntime share.

Values the library bounds (``fetch_unit`` a multiple of 64 KiB up to 64 MiB, ``fetch_concurrency`` 1..256,
``fill_timeout_ms`` >= 100) are checked by the library alone, so that every binding refuses the same values
with the same message; here only what cannot cross into C at all is refused (a wrong type, a negative or
too large number), as InvalidArgument naming the argument like the library's own refusals.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Optional, Union

from ._errors import InvalidArgument

StoreURL = Union[str, "os.PathLike[str]"]

_INVALID_ARGUMENT = 3
_LIMITS = {"cache_max_bytes": 2**64 - 1, "fetch_unit": 2**32 - 1, "fetch_concurrency": 2**32 - 1,
           "fill_timeout_ms": 2**32 - 1}


def _url(name: str, store: Any) -> str:
    if isinstance(store, os.PathLike):
        store = os.fspath(store)
    if not isinstance(store, str):
        raise InvalidArgument(f"{name}: expected a URL or path string, not {type(store).__name__}", _INVALID_ARGUMENT)
    return store


def call_store(store: Optional[StoreURL]) -> Optional[str]:
    """The ``store`` of a push or pull: None = the runtime's (its ``store=``, else $SANDLET_STORE). An empty
    string is refused as the C ABI refuses it: it is a URL that went missing, not a request for the default."""
    if store is None:
        return None
    url = _url("store", store)
    if not url:
        raise InvalidArgument("store: an empty URL (None means the runtime's store)", _INVALID_ARGUMENT)
    return url


def open_kwargs(store: Optional[StoreURL], cache_max_bytes: Optional[int], fetch_unit: Optional[int],
                fetch_concurrency: Optional[int], fill_timeout_ms: Optional[int],
                registries: Union[None, str, Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The extension's keyword arguments for a runtime's store, loader and registry settings (None or 0: the
    default; an empty ``store`` is no store, as in sandlet_runtime_options_t; ``registries`` a dict or JSON)."""
    url = _url("store", store) if store is not None else ""
    out: Dict[str, Any] = {"store": url or None}
    if registries is not None:
        out["registries"] = registries if isinstance(registries, str) else json.dumps(dict(registries))
    for name, value in (("cache_max_bytes", cache_max_bytes), ("fetch_unit", fetch_unit),
                        ("fetch_concurrency", fetch_concurrency), ("fill_timeout_ms", fill_timeout_ms)):
        if value is None:
            value = 0
        if type(value) is not int:  # bool is an int subclass, and a float would be truncated
            raise InvalidArgument(f"{name}: expected an int, not {type(value).__name__}", _INVALID_ARGUMENT)
        if not 0 <= value <= _LIMITS[name]:
            raise InvalidArgument(f"{name}: {value} is out of range (0 = the default)", _INVALID_ARGUMENT)
        out[name] = value
    return out


def lazy_flag(lazy: Any) -> bool:
    if type(lazy) is not bool:
        raise InvalidArgument(f"lazy: expected True or False, not {type(lazy).__name__}", _INVALID_ARGUMENT)
    return lazy
