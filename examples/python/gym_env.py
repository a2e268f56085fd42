"""A Gymnasium-style environment over a sandlet sandbox: an agent fixes a bug in a small Python repository
with shell commands; the reward comes from running the task's tests inside the sandbox.

    PYTHONPATH=<build>/python python3 examples/python/gym_env.py [--root DIR] [--base DIR] [--max-steps N]

The demo plays a scripted policy (a short list of shell commands) in two episodes and prints every step: one
episode fixes its bug (terminated), one never does (truncated at the step limit). Needs root.

The class follows Gymnasium's API without depending on it: ``reset(seed=None, options=None) -> (obs, info)``,
``step(action) -> (obs, reward, terminated, truncated, info)``, ``close()``, ``action_space`` and
``observation_space``. Each ``reset`` destroys the previous episode's sandbox and creates a fresh one from the
task's layered environment (Debian base + the task's workspace + the agent toolkit; see bugfix_tasks.py):
creating one takes milliseconds, so a fresh sandbox per episode is the normal case, not a luxury.

Options: --root (runtime state directory; default $SANDLET_ROOT, else /var/lib/sandlet), --base (a root
filesystem with python3; default: the cached Debian base of scripts/debian-base.sh, built on first use).
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import sandlet

import bugfix_tasks as tasks


class TextSpace:
    """Look-alike of gymnasium.spaces.Text: any str of at most ``max_length`` characters."""

    def __init__(self, max_length: int, description: str = "") -> None:
        self.max_length = max_length
        self.description = description

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __contains__(self, x: Any) -> bool:
        return self.contains(x)

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})  # {self.description}"


class BugFixEnv:
    """One bug-fixing task per episode, in a fresh sandbox.

    - action: a shell command (str), run by ``/bin/sh -c`` in /work/repo with a timeout.
    - observation: text. After ``reset``: the task statement and the buggy file; after ``step``: the command
      echoed, its stdout+stderr (cut to ``max_obs_chars``) and its exit status.
    - reward: the change in the fraction of the task's tests that pass, measured after every action by the
      toolkit's runner inside the sandbox; an episode's return is thus "how much it fixed".
    - terminated: every test passes. truncated: ``max_steps`` actions were taken.
    - info: task, sandbox id, tests_passed, tests_total, exit_code (of the action), timed_out.
    """

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(self, rt: sandlet.Runtime, environments: Mapping[str, str], *, max_steps: int = 8,
                 command_timeout: float = 10.0, max_obs_chars: int = 4000,
                 limits: Optional[Dict[str, Any]] = None) -> None:
        """``environments``: {task name: store environment ("name" or "name@version")}, as made by
        bugfix_tasks.prepare_environments. The runtime stays the caller's: close() does not close it."""
        if not environments:
            raise ValueError("BugFixEnv: no environments given")
        self.rt = rt
        self.environments = dict(environments)
        self.max_steps = max_steps
        self.command_timeout = command_timeout
        self.max_obs_chars = max_obs_chars
        self.limits = limits or {"memory": 256 << 20, "pids": 64}
        self.action_space = TextSpace(4096, "a shell command, run by /bin/sh -c in /work/repo")
        self.observation_space = TextSpace(max_obs_chars + 200, "command output or task statement")
        self._rng = random.Random()
        self._sb: Optional[sandlet.Sandbox] = None
        self._task = ""
        self._steps = 0
        self._score = 0.0

    # ---- the Gymnasium API ----

    def reset(self, *, seed: Optional[int] = None,
              options: Optional[Dict[str, Any]] = None) -> Tuple[str, Dict[str, Any]]:
        """Starts an episode in a new sandbox. ``options={"task": name}`` picks the task, else the seeded
        RNG does (``seed`` re-seeds it, as in Gymnasium)."""
        if seed is not None:
            self._rng.seed(seed)
        task = (options or {}).get("task") or self._rng.choice(sorted(self.environments))
        if task not in self.environments:
            raise ValueError(f"reset: unknown task {task!r} (known: {', '.join(sorted(self.environments))})")
        self._drop_sandbox()
        self._sb = self.rt.create(environment=self.environments[task], limits=self.limits,
                                  labels={"example": "gym_env", "task": task}, max_lifetime_s=3600)
        self._task, self._steps = task, 0
        passed, total = self._run_tests()
        self._score = passed / total if total else 0.0
        source = self._sb.read_file(f"{tasks.REPO_DIR}/{tasks.SOURCE_FILE}").decode()
        statement = next(t.statement for t in tasks.TASKS if t.name == task)
        obs = (f"Task: {statement}\nThe code is in {tasks.REPO_DIR}; run the tests with "
               f"`{' '.join(tasks.RUN_TESTS)}`.\n$ cat {tasks.SOURCE_FILE}\n{source}")
        return obs, self._info(passed, total)

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        if self._sb is None:
            raise RuntimeError("step() before reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"step: the action must be a str of at most {self.action_space.max_length} chars")
        self._steps += 1
        r = self._sb.exec(action, timeout=self.command_timeout, output_limit=self.max_obs_chars,
                          kill_on_output_limit=True)
        passed, total = self._run_tests()
        score = passed / total if total else 0.0
        reward, self._score = score - self._score, score
        terminated = total > 0 and passed == total
        truncated = not terminated and self._steps >= self.max_steps
        info = self._info(passed, total, exit_code=r.exit_code, timed_out=r.timed_out)
        return self._observation(action, r), reward, terminated, truncated, info

    def close(self) -> None:
        """Destroys the current sandbox (the runtime is the caller's)."""
        self._drop_sandbox()

    def __enter__(self) -> "BugFixEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- helpers ----

    def _run_tests(self) -> Tuple[int, int]:
        assert self._sb is not None
        r = self._sb.exec(tasks.RUN_TESTS, timeout=30)
        return tasks.parse_verdict(r.stdout_text) or (0, 1)  # no verdict (e.g. timed out): nothing passed

    def _observation(self, action: str, r: sandlet.ExecResult) -> str:
        out = (r.stdout_text + r.stderr_text)[: self.max_obs_chars]
        status = "timed out" if r.timed_out else f"exit {r.exit_code}"
        return f"$ {action}\n{out}{'' if not out or out.endswith(chr(10)) else chr(10)}[{status}]"

    def _info(self, passed: int, total: int, **extra: Any) -> Dict[str, Any]:
        assert self._sb is not None
        return {"task": self._task, "sandbox": self._sb.id, "tests_passed": passed, "tests_total": total,
                "step": self._steps, **extra}

    def _drop_sandbox(self) -> None:
        if self._sb is not None:
            try:
                self._sb.destroy()
            finally:
                self._sb.close()
                self._sb = None


# ---- the demo -------------------------------------------------------------------------------------------

# Scripted policies standing in for a model: (task, commands).
SCRIPTS: List[Tuple[str, List[str]]] = [
    ("last", [
        "cat solution.py",
        f"{' '.join(tasks.RUN_TESTS)} 2>&1 | tail -n 4",
        "sed -i 's/items\\[1\\]/items[len(items)]/' solution.py",  # a wrong guess first: a negative reward
        "sed -i 's/items\\[len(items)\\]/items[-1]/' solution.py && cat solution.py",
        "echo never reached: the tests pass",
    ]),
    ("clamp", ["ls -la", "grep -n lo solution.py", "python3 -c 'import solution; print(solution.clamp(5, 0, 10))'",
               "echo giving up"]),
]


def indent(text: str, prefix: str = "      | ") -> str:
    return "\n".join(prefix + line for line in text.rstrip("\n").split("\n"))


def play(env: BugFixEnv, task: str, commands: List[str], seed: int) -> float:
    obs, info = env.reset(seed=seed, options={"task": task})
    print(f"\n== episode: task {task!r} in sandbox {info['sandbox']} "
          f"({info['tests_passed']}/{info['tests_total']} tests pass at the start)")
    print(indent(obs))
    ret = 0.0
    for cmd in commands:
        obs, reward, terminated, truncated, info = env.step(cmd)
        ret += reward
        print(f"  step {info['step']}: reward {reward:+.2f}  tests {info['tests_passed']}/{info['tests_total']}"
              f"  terminated={terminated} truncated={truncated}")
        print(indent(obs))
        if terminated or truncated:
            break
    outcome = "solved" if terminated else "truncated at the step limit" if truncated else "script ended"
    print(f"  episode over: {outcome}, return {ret:+.2f}")
    return ret


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", help="runtime state directory (default: $SANDLET_ROOT, else /var/lib/sandlet)")
    p.add_argument("--base", help="base root filesystem with python3 (default: scripts/debian-base.sh --print-path)")
    p.add_argument("--max-steps", type=int, default=4, help="actions per episode before truncation (default: 4)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    base = tasks.check_base(args.base or tasks.default_base())
    try:
        with sandlet.Runtime(args.root) as rt:
            print(f"runtime at {rt.root}; layered environments (base + workspace + toolkit):")
            with tempfile.TemporaryDirectory(prefix="sandlet-gym.") as scratch:
                envs = tasks.prepare_environments(rt, base, Path(scratch))
            with BugFixEnv(rt, envs, max_steps=args.max_steps) as env:
                print(f"action_space: {env.action_space}\nobservation_space: {env.observation_space}")
                returns = [play(env, task, cmds, args.seed + i) for i, (task, cmds) in enumerate(SCRIPTS)]
            left = rt.list(label="example=gym_env")
            print(f"\nreturns: {', '.join(f'{r:+.2f}' for r in returns)}; sandboxes left: {len(left)}")
        return 0
    except sandlet.Error as e:
        print(f"gym_env: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
