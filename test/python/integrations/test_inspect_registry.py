"""An Inspect eval whose compose file names a registry image (issue 35): ``inspect eval --sandbox
sandlet:compose.yaml`` with ``image: HOST:PORT/repo:tag`` of a real registry the test starts on loopback
(test/support/registry_world.py); the provider's sandbox pulls it on first use, no environment made by hand."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (scripts/setup.sh installs it)")

import sandlet  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402

from conftest import REPO, mounts_under  # noqa: E402
from .conftest import write  # noqa: E402
from .test_inspect_eval import inspect_eval  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "test", "support"))
from registry_world import Registry, write_oci_layout  # noqa: E402


def test_a_compose_image_of_a_registry_is_pulled_and_used(debian_base: str, tmp_path: Path) -> None:
    root = tempfile.mkdtemp(prefix="sandlet-inspect-registry.")
    layouts = tempfile.mkdtemp(prefix="sandlet-inspect-layouts.")
    try:
        with Registry.mode("http") as reg:
            image = write_oci_layout(layouts, [debian_base], config={"WorkingDir": "/root"})
            reg.push(image, "evals/debian", "12")
            compose = write(str(tmp_path / "compose.yaml"),
                            f"x-sandlet:\n  root: {root}\nservices:\n  default:\n"
                            f"    image: {reg.ref('evals/debian', '12')}\n    mem_limit: 1g\n")
            cmd, env = inspect_eval(root, tmp_path, "sandlet_tools")
            cmd[-1] = f"sandlet:{compose}"
            env["SANDLET_REGISTRIES"] = json.dumps({"insecure": [reg.host]})
            p = subprocess.run(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=600)
            assert p.returncode == 0, p.stdout[-6000:]
            (log_path,) = sorted((tmp_path / "logs").glob("*.eval"))
            log = read_eval_log(str(log_path))
            assert log.status == "success", log.error
            tools = [m for m in log.samples[0].messages if m.role == "tool"]
            assert tools and all(m.error is None for m in tools), [(m.function, m.error) for m in tools]
        with sandlet.Runtime(root) as rt:
            assert reg.ref("evals/debian", "12") in [e["name"] for e in rt.env_list()]
            assert rt.list() == []
            rt.gc()
        assert mounts_under(root) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(layouts, ignore_errors=True)
