"""The README's first Python example runs as written, on a fresh runtime root, from a checkout after
``make build``: its code block is taken from README.md itself, so the README cannot drift from it."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import sandlet
from conftest import REPO, mounts_under


def first_python_block() -> str:
    text = Path(REPO, "README.md").read_text()
    found = re.search(r"^```python\n(.*?)^```$", text, re.S | re.M)
    assert found, "README.md has no ```python block"
    return found.group(1)


def test_readme_python_example_runs_as_written(tmp_path: Path, rootfs: str) -> None:
    # A checkout's layout: the example names build/test-rootfs relative to the repository.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "build").symlink_to(Path(rootfs).parent)
    (checkout / "example.py").write_text(first_python_block())
    root = tmp_path / "root"  # fresh: the example makes everything it needs in it
    env = dict(os.environ, SANDLET_ROOT=str(root),
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(sandlet.__file__))))
    p = subprocess.run([sys.executable, "example.py"], cwd=checkout, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["0 hello from sandbox", str(["hello\n"] * 8)], p.stdout
    # It leaves no sandbox and no mount behind (its layer's mount goes with the last sandbox using it).
    with sandlet.Runtime(root, warm_pool=False) as rt:
        assert rt.list() == []
        assert [layer["name"] for layer in rt.layer_list()] == ["busybox"]
        rt.gc()
    assert mounts_under(str(root)) == []
