"""Harbor (Terminal-Bench's harness) runs its trials in sandlet sandboxes: ``harbor run --env
sandlet.harbor:SandletEnvironment`` over local tasks written here. Harbor's oracle agent scores 1.0 and its nop
agent 0.0 on 8 trials in parallel; a task given as a Dockerfile is built with ``sandlet build``; a runaway
command is killed at the agent's timeout with its whole tree; nothing stays behind.

Harbor needs Python >= 3.12: its own virtual environment (.venv-harbor, made by scripts/setup.sh with a 3.12
interpreter where the machine has one) and the sandlet extension built for that interpreter. Without either,
these tests SKIP and say why."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import time
from typing import Dict, List

import pytest

import sandlet
from conftest import REPO, mounts_under
from integrations.conftest import BASE_LAYER, write

ENVIRONMENT = "harbor-debian"
HARBOR_VENV = os.environ.get("SANDLET_HARBOR_VENV", os.path.join(REPO, ".venv-harbor"))
HARBOR = os.path.join(HARBOR_VENV, "bin", "harbor")
PACKAGE = os.environ.get("SANDLET_PYTHONPATH", os.path.join(REPO, "build", "python"))


def _why_not() -> str:
    if not os.access(HARBOR, os.X_OK):
        return f"no Harbor at {HARBOR} (scripts/setup.sh makes it where a Python >= 3.12 exists)"
    if not glob.glob(os.path.join(PACKAGE, "sandlet", "_sandlet.cpython-312-*.so")) and \
            not glob.glob(os.path.join(PACKAGE, "sandlet", "_sandlet.cpython-313-*.so")):
        return f"no sandlet extension for Harbor's interpreter in {PACKAGE}/sandlet (built where pyenv has 3.12)"
    return ""


pytestmark = pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "ready")


def task(root: str, name: str, solve: str, test: str, *, agent_timeout: float = 60, image: str = ENVIRONMENT,
         dockerfile: str = "") -> str:
    d = os.path.join(root, name)
    env = "" if dockerfile else f'docker_image = "{image}"\n'
    write(os.path.join(d, "task.toml"),
          'schema_version = "1.4"\n[agent]\ntimeout_sec = %s\n[verifier]\ntimeout_sec = 60.0\n'
          '[environment]\n%sbuild_timeout_sec = 300.0\nnetwork_mode = "no-network"\n' % (agent_timeout, env))
    write(os.path.join(d, "instruction.md"), f"Task {name}.\n")
    write(os.path.join(d, "solution", "solve.sh"), "#!/bin/bash\nset -e\n" + solve)
    write(os.path.join(d, "tests", "test.sh"), "#!/bin/bash\n" + test)
    if dockerfile:
        write(os.path.join(d, "environment", "Dockerfile"), dockerfile)
    return d


def harbor(root: str, tasks: str, agent: str, jobs: str, name: str, *extra: str,
           timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update({"PYTHONPATH": PACKAGE, "SANDLET_ROOT": root, "HARBOR_TELEMETRY": "0",
                "HOME": os.path.join(jobs, "home")})
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run([HARBOR, "run", "-p", tasks, "-a", agent, "-e", "sandlet.harbor:SandletEnvironment",
                           "-o", jobs, "--job-name", name, "-y", *extra],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=timeout)


def harbor_run(root: str, tasks: str, agent: str, jobs: str, name: str, *extra: str, timeout: float = 600) -> Dict:
    p = harbor(root, tasks, agent, jobs, name, *extra, timeout=timeout)
    result = os.path.join(jobs, name, "result.json")
    assert p.returncode == 0 and os.path.exists(result), p.stdout[-4000:]
    with open(result) as f:
        return json.load(f)


def trials(jobs: str, name: str) -> List[Dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(jobs, name, "*", "result.json"))):
        with open(path) as f:
            out.append(json.load(f))
    return out


def mean(result: Dict) -> float:
    evals = result["stats"]["evals"]
    (only,) = evals.values()
    metrics = only["metrics"]
    assert metrics, only
    return metrics[0]["mean"]


@pytest.fixture(scope="module")
def harbor_root(integration_root: str) -> str:
    with sandlet.Runtime(integration_root) as rt:
        rt.env_create(ENVIRONMENT, [BASE_LAYER])
    return integration_root


def processes_with(text: str) -> List[str]:
    """Host processes whose command line contains ``text`` (read from /proc, no tool needed)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def left_in(root: str) -> List[str]:
    with sandlet.Runtime(root) as rt:
        return [s["id"] for s in rt.list()]


