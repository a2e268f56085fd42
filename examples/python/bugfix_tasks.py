"""A toy "bug fixing" task family as layered sandlet environments (shared by gym_env.py and
reinforce_trainer.py; not meant to be run by itself).

Each task is a tiny Python repository with one bug and a unittest file. An environment is three layers,
each a content-addressed EROFS layer of the runtime's store:

    base       Debian bookworm with python3 (scripts/debian-base.sh)           shared by every task
    workspace  /work/repo: solution.py (buggy), test_solution.py, TASK.md     one per task
    toolkit    /opt/agent: apply_patch.py, run_tests.py (the agent harness)   shared by every task

so ``env_create("bugfix-add", [base, workspace_add, toolkit])`` and so on. Changing the toolkit re-imports
one small layer and bumps each environment's version; the base and the workspaces are not touched.

Candidate patches (the trainer's action space) are search/replace edits of solution.py, each the fix of one
task (a few fix none); the reward is the fraction of the task's tests that pass after the edit.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

REPO_DIR = "/work/repo"
SOURCE_FILE = "solution.py"
AGENT_DIR = "/opt/agent"
RUN_TESTS = ["python3", f"{AGENT_DIR}/run_tests.py"]
APPLY_PATCH = ["python3", f"{AGENT_DIR}/apply_patch.py"]
TOOLKIT_VERSION = "1"


@dataclass(frozen=True)
class Task:
    name: str
    statement: str
    source: str  # solution.py, with the bug
    tests: str  # test_solution.py: four unittest cases


@dataclass(frozen=True)
class Patch:
    name: str
    old: str  # replaced once in solution.py (first occurrence); no match leaves the file unchanged
    new: str


def _tests(func: str, cases: Sequence[Tuple[str, str]]) -> str:
    """A unittest module with one test method per (call, expected) pair."""
    lines = ["import unittest", "", f"from solution import {func}", "", "",
             f"class Test{func.title().replace('_', '')}(unittest.TestCase):"]
    for i, (call, expected) in enumerate(cases):
        lines += [f"    def test_{i}(self):", f"        self.assertEqual({call}, {expected})", ""]
    return "\n".join(lines).rstrip() + "\n"


TASKS: List[Task] = [
    Task("add", "add(a, b) must return the sum of a and b.",
         'def add(a, b):\n    """Returns a + b."""\n    return a - b\n',
         _tests("add", [("add(2, 3)", "5"), ("add(-1, 1)", "0"), ("add(10, 5)", "15"), ("add(7, -2)", "5")])),
    Task("is_even", "is_even(n) must be True exactly for even integers.",
         'def is_even(n):\n    """True when n is even."""\n    return n % 2 == 1\n',
         _tests("is_even", [("is_even(4)", "True"), ("is_even(7)", "False"), ("is_even(0)", "True"),
                            ("is_even(-3)", "False")])),
    Task("area", "area(width, height) must return the area of the rectangle.",
         'def area(width, height):\n    """The area of a width x height rectangle."""\n    return width + height\n',
         _tests("area", [("area(3, 4)", "12"), ("area(1, 5)", "5"), ("area(0, 7)", "0"), ("area(6, 6)", "36")])),
    Task("clamp", "clamp(x, lo, hi) must limit x to the range [lo, hi].",
         'def clamp(x, lo, hi):\n    """x limited to the range [lo, hi]."""\n    return max(lo, min(x, lo))\n',
         _tests("clamp", [("clamp(5, 0, 10)", "5"), ("clamp(-3, 0, 10)", "0"), ("clamp(15, 0, 10)", "10"),
                          ("clamp(8, 2, 9)", "8")])),
    Task("mean", "mean(values) must return the arithmetic mean of a non-empty list.",
         'def mean(values):\n    """The arithmetic mean of a non-empty list."""\n'
         '    return sum(values) / (len(values) + 1)\n',
         _tests("mean", [("mean([2, 4])", "3"), ("mean([5])", "5"), ("mean([1, 2, 3, 4])", "2.5"),
                         ("mean([3, 3, 3])", "3")])),
    Task("last", "last(items) must return the last element of a non-empty list.",
         'def last(items):\n    """The last element of a non-empty list."""\n    return items[1]\n',
         _tests("last", [("last([1, 2, 3])", "3"), ('last(["a"])', '"a"'), ("last([4, 5, 6, 7])", "7"),
                         ("last([9, 8])", "8")])),
]

PATCHES: List[Patch] = [
    Patch("' - ' -> ' + '", " - ", " + "),
    Patch("'== 1' -> '== 0'", "== 1", "== 0"),
    Patch("' + ' -> ' * '", " + ", " * "),  # fixes area, and mean too (len * 1)
    Patch("'x, lo)' -> 'x, hi)'", "x, lo)", "x, hi)"),
    Patch("' + 1)' -> ')'", " + 1)", ")"),
    Patch("'[1]' -> '[-1]'", "[1]", "[-1]"),
    Patch("negate the result", "return ", "return -"),  # never a fix
    Patch("'(a, b)' -> '(b, a)'", "(a, b)", "(b, a)"),  # never a fix
]

# ---- the toolkit layer: the agent harness inside every sandbox ------------------------------------------

# Applies one search/replace patch to /work/repo, idempotently: the trainer may be killed while it runs and
# then asks again (or asks --status). The marker (written first) records the file's hash before the edit,
# so "marker present and file still unchanged" means the edit itself did not happen yet.
APPLY_PATCH_PY = textwrap.dedent('''\
    """apply_patch.py PATCH.json|-   apply {"id", "file", "old", "new"} once;  apply_patch.py --status"""
    import hashlib, json, os, sys

    REPO = "/work/repo"
    MARKER = "/work/.agent/patch.json"


    def sha(path):
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()


    def write_atomically(path, text):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)


    def status():
        """{"applied": bool, "id": patch id or None}"""
        if not os.path.exists(MARKER):
            return {"applied": False, "id": None}
        with open(MARKER) as f:
            m = json.load(f)
        edited = not m["matched"] or sha(os.path.join(REPO, m["file"])) != m["before"]
        return {"applied": edited, "id": m["id"]}


    def apply(patch):
        path = os.path.join(REPO, patch["file"])
        st = status()
        if st["id"] is not None and st["id"] != patch["id"]:
            sys.exit(f"apply_patch: patch {st['id']} was applied already, refusing patch {patch['id']}")
        if st["applied"]:
            print("already applied")
            return
        with open(path) as f:
            src = f.read()
        matched = patch["old"] in src
        os.makedirs(os.path.dirname(MARKER), exist_ok=True)
        write_atomically(MARKER, json.dumps({"id": patch["id"], "file": patch["file"], "matched": matched,
                                             "before": sha(path)}))
        if matched:
            write_atomically(path, src.replace(patch["old"], patch["new"], 1))
        print("applied" if matched else "no match: file unchanged")


    if __name__ == "__main__":
        if sys.argv[1:] == ["--status"]:
            print(json.dumps(status()))
        elif len(sys.argv) == 2:
            arg = sys.argv[1]
            apply(json.load(sys.stdin if arg == "-" else open(arg)))
        else:
            sys.exit(__doc__)
''')

# Runs the repository's tests; the last stdout line is the verdict as JSON, the details go to stderr.
RUN_TESTS_PY = textwrap.dedent('''\
    """run_tests.py: runs /work/repo/test_*.py; prints {"passed": P, "total": T, "failed": [...]} last."""
    import json, sys, unittest

    REPO = "/work/repo"
    sys.path.insert(0, REPO)
    suite = unittest.TestLoader().discover(REPO, pattern="test_*.py", top_level_dir=REPO)
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=2).run(suite)
    failed = [t.id() for t, _ in result.failures + result.errors]
    passed = result.testsRun - len(failed)
    print(json.dumps({"passed": passed, "total": result.testsRun, "failed": failed}))
    sys.exit(0 if result.wasSuccessful() else 1)
''')

# ---- building and importing the layers -----------------------------------------------------------------


def repo_root() -> Path:
    """The sandlet checkout this example lives in (examples/python/ -> ../..)."""
    return Path(__file__).resolve().parents[2]


def default_base() -> str:
    """The cached Debian bookworm rootfs (python3, git), built on first use by scripts/debian-base.sh."""
    script = repo_root() / "scripts" / "debian-base.sh"
    if not script.exists():
        raise SystemExit(f"cannot find {script}; pass --base DIR (a root filesystem with python3)")
    try:
        out = subprocess.run([str(script), "--print-path"], check=True, stdout=subprocess.PIPE, text=True)
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"{script} --print-path failed (exit {e.returncode}); pass --base DIR instead")
    return out.stdout.strip()


def check_base(base: str) -> str:
    base = os.path.abspath(base)
    if not os.path.exists(os.path.join(base, "usr/bin/python3")):
        raise SystemExit(f"--base {base}: no usr/bin/python3 there; the tasks need a root filesystem with python3")
    return base


# A layer's digest covers its metadata too: fixed mtimes make the same files the same layer on every run, so
# a re-run finds its layers in the store instead of importing new ones (and new environment versions).
_MTIME = 1_700_000_000


def _write_tree(root: Path, files: Dict[str, Tuple[str, int]]) -> Path:
    """Writes {relative path: (text, mode)} under root; every directory 0755 (the sandbox's root is not the
    host's root: it must be able to traverse them)."""
    for rel, (text, mode) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
    for p in sorted(root.rglob("*"), reverse=True) + [root]:  # children first: utime on a file touches its dir
        if p.is_dir():
            p.chmod(0o755)
        os.utime(p, (_MTIME, _MTIME))
    return root


def workspace_tree(scratch: Path, task: Task) -> Path:
    return _write_tree(scratch / f"workspace-{task.name}", {
        f"work/repo/{SOURCE_FILE}": (task.source, 0o644),
        "work/repo/test_solution.py": (task.tests, 0o644),
        "work/repo/TASK.md": (f"# {task.name}\n\n{task.statement}\nRun the tests: {' '.join(RUN_TESTS)}\n", 0o644),
    })


def toolkit_tree(scratch: Path, version: str) -> Path:
    return _write_tree(scratch / "toolkit", {
        "opt/agent/apply_patch.py": (APPLY_PATCH_PY, 0o755),
        "opt/agent/run_tests.py": (RUN_TESTS_PY, 0o755),
        "opt/agent/VERSION": (version + "\n", 0o644),
    })


def _import(rt: Any, path: Path | str, role: str, name: str, log: Callable[[str], None]) -> str:
    """Imports one layer (a no-op when the store holds the same content already); returns its digest."""
    res = rt.layer_import(path, role=role, name=name)
    layer, existed = res["layers"][0], res["existed"][0]
    log(f"  layer {role:<9} {name:<18} sha256:{layer['digest'][:12]}  "
        f"{'already in the store' if existed else 'imported'} ({_size(layer['size'])})")
    return layer["digest"]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _ensure_environment(rt: Any, name: str, layers: List[str], env: Dict[str, str],
                        workdir: str) -> Tuple[str, bool]:
    """("name@version", created): the latest version if it has these layers and defaults already (env_create
    would add an identical version), else a new version."""
    for e in rt.env_list():
        if e["name"] == name and e["versions"]:
            latest = e["versions"][-1]
            if latest["layers"] == layers and latest.get("env") == env and latest.get("workdir") == workdir:
                return f"{name}@{latest['version']}", False
    created = rt.env_create(name, layers, env=env, workdir=workdir)
    return f"{name}@{created['version']}", True


def prepare_environments(rt: Any, base_dir: str, scratch: Path, log: Callable[[str], None] = print,
                         toolkit_version: str = TOOLKIT_VERSION) -> Dict[str, str]:
    """Imports base, toolkit and one workspace per task into rt's store (sync sandlet.Runtime) and makes
    one environment per task. Returns {task name: "environment@version"}.

    Layers already in the store are found by digest, not imported again: a new toolkit_version imports one
    small layer and gives every environment a new version; the base and the workspaces are untouched."""
    base = _import(rt, base_dir, "base", "debian-bookworm", log)
    toolkit = _import(rt, toolkit_tree(scratch, toolkit_version), "toolkit", f"agent-harness-v{toolkit_version}",
                      log)
    env = {"PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    envs, new = {}, 0
    for task in TASKS:
        workspace = _import(rt, workspace_tree(scratch, task), "workspace", f"bugfix-{task.name}", log)
        envs[task.name], created = _ensure_environment(rt, f"bugfix-{task.name}", [base, workspace, toolkit],
                                                       env, REPO_DIR)
        new += created
    log(f"  environments: {', '.join(envs.values())} (base + workspace + toolkit each; "
        f"{new} new version(s))")
    return envs


# ---- reading the harness's answers ---------------------------------------------------------------------


def parse_verdict(stdout: str) -> Optional[Tuple[int, int]]:
    """(passed, total) from run_tests.py's last line, None when there is no verdict (e.g. it timed out)."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                v = json.loads(line)
                return int(v["passed"]), int(v["total"])
            except (ValueError, KeyError):
                return None
    return None


def score(stdout: str) -> float:
    """The fraction of tests that passed (0.0 without a verdict)."""
    v = parse_verdict(stdout)
    return v[0] / v[1] if v and v[1] > 0 else 0.0


def patch_json(action: int) -> str:
    p = PATCHES[action]
    return json.dumps({"id": action, "file": SOURCE_FILE, "old": p.old, "new": p.new})


_TOKEN = re.compile(r"[A-Za-z_]+|\d+|[^\sA-Za-z_\d]")


def tokens(text: str) -> List[str]:
    """Identifiers, numbers and single punctuation characters: the policy's bag of tokens."""
    return _TOKEN.findall(text)
