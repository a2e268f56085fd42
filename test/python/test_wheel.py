"""`pip wheel .` builds a self-contained wheel that installs into a fresh virtual environment and works."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile

import pytest

from conftest import REPO

pytestmark = pytest.mark.wheel


@pytest.fixture(scope="module")
def workdir():
    path = tempfile.mkdtemp(prefix="sandlet-wheel.")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{cmd} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def test_wheel_builds_installs_and_runs(workdir: str, rootfs: str, root_dir: str) -> None:
    # Without build isolation the build uses this environment's scikit-build-core and pybind11 (no network).
    # The checkout is copied first so that nothing of the build lands in the source tree.
    src = os.path.join(workdir, "src")
    anywhere = shutil.ignore_patterns(".git", ".venv", ".venv-harbor", "target", "__pycache__", "results", "plots")
    top_only = shutil.ignore_patterns("build", "build-*")  # build directories; src/recipe is the builder's source

    def ignore(directory, names):
        skipped = set(anywhere(directory, names))
        if os.path.samefile(directory, REPO):
            skipped |= set(top_only(directory, names))
        return skipped

    shutil.copytree(REPO, src, ignore=ignore)
    wheels = os.path.join(workdir, "wheels")
    # The build directory sits in the copy as build/ does in the checkout, and the flags are the project
    # build's (RelWithDebInfo): compiled through ccache (CMakeLists.txt), the objects that build just made
    # are reused and only the packaging is new work here.
    env = dict(os.environ, SKBUILD_BUILD_DIR=os.path.join(src, "build"))
    env.pop("PYTHONPATH", None)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-Ccmake.build-type=RelWithDebInfo", "-w", wheels, src], env=env, timeout=1500)
    (wheel,) = [os.path.join(wheels, w) for w in os.listdir(wheels) if w.endswith(".whl")]
    names = zipfile.ZipFile(wheel).namelist()
    assert "sandlet/__init__.py" in names and "sandlet/libsandlet.so.1" in names and "sandlet/py.typed" in names
    assert any(n.startswith("sandlet/_sandlet.") and n.endswith(".so") for n in names)
    assert "sandlet/_sandlet.pyi" in names
    # Subpackages ship too, and the Inspect provider's entry point is declared (Inspect finds it by name).
    assert "sandlet/inspect/__init__.py" in names and "sandlet/inspect/_environment.py" in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    declared = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[inspect_ai]" in declared and "sandlet = sandlet.inspect" in declared, declared
    assert "sandlet-sandbox-fusion = sandlet.sandbox_fusion.__main__:main" in declared, declared

    venv = os.path.join(workdir, "venv")
    run([sys.executable, "-m", "venv", venv], timeout=300)
    py = os.path.join(venv, "bin", "python")
    # Without PYTHONPATH: the build tree's package (and its dist-info) would count as installed already.
    run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], env=env, timeout=300)
    script = textwrap.dedent(f"""
        import sandlet, os
        assert os.path.dirname(sandlet.__file__).startswith({venv!r}), sandlet.__file__
        with sandlet.Runtime({root_dir!r}) as rt, rt.create(layers=[{rootfs!r}]) as sb:
            print(sb.exec("echo from-wheel").stdout_text.strip(), sandlet.__version__)
    """)
    out = run([py, "-c", script], env={"PATH": os.environ["PATH"]}, timeout=120, cwd=workdir)
    assert out.stdout.startswith("from-wheel 0.")
    # The service's command is installed and answers --help (it needs nothing beyond the standard library).
    help_out = run([os.path.join(venv, "bin", "sandlet-sandbox-fusion"), "--help"], env={"PATH": os.environ["PATH"]},
                   timeout=60, cwd=workdir)
    assert "--language" in help_out.stdout
