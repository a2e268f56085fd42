"""End to end: ``inspect eval task.py --sandbox sandlet:CONFIG`` with Inspect's mock model calling the bash(),
text_editor() and bash_session() tools in a sandlet sandbox, scored in the sandbox.

The provider is found the way a user's install finds it: through the ``inspect_ai`` entry point declared in
pyproject.toml (the build writes the dist-info a wheel install would, beside the build tree's package), not by
an import in the task. Afterwards no sandbox of the eval is left in the runtime root.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (scripts/setup.sh installs it)")

import sandlet  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402

from .conftest import BASE_LAYER, write  # noqa: E402

EXAMPLE_TASK = Path(__file__).resolve().parents[3] / "examples" / "python" / "inspect_task.py"


def inspect_eval(root: str, tmp_path: Path, task: str) -> Tuple[List[str], Dict[str, str]]:
    """The `inspect eval` command line of `task` (of inspect_task.py) with a sandlet config, and its env."""
    config = write(str(tmp_path / "sandlet.yaml"),
                   f"layers: [{BASE_LAYER}]\nworkdir: /root\nroot: {root}\nmemory: 1G\npids: 512\n")
    env = dict(os.environ)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(sandlet.__file__)))
    env["PYTHONPATH"] = package_dir  # beside the package: its dist-info (the build writes it, as a wheel install does)
    env.update(INSPECT_LOG_DIR=str(tmp_path / "logs"), INSPECT_DISPLAY="plain", NO_COLOR="1",
               INSPECT_TELEMETRY="", HOME=str(tmp_path))
    shutil.copy(EXAMPLE_TASK, tmp_path / "inspect_task.py")  # (Inspect takes relative task paths)
    return [sys.executable, "-m", "inspect_ai", "eval", f"inspect_task.py@{task}", "--sandbox",
            f"sandlet:{config}"], env


def test_inspect_eval_with_the_mock_model(integration_root: str, tmp_path: Path) -> None:
    cmd, env = inspect_eval(integration_root, tmp_path, "sandlet_tools")
    p = subprocess.run(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-6000:]
    logs = sorted((tmp_path / "logs").glob("*.eval"))
    assert len(logs) == 1, (logs, p.stdout[-3000:])
    log = read_eval_log(str(logs[0]))
    assert log.status == "success", log.error
    assert log.eval.sandbox is not None and log.eval.sandbox.type == "sandlet"
    assert log.samples
    sample = log.samples[0]
    tool_results = [m for m in sample.messages if m.role == "tool"]
    summary = [(m.function, m.error, m.text[:200]) for m in tool_results]
    assert [m.function for m in tool_results] == ["bash", "text_editor", "bash_session", "bash_session"], summary
    assert all(m.error is None for m in tool_results), summary
    assert "root\n/root" in tool_results[0].text, summary
    assert "saved" in tool_results[3].text, summary
    assert sample.scores
    score = next(iter(sample.scores.values()))
    assert score.value == "C" and score.answer == "42", score
    assert log.results is not None and log.results.scores[0].metrics["accuracy"].value == 1.0
    with sandlet.Runtime(integration_root) as rt:
        assert rt.list() == [], "the eval left sandboxes behind"


def test_parallel_samples_each_in_a_sandbox_of_their_own(integration_root: str, tmp_path: Path) -> None:
    # Eight samples start together (no container daemon to queue on); each solves its own instance.
    cmd, env = inspect_eval(integration_root, tmp_path, "sandlet_parallel")
    p = subprocess.run([*cmd, "-T", "samples=8", "--max-samples", "8", "--max-sandboxes", "8"], env=env, cwd=tmp_path,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-6000:]
    (path,) = sorted((tmp_path / "logs").glob("*.eval"))
    log = read_eval_log(str(path))
    assert log.status == "success", log.error
    assert log.samples is not None and len(log.samples) == 8
    answers = sorted((s.metadata["n"], next(iter(s.scores.values())).answer) for s in log.samples if s.scores)
    assert answers == [(n, str(n * n)) for n in range(8)], answers
    assert log.results is not None and log.results.scores[0].metrics["accuracy"].value == 1.0
    with sandlet.Runtime(integration_root) as rt:
        assert rt.list() == [], "the eval left sandboxes behind"


def processes_with(marker: str) -> List[int]:
    pids = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(pid))
        except (OSError, ValueError):
            pass
    return pids


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_a_killed_eval_leaves_no_sandbox_and_no_process(integration_root: str, tmp_path: Path,
                                                         how: signal.Signals) -> None:
    marker = "sandlet-inspect-hang-marker"
    cmd, env = inspect_eval(integration_root, tmp_path, "sandlet_hang")
    p = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not processes_with(marker):  # the tool's shell (its command line holds the marker)
            assert p.poll() is None, p.communicate()[0].decode()[-3000:]
            assert time.monotonic() < deadline, "the sample's command never started"
            time.sleep(0.2)
        p.send_signal(how)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if p.stdout:
            p.stdout.close()
    # With Ctrl-C Inspect's own cleanup runs; after kill -9 the library's owner check does it (at the
    # latest when the next runtime opens the root).
    with sandlet.Runtime(integration_root) as rt:
        left = rt.list(labels={"inspect.provider": "sandlet"})
    assert left == [], left
    assert processes_with(marker) == []
