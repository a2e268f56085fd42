"""Fixtures of the framework integration tests (Inspect, ...): a throw-away runtime root shared by a module,
with the Debian base (scripts/debian-base.sh) imported into its store for recipes to build FROM.

At the end of each module nothing may stay: no sandbox in the root, no mount under it."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Iterator

import pytest

import sandlet
from conftest import REPO, mounts_under  # test/python's (on sys.path as the tests' rootdir)

BASE_LAYER = "inspect-test-debian"


@pytest.fixture(scope="module")
def integration_root(debian_base: str) -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="sandlet-integration.")
    with sandlet.Runtime(path) as rt:
        rt.layer_import(debian_base, name=BASE_LAYER)
    yield path
    with sandlet.Runtime(path) as rt:
        left = [s["id"] for s in rt.list()]
        rt.gc()
    mounts = mounts_under(path)
    shutil.rmtree(path, ignore_errors=True)
    assert not left, f"sandboxes left in {path}: {left}"
    assert not mounts, f"mounts left under {path}: {mounts}"


@pytest.fixture(scope="session", autouse=True)
def _framework_state_in_a_temp_dir() -> Iterator[None]:
    """The frameworks' caches, traces and settings (XDG directories) go to a throw-away directory, not the
    home directory of whoever runs the tests."""
    path = tempfile.mkdtemp(prefix="sandlet-integration-home.")
    names = ("XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME")
    saved = {n: os.environ.get(n) for n in names}
    for n in names:
        os.environ[n] = os.path.join(path, n.lower())
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path
