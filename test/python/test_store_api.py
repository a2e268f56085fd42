"""Remote stores and lazy layers from Python: the arguments of push, pull and the loader's status, and the
runtime's store and loader settings. These hold against the library's stubs of push and pull too
(runtime/store_ops.cpp); what needs them built is marked ``store_impl``: the ctest entry ``python`` leaves
those out and ``python-store-impl`` (disabled until push and pull are built) runs them."""
from __future__ import annotations

import asyncio
import os
from typing import Any, Iterator

import pytest

import sandlet

# Store URLs only the store client can tell are bad (no such scheme, no host, no bucket, a relative path).
BAD_URLS = ["ftp://example.invalid/layers", "http://", "s3://", "relative/store"]


@pytest.fixture(autouse=True)
def no_store_in_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SANDLET_STORE", raising=False)
    yield


def test_no_store_anywhere_is_invalid_argument(rt: sandlet.Runtime) -> None:
    with pytest.raises(sandlet.InvalidArgument, match="no store: pass one or set SANDLET_STORE") as e:
        rt.layer_push("some-layer")
    assert e.value.code_name == "INVALID_ARGUMENT"
    with pytest.raises(sandlet.InvalidArgument, match="no store"):
        rt.layer_pull("some-layer")
    with pytest.raises(sandlet.InvalidArgument, match="no store"):
        rt.layer_pull("some-layer", lazy=True)
    assert isinstance(e.value, ValueError)


def test_empty_environment_variable_is_no_store(rt: sandlet.Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDLET_STORE", "")
    with pytest.raises(sandlet.InvalidArgument, match="no store"):
        rt.layer_pull("some-layer")


def test_environment_and_option_give_the_default_store(root_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDLET_STORE", "file:///nonexistent-sandlet-store")
    with sandlet.Runtime(root_dir) as rt:
        with pytest.raises(sandlet.Error) as e:
            rt.layer_pull("some-layer")
        assert "no store" not in e.value.message
    monkeypatch.delenv("SANDLET_STORE")
    with sandlet.Runtime(root_dir, store="file:///nonexistent-sandlet-store") as rt:
        with pytest.raises(sandlet.Error) as e:
            rt.layer_push("some-layer")
        assert "no store" not in e.value.message
    with sandlet.Runtime(root_dir, store="") as rt:  # as in the C struct: an empty option is none
        with pytest.raises(sandlet.InvalidArgument, match="no store"):
            rt.layer_push("some-layer")


def test_call_arguments_refused_before_any_store(rt: sandlet.Runtime) -> None:
    with pytest.raises(sandlet.InvalidArgument, match="store: an empty URL"):
        rt.layer_push("some-layer", "")
    with pytest.raises(sandlet.InvalidArgument, match="store: an empty URL"):
        rt.layer_pull("some-layer", store="", lazy=True)
    with pytest.raises(sandlet.InvalidArgument, match="'ref' is empty"):
        rt.layer_push("", "/srv/store")
    with pytest.raises(sandlet.InvalidArgument, match="'ref' is empty"):
        rt.layer_pull("", "/srv/store")
    with pytest.raises(sandlet.InvalidArgument, match="store: expected a URL"):
        rt.layer_push("some-layer", 42)  # type: ignore[arg-type]
    with pytest.raises(sandlet.InvalidArgument, match="lazy: expected True or False"):
        rt.layer_pull("some-layer", "/srv/store", lazy=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rt.layer_push(None, "/srv/store")  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs, field", [
    ({"fetch_unit": 1000}, "fetch_unit"),
    ({"fetch_unit": (64 << 20) + (64 << 10)}, "fetch_unit"),
    ({"fetch_concurrency": 257}, "fetch_concurrency"),
    ({"fill_timeout_ms": 99}, "fill_timeout_ms"),
    ({"fetch_unit": -1}, "fetch_unit"),
    ({"cache_max_bytes": 2**64}, "cache_max_bytes"),
    ({"fetch_concurrency": 2.5}, "fetch_concurrency"),
    ({"fill_timeout_ms": True}, "fill_timeout_ms"),
    ({"store": 7}, "store"),
])
def test_bad_loader_settings_name_the_field(root_dir: str, kwargs: Any, field: str) -> None:
    with pytest.raises(sandlet.InvalidArgument, match=field) as e:
        sandlet.Runtime(root_dir, **kwargs)
    assert e.value.code == 3


def test_loader_settings_in_range_open(root_dir: str) -> None:
    with sandlet.Runtime(root_dir, store=os.path.join(root_dir, "remote"), cache_max_bytes=1 << 30,
                         fetch_unit=64 << 20, fetch_concurrency=256, fill_timeout_ms=100):
        pass
    with sandlet.Runtime(root_dir, fetch_unit=64 << 10, fetch_concurrency=1, cache_max_bytes=None):
        pass


def test_async_forms(root_dir: str) -> None:
    async def main() -> None:
        with pytest.raises(sandlet.InvalidArgument, match="fetch_concurrency"):
            await sandlet.AsyncRuntime.open(root_dir, fetch_concurrency=1000)
        async with await sandlet.AsyncRuntime.open(root_dir, fill_timeout_ms=5000) as rt:
            with pytest.raises(sandlet.InvalidArgument, match="no store"):
                await rt.layer_push("some-layer")
            with pytest.raises(sandlet.InvalidArgument, match="no store"):
                await rt.layer_pull("some-layer", lazy=True)
            with pytest.raises(sandlet.InvalidArgument, match="empty URL"):
                await rt.layer_pull("some-layer", "")
    asyncio.run(main())


@pytest.mark.store_impl
@pytest.mark.parametrize("url", BAD_URLS)
def test_bad_store_url_is_invalid_argument(rt: sandlet.Runtime, url: str) -> None:
    with pytest.raises(sandlet.InvalidArgument):
        rt.layer_push("some-layer", url)
    with pytest.raises(sandlet.InvalidArgument):
        rt.layer_pull("some-layer", url, lazy=True)


@pytest.mark.store_impl
def test_loader_status_shape(rt: sandlet.Runtime) -> None:
    s = rt.loader_status()
    assert s["running"] is False  # a fresh root; status starts no loader
    assert s["layers"] == []
    assert set(s["settings"]) >= {"cache_max_bytes", "fetch_unit", "fetch_concurrency", "fill_timeout_ms"}
    assert set(s["cache"]) >= {"dir", "bytes", "max_bytes", "blobs"}