def test_oracle_scores_one_and_nop_zero_on_eight_parallel_trials(harbor_root: str, tmp_path) -> None:
    tasks = str(tmp_path / "tasks")
    for i in range(7):
        task(tasks, f"count-{i}",
             solve=f"mkdir -p /app && cd /app && seq 1 {i + 3} > numbers && awk '{{s+=$1}} END {{print s}}' numbers > sum\n",
             test=f'[ "$(cat /app/sum 2>/dev/null)" = "{(i + 3) * (i + 4) // 2}" ] && echo 1 > /logs/verifier/reward.txt '
                  '|| echo 0 > /logs/verifier/reward.txt\n')
    # One task from a recipe, built with `sandlet build` (once, whatever the trials in parallel).
    task(tasks, "built", dockerfile=f"FROM {ENVIRONMENT}\nRUN mkdir -p /opt/tool && echo 'echo built-ok' > /opt/tool/run.sh\n",
         solve="mkdir -p /app && bash /opt/tool/run.sh > /app/out\n",
         test='[ "$(cat /app/out 2>/dev/null)" = built-ok ] && echo 1 > /logs/verifier/reward.txt '
              '|| echo 0 > /logs/verifier/reward.txt\n')
    jobs = str(tmp_path / "jobs")
    t0 = time.monotonic()
    oracle = harbor_run(harbor_root, tasks, "oracle", jobs, "oracle", "-n", "8")
    took = time.monotonic() - t0
    ts = trials(jobs, "oracle")
    assert len(ts) == 8
    assert all(t.get("exception_info") is None for t in ts), [t.get("exception_info") for t in ts]
    assert mean(oracle) == 1.0
    print(f"harbor oracle: 8 trials in {took:.1f} s")
    # What the verifier left came back to each trial's directory (download_dir).
    rewards = glob.glob(os.path.join(jobs, "oracle", "*", "verifier", "reward.txt"))
    assert len(rewards) == 8, rewards
    nop = harbor_run(harbor_root, tasks, "nop", jobs, "nop", "-n", "8")
    assert mean(nop) == 0.0
    assert left_in(harbor_root) == []


def test_a_runaway_command_is_killed_at_the_timeout_with_its_tree(harbor_root: str, tmp_path) -> None:
    marker = f"{4321 + os.getpid() % 1000}.5"
    tasks = str(tmp_path / "tasks")
    task(tasks, "runaway", agent_timeout=3,
         solve=f"(sleep {marker} &) ; sleep {marker} & while true; do sleep {marker}; done\n",
         test="echo 0 > /logs/verifier/reward.txt\n")
    jobs = str(tmp_path / "jobs")
    t0 = time.monotonic()
    harbor_run(harbor_root, os.path.join(tasks, "runaway"), "oracle", jobs, "runaway")
    took = time.monotonic() - t0
    (t,) = trials(jobs, "runaway")
    assert t["exception_info"]["exception_type"] == "AgentTimeoutError", t["exception_info"]
    assert took < 120
    # Not one of the command's processes is left, inside or on the host (a sandbox's processes are the host's).
    assert processes_with(f"sleep {marker}") == []
    assert left_in(harbor_root) == []


def test_a_recipe_it_cannot_honour_offline_is_refused_by_name(harbor_root: str, tmp_path) -> None:
    tasks = str(tmp_path / "tasks")
    task(tasks, "bad-recipe", dockerfile=f"FROM {ENVIRONMENT}\nADD https://example.com/x.tar.gz /opt/\n",
         solve="true\n", test="echo 1 > /logs/verifier/reward.txt\n")
    jobs = str(tmp_path / "jobs")
    harbor_run(harbor_root, os.path.join(tasks, "bad-recipe"), "oracle", jobs, "bad")
    (t,) = trials(jobs, "bad")
    info = t["exception_info"]
    assert info is not None
    assert "ADD" in info["exception_message"], info
    assert left_in(harbor_root) == []


def test_ek_options_unknown_keys_are_refused_by_name_known_ones_taken(harbor_root: str, tmp_path) -> None:
    tasks = str(tmp_path / "tasks")
    hello = task(tasks, "hello", solve="mkdir -p /app && echo hi > /app/out\n",
                 test='[ "$(cat /app/out)" = hi ] && echo 1 > /logs/verifier/reward.txt\n')
    jobs = str(tmp_path / "jobs")
    # A misspelt option (backend) must not be ignored: refused before any trial, named, with what is accepted.
    p = harbor(harbor_root, hello, "oracle", jobs, "typo", "--ek", "backnd=microvm", "--ek", "network=none")
    assert p.returncode != 0, p.stdout[-4000:]
    said = " ".join(p.stdout.split())  # (Harbor's console wraps long lines)
    assert "unknown option 'backnd' (--ek); accepted: root, environment, network, backend, build_network, auto_mounting" in said, \
        p.stdout[-4000:]
    assert trials(jobs, "typo") == []
    # The accepted ones reach the sandbox (root: this root through the option rather than $SANDLET_ROOT).
    ok = harbor_run(str(tmp_path), hello, "oracle", jobs, "ok", "--ek", f"root={harbor_root}",
                    "--ek", f"environment={ENVIRONMENT}", "--ek", "network=none", "--ek", "backend=container")
    assert mean(ok) == 1.0
    assert left_in(harbor_root) == []
