"""Runs the Python examples (examples/python/) as their users would, each against a throw-away runtime root,
and checks what they print and what they leave behind.

    SANDLET_PYTHONPATH=<build>/python SANDLET_TEST_ROOTFS=<build>/test-rootfs \\
        .venv/bin/python -m pytest test/python/test_examples.py

SANDLET_PYTHONPATH: the build's python directory (default: where the importable sandlet is, else
build/python in the repository); SANDLET_TEST_ROOTFS: a busybox root filesystem (default: test-rootfs beside that python
directory). Tests whose name ends in "_debian" need the
Debian base layer of scripts/debian-base.sh: a session fixture builds it once (cached in /var/cache/sandlet; they
are skipped when it cannot be built, e.g. offline); select or deselect them with ``-k debian``. Needs root.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "python"


def _python_dir() -> str:
    """$SANDLET_PYTHONPATH, else where the sandlet this interpreter imports lives (ctest sets PYTHONPATH),
    else the repository's build/python."""
    if os.environ.get("SANDLET_PYTHONPATH"):
        return os.environ["SANDLET_PYTHONPATH"]
    try:
        import sandlet as found
        return str(Path(found.__file__).resolve().parents[1])
    except ImportError:
        return str(REPO / "build" / "python")


PYTHONPATH = _python_dir()
ROOTFS = os.environ.get("SANDLET_TEST_ROOTFS", str(Path(PYTHONPATH).parent / "test-rootfs"))

if os.geteuid() != 0:
    pytest.skip("the examples need root (namespaces, cgroups, mounts)", allow_module_level=True)
if not Path(PYTHONPATH, "sandlet").is_dir():
    pytest.skip(f"no sandlet module in {PYTHONPATH}: build first or set SANDLET_PYTHONPATH",
                allow_module_level=True)
sys.path.insert(0, PYTHONPATH)
import sandlet  # noqa: E402  (after the path is known)


# ---- helpers --------------------------------------------------------------------------------------------


def run_example(script: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Runs examples/python/<script> with this interpreter and the build's module; output as text."""
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, PYTHONUNBUFFERED="1")
    env.pop("SANDLET_ROOT", None)  # every example gets its root explicitly
    # What an example's libraries leave in the temporary directory (torch's compile cache) goes with the run.
    with tempfile.TemporaryDirectory(prefix="sandlet-example-") as scratch:
        env["TMPDIR"] = scratch
        return subprocess.run([sys.executable, str(EXAMPLES / script), *args], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout)


def explain(p: subprocess.CompletedProcess) -> str:
    return f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"


def mounts_under(root: Path) -> List[str]:
    """Mount points at or below root, from /proc/self/mountinfo (octal escapes decoded)."""
    found = []
    prefix = str(root).rstrip("/")
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            if mp == prefix or mp.startswith(prefix + "/"):
                found.append(mp)
    return found


def tmpfs_state_of(root: Path) -> List[str]:
    """The runtime's per-root state directories on tmpfs that still name this root (see `<root>/sandboxes`)."""
    states = []
    for base in (Path("/run/sandlet-state/roots"), Path("/dev/shm/sandlet-state/roots")):
        for d in base.glob("*") if base.is_dir() else []:
            try:
                if (d / "root").read_text().strip() == str(root):
                    states.append(str(d))
            except OSError:
                pass
    return states


def list_sandboxes(root: Path, label: str | None = None) -> List[Dict]:
    with sandlet.Runtime(root) as rt:
        return rt.list(label=label)


def iteration_rewards(text: str) -> Dict[int, float]:
    """{iteration: mean reward} from the trainer's "iter   3/20  mean reward 0.297 ..." lines."""
    return {int(i): float(r) for i, r in re.findall(r"^iter +(\d+)/\d+ +mean reward ([0-9.]+)", text, re.M)}


def reward_curve(text: str) -> List[float]:
    m = re.search(r"^reward curve: (.*)$", text, re.M)
    assert m, "no 'reward curve:' line in the trainer's output"
    return [float(x) for x in m.group(1).split()]


