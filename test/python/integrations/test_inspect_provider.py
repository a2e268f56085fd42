"""The sandlet Inspect provider beyond Inspect's own checks: background servers that outlive an exec while a
timeout still kills the tree, the output-limit error, compose files and recipes as configs (several named
sandboxes per sample), configs refused with the field and the reason, exec_remote, and cleanup that leaves
another process's sandboxes alone."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import AsyncIterator

import anyio
import pytest

pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (scripts/setup.sh installs it)")

from inspect_ai.util import OutputLimitExceededError  # noqa: E402
from inspect_ai.util._sandbox.limits import override_max_exec_output_size  # noqa: E402

import sandlet  # noqa: E402
from sandlet.inspect import SandletSandboxConfig, SandletSandboxEnvironment, load_config  # noqa: E402
from sandlet.inspect import _environment  # noqa: E402

from .conftest import BASE_LAYER, write  # noqa: E402

pytestmark = pytest.mark.anyio
TASK = "provider_test"


@pytest.fixture(scope="module", autouse=True)
def _close_runtimes(integration_root: str) -> object:
    yield
    _environment.close_runtimes()


@pytest.fixture
async def env(integration_root: str) -> AsyncIterator[SandletSandboxEnvironment]:
    cfg = SandletSandboxConfig(layers=[BASE_LAYER], workdir="/root", root=integration_root)
    envs = await SandletSandboxEnvironment.sample_init(TASK, cfg, {})
    try:
        yield envs["default"]  # type: ignore[misc]
    finally:
        await SandletSandboxEnvironment.sample_cleanup(TASK, cfg, envs, False)


async def running(env: SandletSandboxEnvironment, marker: str) -> bool:
    r = await env.exec(["sh", "-c", f"ps -eo args | grep -v grep | grep -c {marker} || true"])
    return r.stdout.strip() != "0"


async def test_background_server_outlives_the_exec(env: SandletSandboxEnvironment) -> None:
    # As Inspect's tool servers start: the exec returns while the server keeps running.
    r = await env.exec(["sh", "-c", "nohup sh -c 'sleep 300 # bg_server' >/dev/null 2>&1 & echo started"],
                       timeout=20)
    assert r.success and r.stdout == "started\n"
    assert await running(env, "bg_server")


async def test_timeout_kills_background_children_too(env: SandletSandboxEnvironment) -> None:
    with pytest.raises(TimeoutError):
        await env.exec(["sh", "-c", "sleep 300 # to_child & sleep 300 # to_parent"], timeout=1)
    # Nothing is left to wait for: the kill is done when the exec returns.
    assert not await running(env, "to_child") and not await running(env, "to_parent")


async def test_signal_death_is_128_plus_n(env: SandletSandboxEnvironment) -> None:
    r = await env.exec(["sh", "-c", "kill -KILL $$"])
    assert (r.success, r.returncode) == (False, 137)


async def test_output_limit_raises_inspects_error(env: SandletSandboxEnvironment) -> None:
    with override_max_exec_output_size(4096):
        with pytest.raises(OutputLimitExceededError) as e:
            await env.exec(["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"])
    assert "limit of 4 KiB was exceeded" in str(e.value)
    assert e.value.truncated_output is not None and e.value.truncated_output.startswith("xxxx")


async def test_missing_command_and_user_are_failed_results(env: SandletSandboxEnvironment) -> None:
    r = await env.exec(["no-such-command"])
    assert (r.success, r.returncode) == (False, 127) and "no-such-command" in r.stderr
    r = await env.exec(["true"], user="nosuchuser")
    assert not r.success and "nosuchuser" in r.stderr


async def test_compose_file_maps_services_to_sandboxes(integration_root: str, tmp_path: Path) -> None:
    write(str(tmp_path / "worker" / "Dockerfile"),
          f"FROM {BASE_LAYER}\nRUN echo built > /etc/worker-marker\nWORKDIR /srv\n")
    compose = write(str(tmp_path / "compose.yaml"), f"""
services:
  tools:
    build: ./worker
    environment: [ROLE=tools]
    init: true
    command: tail -f /dev/null
  default:
    image: {BASE_LAYER}
    working_dir: /root
    environment:
      ROLE: agent
    network_mode: none
    mem_limit: 512m
x-sandlet:
  root: {integration_root}
