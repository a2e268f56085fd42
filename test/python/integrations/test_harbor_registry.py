"""Harbor tasks as Terminal-Bench writes them (issue 35): the task's Dockerfile starts FROM an image in a
registry and installs packages with apt-get and pip. Here the registry is Debian's docker-registry on loopback
(test/support/registry_world.py), holding a "python" image the test makes from the Debian base (pip added, apt
and pip pointed at the mirrors); the mirrors are a Debian repository and a PyPI simple index served by nginx
behind a fake uplink (test/support/mirror_world.py), which the build's RUN steps reach through the node gateway.
Harbor's oracle scores 1.0 and nop 0.0 with no environment made by hand; a task naming the registry image as
its docker_image runs too. An Inspect eval whose compose file names the image is in test_inspect_registry.py."""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Iterator

import pytest

import sandlet
from conftest import REPO, mounts_under
from integrations.test_harbor import _why_not, harbor_run, mean, task, trials

sys.path.insert(0, os.path.join(REPO, "test", "support"))
import mirror_world  # noqa: E402
from registry_world import Registry, write_oci_layout  # noqa: E402
from python_image import PIP_SRC, python_image_layer  # noqa: E402

pytestmark = pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "ready")

@pytest.fixture(scope="module")
def world(debian_base: str) -> Iterator[dict]:
    if not os.path.isdir(PIP_SRC):
        pytest.skip(f"no pip to put in the test image at {PIP_SRC}")
    root = tempfile.mkdtemp(prefix="sandlet-harbor-registry.")
    layouts = tempfile.mkdtemp(prefix="sandlet-harbor-layouts.")
    with mirror_world.MirrorWorld() as mirrors, Registry.mode("http") as reg:
        image = write_oci_layout(layouts, [debian_base, python_image_layer(mirrors)],
                                 config={"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                                         "Cmd": ["python3"]})
        reg.push(image, "tb/python-3-11", "20250101")
        env = {"SANDLET_REGISTRIES": json.dumps({"insecure": [reg.host]}),
               "SANDLET_NET_UPLINK_NETNS": mirrors.uplink_netns}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield {"root": root, "image": reg.ref("tb/python-3-11", "20250101"), "mirrors": mirrors}
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            with sandlet.Runtime(root) as rt:
                left = [s["id"] for s in rt.list()]
                rt.gc()
            mounts = mounts_under(root)
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(layouts, ignore_errors=True)
            assert not left and not mounts, (left, mounts)


def test_terminal_bench_style_tasks_install_from_the_mirrors(world: dict, tmp_path) -> None:
    tasks = str(tmp_path / "tasks")
    dockerfile = (f"FROM {world['image']}\n"
                  "RUN apt-get update && apt-get install -y --no-install-recommends sandlet-hello-extra\n"
                  "RUN pip install sandlet-hello==1.0\n"
                  "WORKDIR /app\n")
    check = ('[ "$(sandlet-hello)" = "{apt}" ] && [ "$(python3 -c \'import sandlet_hello; print(sandlet_hello.LINE)\')" '
             '= "{py}" ] && [ "$(cat /app/answer 2>/dev/null)" = 42 ] && echo 1 > /logs/verifier/reward.txt '
             '|| echo 0 > /logs/verifier/reward.txt\n').format(apt=mirror_world.HELLO_LINE, py=mirror_world.PY_HELLO_LINE)
    task(tasks, "installs", dockerfile=dockerfile, solve="echo 42 > /app/answer\n", test=check)
    # A task naming the registry image directly (no Dockerfile): pulled on first use.
    task(tasks, "plain-image", image=world["image"], solve="mkdir -p /app && python3 -c 'print(6*7)' > /app/answer\n",
         test='[ "$(cat /app/answer 2>/dev/null)" = 42 ] && echo 1 > /logs/verifier/reward.txt '
              '|| echo 0 > /logs/verifier/reward.txt\n')
    jobs = str(tmp_path / "jobs")
    oracle = harbor_run(world["root"], tasks, "oracle", jobs, "oracle", "-n", "2")
    ts = trials(jobs, "oracle")
    assert len(ts) == 2 and all(t.get("exception_info") is None for t in ts), [t.get("exception_info") for t in ts]
    assert mean(oracle) == 1.0
    nop = harbor_run(world["root"], tasks, "nop", jobs, "nop", "-n", "2")
    assert mean(nop) == 0.0
    with sandlet.Runtime(world["root"]) as rt:
        names = [e["name"] for e in rt.env_list()]
        assert world["image"] in names  # the registry image, pulled once for both tasks
        assert rt.list() == []


def test_without_a_build_network_the_install_fails_named(world: dict, tmp_path) -> None:
    tasks = str(tmp_path / "tasks")
    task(tasks, "offline", dockerfile=f"FROM {world['image']}\nRUN apt-get update && apt-get install -y sandlet-hello\n",
         solve="true\n", test="echo 1 > /logs/verifier/reward.txt\n")
    jobs = str(tmp_path / "jobs")
    harbor_run(world["root"], os.path.join(tasks, "offline"), "oracle", jobs, "offline", "--ek", "build_network=none")
    (t,) = trials(jobs, "offline")
    info = t["exception_info"]
    assert info is not None and 'network "none"' in info["exception_message"], info


def test_a_build_reaches_only_the_mirrors_its_allowlist_names(world: dict, tmp_path) -> None:
    """`sandlet build` itself (no Harbor): FROM the registry image, apt-get and pip through an allowlist of the
    mirror's address alone; without a network the same recipe fails naming the step's network."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {world['image']}\n"
                                    "RUN apt-get update && apt-get install -y --no-install-recommends sandlet-hello\n"
                                    "RUN pip install sandlet-hello==1.0\n")
    mirror_only = {"allow": [{"cidr": f"{world['mirrors'].address}/32", "ports": 80, "protocol": "tcp"}]}
    with sandlet.Runtime(world["root"]) as rt:
        with pytest.raises(sandlet.Error, match='network "none"'):
            rt.build(str(ctx / "Dockerfile"), str(ctx), tag="offline-app")
        r = rt.build(str(ctx / "Dockerfile"), str(ctx), tag="mirror-app", network=mirror_only)
        assert r["environment"].startswith("mirror-app")
        with rt.create({"environment": "mirror-app"}) as sb:
            assert sb.exec(["sandlet-hello"]).stdout_text.strip() == mirror_world.HELLO_LINE
            assert sb.exec(["sandlet-hello-py"]).stdout_text.strip() == mirror_world.PY_HELLO_LINE
