"""Shared fixtures of the Python binding's tests.

The tests use the package assembled in the build tree (PYTHONPATH, set by CTest) and the busybox root
filesystem the build makes ($SANDLET_TEST_ROOTFS). Every runtime gets its own throw-away root directory,
which is checked for leftover mounts and removed afterwards.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Iterator, List

import pytest

import sandlet

REPO = os.environ.get("SANDLET_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "wheel: builds and installs the wheel (slow; run by the python-wheel test)")
    config.addinivalue_line("markers", "store_impl: needs push, pull and the loader's status built (run by the "
                            "python-store-impl test, disabled until then)")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With $SANDLET_PYTEST_SKIP_EXIT set (ctest sets 77, its SKIP_RETURN_CODE), a run that passed but
    skipped a test exits with that code: ctest then reports it as skipped, never as passed (-rs prints
    which and why)."""
    code = os.environ.get("SANDLET_PYTEST_SKIP_EXIT")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if code and exitstatus == 0 and reporter is not None and reporter.stats.get("skipped"):
        session.exitstatus = int(code)


@pytest.fixture(scope="session")
def rootfs() -> str:
    path = os.environ.get("SANDLET_TEST_ROOTFS", "")
    if not path or not os.path.isfile(os.path.join(path, "bin", "busybox")):
        pytest.fail(f"SANDLET_TEST_ROOTFS={path!r} is not a busybox root filesystem (run the tests through ctest)")
    return path


def debian_tree(*flags: str) -> str:
    """A Debian tree of scripts/debian-base.sh (built once per machine and cached); SKIPs, saying why, when it
    cannot be built (offline, say)."""
    script = os.path.join(REPO, "scripts", "debian-base.sh")
    try:
        p = subprocess.run([script, *flags, "--print-path"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=900, check=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot build the Debian tree with {script} {' '.join(flags)}: {(e.stderr or '')[-800:]}")
    return p.stdout.strip()


@pytest.fixture(scope="session")
def debian_base() -> str:
    """The Debian bookworm base (python3, git, adduser, procps)."""
    path = debian_tree()
    assert os.path.exists(os.path.join(path, "usr/bin/python3")), f"debian-base.sh printed {path!r}, which has no python3"
    return path


@pytest.fixture(scope="session")
def debian_toolchain() -> str:
    """The base plus g++ (debian-base.sh --toolchain)."""
    path = debian_tree("--toolchain")
    assert os.path.exists(os.path.join(path, "usr/bin/g++")), f"debian-base.sh printed {path!r}, which has no g++"
    return path


def mounts_under(path: str) -> List[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(path.rstrip("/") + "/")]


@pytest.fixture
def root_dir() -> Iterator[str]:
    """A fresh runtime root; afterwards nothing may stay mounted under it."""
    path = tempfile.mkdtemp(prefix="sandlet-pytest.")
    yield path
    left = mounts_under(path)
    # Runtimes of the test are closed by now; a gc from a fresh one sweeps what a killed helper left.
    if os.path.isdir(path):
        with sandlet.Runtime(path) as rt:
            rt.gc()
    shutil.rmtree(path, ignore_errors=True)
    assert not left, f"mounts left under {path}: {left}"


@pytest.fixture
def rt(root_dir: str) -> Iterator[sandlet.Runtime]:
    with sandlet.Runtime(root_dir) as runtime:
        yield runtime


@pytest.fixture
def sb(rt: sandlet.Runtime, rootfs: str) -> Iterator[sandlet.Sandbox]:
    with rt.create(layers=[rootfs]) as sandbox:
        yield sandbox


def python_env() -> dict:
    """The environment for a child Python process that must import the same sandlet."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(sandlet.__file__)))
    return env
