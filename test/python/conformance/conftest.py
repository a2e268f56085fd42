"""Fixtures of the Python conformance suite: every test runs once per backend of
$SANDLET_CONFORMANCE_BACKENDS (default "container"; ctest passes the list of test/CMakeLists.txt, where a
new backend adds itself). A backend the build knows but this host cannot run is skipped with the reason;
one the build does not know fails.

Each test gets a fresh runtime root (``conf``); at its end nothing of any sandbox it saw may be left on the
host: no process in its cgroups, no cgroup directory, no mount, no file (``Conformance.check_no_leaks``).
"""
from __future__ import annotations

import shutil
import tempfile
from typing import Iterator

import pytest

import sandlet
from .conformance_helpers import BACKENDS, Conformance


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    probe = tempfile.mkdtemp(prefix="sandlet-conformance-probe.")
    try:
        with sandlet.Runtime(probe, warm_pool=False) as rt:
            known = {b["name"]: b for b in rt.backends()}
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if name not in known:
        pytest.fail(f"this build has no backend {name!r} (it has {sorted(known)})")
    if not known[name]["available"]:
        pytest.skip(f"backend {name} is not available here: {known[name]['reason']}")
    return name


@pytest.fixture
def conf(backend: str) -> Iterator[Conformance]:
    c = Conformance(backend)
    try:
        yield c
    finally:
        c.close()


