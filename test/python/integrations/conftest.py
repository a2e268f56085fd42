"""Fixtures of the framework integration tests (Inspect, ...): a throw-away runtime root shared by a module,
with the Debian base (scripts/debian-base.sh) imported into its store for recipes to build FROM.

At the end of each module nothing may stay: no sandbox in the root, no mount under it."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Iterator, List

import pytest

import sandlet

BASE_LAYER = "inspect-test-debian"
REPO = os.environ.get("SANDLET_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


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


def mounts_under(path: str) -> List[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(path.rstrip("/") + "/")]


@pytest.fixture(scope="session")
def debian_toolchain() -> str:
    """The Debian base plus g++ (scripts/debian-base.sh --toolchain), built once per machine and cached."""
    script = os.path.join(REPO, "scripts", "debian-base.sh")
    try:
        p = subprocess.run([script, "--toolchain", "--print-path"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=900, check=True)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot build the Debian toolchain tree with {script}: {str(getattr(e, 'stderr', e))[-800:]}")
    path = p.stdout.strip()
    assert os.path.exists(os.path.join(path, "usr/bin/g++")), f"{script} printed {path!r}, which has no g++"
    return path


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