# ---- fixtures -------------------------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """A throw-away runtime root. Afterwards: whatever is left is destroyed and swept, no mount may remain
    under it, then it is removed."""
    root = tmp_path / "root"
    root.mkdir()
    yield root
    with sandlet.Runtime(root) as rt:
        for s in rt.list():
            try:
                rt.attach(s["id"]).destroy()
            except sandlet.Error:
                pass
        rt.gc()
    left = mounts_under(root)
    assert not left, f"mounts left under {root}: {left}"
    assert not tmpfs_state_of(root), f"tmpfs state of {root} left: {tmpfs_state_of(root)}"
    shutil.rmtree(root, ignore_errors=False)


@pytest.fixture(scope="session")
def busybox() -> str:
    if not Path(ROOTFS, "bin/sh").exists():
        pytest.skip(f"no busybox root filesystem at {ROOTFS}: set SANDLET_TEST_ROOTFS")
    return ROOTFS


# ---- quickstart -----------------------------------------------------------------------------------------


def test_quickstart(root: Path, busybox: str) -> None:
    p = run_example("quickstart.py", str(root), busybox, timeout=60)
    assert p.returncode == 0, explain(p)
    lines = p.stdout.splitlines()
    expected = [
        rf"runtime at {re.escape(str(root))}, sandlet {re.escape(sandlet.__version__)}",
        r"created sandbox [0-9a-f]{12}",
        r"stdout: hello from sandbox, running as uid 0",
        r"exit code: 0 \(signal 0, timed out: 0\)",
        r"/work/answer.txt: written inside the sandbox",
        r"destroyed",
    ]
    assert len(lines) == len(expected), explain(p)
    for line, pattern in zip(lines, expected):
        assert re.fullmatch(pattern, line), f"{line!r} does not match {pattern!r}\n{explain(p)}"
    assert list_sandboxes(root) == []


def test_quickstart_prints_what_the_c_example_prints(root: Path, busybox: str) -> None:
    c_example = Path(PYTHONPATH).parent / "example-quickstart-c"
    if not c_example.exists():
        pytest.skip(f"no {c_example} to compare with")
    c = subprocess.run([str(c_example), str(root), busybox], stdout=subprocess.PIPE, text=True, timeout=60)
    py = run_example("quickstart.py", str(root), busybox, timeout=60)
    assert c.returncode == 0 and py.returncode == 0, explain(py)

    def same_ids(s: str) -> str:
        return re.sub(r"created sandbox [0-9a-f]+", "created sandbox ID", s)

    assert same_ids(py.stdout) == same_ids(c.stdout)


def test_quickstart_reports_a_bad_layer(root: Path) -> None:
    p = run_example("quickstart.py", str(root), str(root / "no-such-rootfs"), timeout=60)
    assert p.returncode == 1, explain(p)
    assert "quickstart: INVALID_ARGUMENT" in p.stderr and "no-such-rootfs" in p.stderr, explain(p)


# ---- rollout --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layer_from", ["directory", "store"])
def test_rollout(root: Path, busybox: str, layer_from: str) -> None:
    layer = busybox
    if layer_from == "store":  # as scripts/demo.sh does: the base layer imported once into the root's store
        with sandlet.Runtime(root) as rt:
            rt.layer_import(busybox, role="base", name="busybox")
        layer = "busybox"
    p = run_example("rollout.py", str(root), layer, "--episodes", "12", timeout=120)
    assert p.returncode == 0, explain(p)
    out = p.stdout
    for title in ("1. runtime", "2. environment", "3. burst: 12 episodes", "4. one agent turn", "5. misbehaving",
                  "6. the trainer is preempted", "7. clean-up by label", "summary"):
        assert f"== {title}" in out, f"section {title!r} missing\n{explain(p)}"
    assert "asking for fullvm anyway -> UNIMPLEMENTED (as expected)" in out
    if layer_from == "store":
        assert "content-addressed EROFS layer" in out
    # The scripted policy cycles through 8 rewrites: 12 episodes solve 6, mean reward 7/12.
    assert re.search(r"12 episodes, 6 solved, mean reward 0\.583", out), explain(p)
    for probe in ("fork bomb", "`yes` flood", "hang + children", "mount tmpfs", "unshare -U", "read answer key"):
        assert re.search(rf"ep \d  {re.escape(probe)} +-> (contained|denied|not visible)", out), probe
    assert re.search(r"attach\([0-9a-f]{12}\) now -> NOT_FOUND", out), explain(p)
    assert "nothing left: list() was empty" in out
    assert list_sandboxes(root) == []


def test_rollout_refuses_a_root_with_sandboxes(root: Path, busybox: str) -> None:
    with sandlet.Runtime(root) as rt:
        sb = rt.create(layers=[busybox], lifetime="detached", max_lifetime_s=60)
        try:
            p = run_example("rollout.py", str(root), busybox, timeout=60)
        finally:
            sb.destroy()
            sb.close()
    assert p.returncode == 2 and "already holds 1 sandbox" in p.stderr, explain(p)


# ---- fork at step k (examples/fork.cpp, part of scripts/demo.sh) ----------------------------------------


@pytest.mark.parametrize("layer_from", ["directory", "store"])
def test_fork_cpp_example(root: Path, busybox: str, layer_from: str) -> None:
    exe = Path(PYTHONPATH).parent / "example-fork-cpp"
    if not exe.exists():
        pytest.skip(f"no {exe}: build it first")
    layer = busybox
    if layer_from == "store":  # as scripts/demo.sh runs it
        with sandlet.Runtime(root) as rt:
            rt.layer_import(busybox, role="base", name="busybox")
        layer = "busybox"
    p = subprocess.run([str(exe), str(root), layer], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=60)
    assert p.returncode == 0, explain(p)
    out = p.stdout
    assert "step 2  ran the tests: 1/4 passed, reward 0.25" in out, explain(p)
    assert re.search(r"fork at step 3: snapshot sha256:[0-9a-f]{12} \(\d+ entries, \d+ bytes; processes frozen "
                     r"[0-9.]+ ms, snapshot [0-9.]+ ms\)", out), explain(p)
    assert re.search(r"then 4 children on it: fork total [0-9.]+ ms", out), explain(p)
    # Per child: its id, hostname <parent>-<i>, a fresh 16-hex-digit SANDLET_SEED, its own patch and reward.
    rows = re.findall(r"^  (\d) +([0-9a-f]{12})  (\S+) +([0-9a-f]{16})  .+?  (\d/4) +(\d\.\d\d)$", out, re.M)
    assert [(i, host, tests, reward) for i, _, host, _, tests, reward in rows] == [
        ("0", "agent-0", "4/4", "1.00"), ("1", "agent-1", "1/4", "0.25"),
        ("2", "agent-2", "4/4", "1.00"), ("3", "agent-3", "0/4", "0.00")], explain(p)
    assert len({r[1] for r in rows}) == 4 and len({r[3] for r in rows}) == 4, "ids and seeds must differ"
    # Nobody sees another's changes: the parent keeps the bug and its own later file, each child only its branch.
    assert re.search(r'^  parent +agent +echo \$\(\( \$1 - \$2 \)\) +none +yes +4 steps, last "step 4: kept going"$',
                     out, re.M), explain(p)
    for i in range(4):
        assert re.search(rf'^  child {i} +agent-{i} +.+ +branch-{i} +no +4 steps, last "step 4: .+"$', out, re.M), explain(p)
    assert "nothing left in" in out
    assert list_sandboxes(root) == []


# ---- gym environment ------------------------------------------------------------------------------------


def test_gym_env_debian(root: Path, debian_base: str) -> None:
    p = run_example("gym_env.py", "--root", str(root), "--base", debian_base, timeout=120)
    assert p.returncode == 0, explain(p)
    out = p.stdout
    assert "environments: bugfix-add@1" in out and "layer toolkit" in out, explain(p)
    # Episode 1: a wrong edit (negative reward), then the fix: terminated, return +0.75 (1/4 passed at first).
    assert re.search(r"step 3: reward -0\.25 +tests 0/4 +terminated=False truncated=False", out), explain(p)
    assert re.search(r"step 4: reward \+1\.00 +tests 4/4 +terminated=True truncated=False", out), explain(p)
    assert "episode over: solved, return +0.75" in out
    # Episode 2: no fix within the step limit.
    assert "episode over: truncated at the step limit, return +0.00" in out
    assert "returns: +0.75, +0.00; sandboxes left: 0" in out
    assert list_sandboxes(root) == []


# ---- the REINFORCE trainer, preempted and resumed -------------------------------------------------------


def test_reinforce_trainer_preempted_and_resumed_debian(root: Path, debian_base: str, tmp_path: Path) -> None:
    iterations, preempt_at, batch = 20, 4, 16
    common = ["--root", str(root), "--iterations", str(iterations), "--batch", str(batch), "--seed", "0",
              "--base", debian_base]
    job_dir = tmp_path / "job"

    # 1. Killed by its own SIGKILL in the middle of iteration 4's rollout.
    first = run_example("reinforce_trainer.py", *common, "--job-dir", str(job_dir), "--preempt-at",
                        str(preempt_at))
    assert first.returncode == -signal.SIGKILL, explain(first)
    assert f"iter {preempt_at:3d}  PREEMPTED" in first.stdout, explain(first)
    job = re.search(r"^job (reinforce-[0-9a-f]+) \(new\)", first.stdout, re.M).group(1)
    assert (job_dir / "checkpoint.pt").exists()
    # Its sandboxes outlived it: detached, labelled with the job and the interrupted iteration.
    survivors = list_sandboxes(root, f"job={job}")
    assert len(survivors) == batch, f"{len(survivors)} sandboxes of {job} after the kill, expected {batch}"
    assert all(s["spec"]["labels"]["iteration"] == str(preempt_at) for s in survivors)
    assert all(s["spec"]["lifetime"] == "detached" and s["spec"]["max_lifetime_s"] > 0 for s in survivors)

    # 2. The same command without --preempt-at resumes: reattaches, checks the patches, finishes.
    second = run_example("reinforce_trainer.py", *common, "--job-dir", str(job_dir))
    assert second.returncode == 0, explain(second)
    m = re.search(rf"^resumed at iteration {preempt_at}: reattached (\d+) sandboxes, (\d+) already had their "
                  r"patch applied", second.stdout, re.M)
    assert m, explain(second)
    reattached, applied = int(m.group(1)), int(m.group(2))
    assert reattached == batch, explain(second)
    assert batch // 4 <= applied <= batch // 2, explain(second)  # a quarter done, a quarter in flight

    # The curve spans both runs; the iterations before the kill are the first run's; the reward rises.
    curve = reward_curve(second.stdout)
    assert len(curve) == iterations
    before = iteration_rewards(first.stdout)
    assert sorted(before) == list(range(preempt_at))
    assert all(abs(before[i] - curve[i]) <= 0.006 for i in range(preempt_at)), (before, curve)
    start, end = sum(curve[:3]) / 3, sum(curve[-3:]) / 3
    assert start < 0.45 and end > 0.8, f"reward did not improve enough: {curve}"

    # Nothing of the job is left: no sandbox listed, no mount under the root (the fixture checks the rest).
    assert list_sandboxes(root, f"job={job}") == []
    assert "nothing of the job left" in second.stdout
    assert mounts_under(root) == []

    # The resumed run found every layer in the store and reused the environments.
    assert len(re.findall(r"^  layer .* already in the store", second.stdout, re.M)) == 8, explain(second)
    assert "(base + workspace + toolkit each; 0 new version(s))" in second.stdout

    # 3. Deterministic: an uninterrupted run with the same seed learns exactly the same curve. It also
    # updates the toolkit: one layer is imported, the base and the six workspaces are reused, and each
    # environment gets a new version.
    straight = run_example("reinforce_trainer.py", *common, "--job-dir", str(tmp_path / "job-straight"),
                           "--toolkit-version", "2")
    assert straight.returncode == 0, explain(straight)
    assert reward_curve(straight.stdout) == curve
    imported = re.findall(r"^  layer (\w+) +(\S+) .* imported", straight.stdout, re.M)
    assert imported == [("toolkit", "agent-harness-v2")], explain(straight)
    assert "bugfix-add@2" in straight.stdout and "6 new version(s)" in straight.stdout, explain(straight)

    # 4. A finished job is not trained again; a job dir with other settings is refused.
    again = run_example("reinforce_trainer.py", *common, "--job-dir", str(job_dir))
    assert again.returncode == 0 and "finished already" in again.stdout, explain(again)
    other = run_example("reinforce_trainer.py", *common[:-2], "--batch", "8", "--job-dir", str(job_dir),
                        "--base", debian_base)
    assert other.returncode == 1 and "started with batch=16" in other.stderr, explain(other)