""")
    with pytest.raises(RuntimeError, match=f"environment '{BASE_LAYER}' not found"):
        # 'image' names an environment (or imported image): a bare layer name is not one.
        await SandletSandboxEnvironment.sample_init(TASK, compose, {})
    compose_ok = write(str(tmp_path / "compose.yaml"), Path(compose).read_text().replace(
        f"image: {BASE_LAYER}", "x-sandlet: {layers: [" + BASE_LAYER + "]}"))
    await SandletSandboxEnvironment.task_init(TASK, compose_ok)
    envs = await SandletSandboxEnvironment.sample_init(TASK, compose_ok, {})
    try:
        assert list(envs) == ["default", "tools"]  # the default first, as Inspect requires
        default, tools = envs["default"], envs["tools"]
        assert (await default.exec(["sh", "-c", "echo $ROLE; pwd"])).stdout == "agent\n/root\n"
        r = await tools.exec(["sh", "-c", "echo $ROLE; pwd; cat /etc/worker-marker"])
        assert r.stdout == "tools\n/srv\nbuilt\n", r
        assert isinstance(default, SandletSandboxEnvironment)
        info = await default.sandbox.info()
        assert info["spec"]["labels"]["inspect.task"] == TASK and info["spec"]["labels"]["inspect.service"] == "default"
    finally:
        await SandletSandboxEnvironment.sample_cleanup(TASK, compose_ok, envs, False)
    with sandlet.Runtime(integration_root) as rt:
        assert rt.list(labels={"inspect.task": TASK}) == []


def test_configs_are_refused_with_field_and_reason(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one of environment, layers or recipe"):
        load_config({"user": "agent"}).resolved_services()
    with pytest.raises(ValueError, match="exactly one of environment, layers or recipe .got environment, layers"):
        load_config({"environment": "e", "layers": ["l"]}).resolved_services()
    with pytest.raises(ValueError, match="no such file"):
        load_config(str(tmp_path / "missing.yaml"))
    with pytest.raises(ValueError, match=r"services.app.ports: not supported"):
        load_config(write(str(tmp_path / "c1" / "compose.yaml"), "services:\n  app:\n    image: e\n    ports: ['80:80']\n"))
    with pytest.raises(ValueError, match=r"top-level volumes not supported"):
        load_config(write(str(tmp_path / "c2" / "compose.yaml"), "services:\n  app:\n    image: e\nvolumes: {}\n"))
    with pytest.raises(ValueError, match=r"network_mode: only 'none'"):
        load_config(write(str(tmp_path / "c3" / "compose.yaml"), "services:\n  app:\n    image: e\n    network_mode: host\n"))
    with pytest.raises(ValueError, match="extra"):  # an unknown key of the provider's own config
        load_config({"environment": "e", "memroy": "1G"})
    cfg = load_config(write(str(tmp_path / "c4" / "sandlet.yaml"), "recipe: Dockerfile\nuser: agent\n"))
    assert cfg.recipe == str(tmp_path / "c4" / "Dockerfile") and cfg.context is None
    cfg = load_config(write(str(tmp_path / "c5" / "Dockerfile"), "FROM x\n"))
    assert cfg.recipe == str(tmp_path / "c5" / "Dockerfile") and cfg.context == str(tmp_path / "c5")


async def test_a_recipe_refused_by_the_build_names_its_line(integration_root: str, tmp_path: Path) -> None:
    recipe = write(str(tmp_path / "Dockerfile"), f"FROM {BASE_LAYER}\nEXPOSE 80\n")
    with pytest.raises(RuntimeError, match="EXPOSE"):
        await SandletSandboxEnvironment.task_init(TASK, SandletSandboxConfig(recipe=recipe, root=integration_root))


async def test_cli_cleanup_destroys_what_a_task_left(integration_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = SandletSandboxConfig(layers=[BASE_LAYER], root=integration_root)
    # Never cleaned up by their samples (held: a handle dropped destroys its owned sandbox by itself).
    held = [await SandletSandboxEnvironment.sample_init(TASK, cfg, {}) for _ in range(2)]
    with sandlet.Runtime(integration_root) as rt:
        assert len(rt.list(labels={"inspect.task": TASK})) == 2
    monkeypatch.setenv("SANDLET_ROOT", integration_root)
    await SandletSandboxEnvironment.cli_cleanup(None)
    with sandlet.Runtime(integration_root) as rt:
        assert rt.list(labels={"inspect.task": TASK}) == []
    del held


async def test_exec_remote_streams_and_kills(env: SandletSandboxEnvironment) -> None:
    # Inspect's exec_remote runs through its injected tool server (started in the background by an exec),
    # on the proxy Inspect wraps every sandbox in during an eval.
    from inspect_ai.util import ExecCompleted, ExecRemoteAwaitableOptions, ExecStdout
    from inspect_ai.util._sandbox.events import SandboxEnvironmentProxy

    proxy = SandboxEnvironmentProxy(env)
    done = await proxy.exec_remote(["sh", "-c", "echo one; echo two >&2; exit 3"], stream=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "one\n", "two\n")
    proc = await proxy.exec_remote(["sh", "-c", "for i in 1 2 3; do echo line$i; sleep 0.2; done"])
    out, code = "", None
    async for event in proc:
        if isinstance(event, ExecStdout):
            out += event.data
        elif isinstance(event, ExecCompleted):
            code = event.exit_code
    assert (out, code) == ("line1\nline2\nline3\n", 0)
    with pytest.raises(TimeoutError):
        await proxy.exec_remote(["sh", "-c", "sleep 300 # remote_marker"], ExecRemoteAwaitableOptions(timeout=2),
                              stream=False)
    assert not await running(env, "remote_marker")
    long = await proxy.exec_remote(["sh", "-c", "sleep 300 # remote_killed"])
    assert await running(env, "remote_killed")
    await long.kill()
    for _ in range(50):
        if not await running(env, "remote_killed"):
            break
        await anyio.sleep(0.1)
    assert not await running(env, "remote_killed")


async def test_task_cleanup_leaves_another_process_sandboxes(integration_root: str) -> None:
    # Another eval of the same task on the same root: its sandbox carries the same labels, another owner.
    script = (f"import sandlet, sys\nrt = sandlet.Runtime({integration_root!r})\n"
              f"sb = rt.create(layers=[{BASE_LAYER!r}], labels={{'inspect.provider': 'sandlet', 'inspect.task': {TASK!r}}})\n"
              "print(sb.id, flush=True)\nsys.stdin.read()\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(sandlet.__file__))))
    other = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert other.stdout is not None
        other_id = other.stdout.readline().strip()
        assert other_id, "the other process made no sandbox"
        cfg = SandletSandboxConfig(layers=[BASE_LAYER], root=integration_root)
        mine = await SandletSandboxEnvironment.sample_init(TASK, cfg, {})
        await SandletSandboxEnvironment.task_cleanup(TASK, cfg, True)
        with sandlet.Runtime(integration_root) as rt:
            left = [s["id"] for s in rt.list(labels={"inspect.task": TASK})]
        assert left == [other_id], left  # this process's went, the other's stays
        del mine
    finally:
        other.communicate("", timeout=60)
