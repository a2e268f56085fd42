"""Helpers of the Python conformance suite (its fixtures are in conftest.py): what the host sees, the
per-test runtime root with its leak check (``Conformance.check_no_leaks``), owner processes."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Set

import pytest

import sandlet

BACKENDS = [b for b in re.split(r"[,\s]+", os.environ.get("SANDLET_CONFORMANCE_BACKENDS", "container")) if b]


def rootfs_dir() -> str:
    path = os.environ.get("SANDLET_CONFORMANCE_ROOTFS") or os.environ.get("SANDLET_TEST_ROOTFS", "")
    if not path or not os.path.isfile(os.path.join(path, "bin", "busybox")):
        pytest.fail(f"SANDLET_TEST_ROOTFS={path!r} is not a busybox root filesystem (run the tests through ctest)")
    return path


def until(cond: Callable[[], bool], seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def host_pids(pred: Callable[[str], bool]) -> List[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and pred(p)]


def host_pids_with_argv(argv: List[str]) -> List[int]:
    want = b"".join(a.encode() + b"\0" for a in argv)
    return host_pids(lambda p: _read(f"/proc/{p}/cmdline") == want)


def host_pids_in_cgroup(sandbox_id: str) -> List[int]:
    def inside(p: str) -> bool:
        for line in _read(f"/proc/{p}/cgroup").decode(errors="replace").splitlines():
            if f"/{sandbox_id}/" in line.split(":", 2)[-1] + "/":
                return True
        return False
    return host_pids(inside)


def cgroup_dirs_named(sandbox_id: str) -> List[str]:
    found = []
    for top, dirs, _files in os.walk("/sys/fs/cgroup"):
        depth = top.count("/") - "/sys/fs/cgroup".count("/")
        if depth >= 3:
            dirs[:] = []
        found += [os.path.join(top, d) for d in dirs if d == sandbox_id]
    return found


def mount_lines() -> Set[str]:
    with open("/proc/self/mountinfo") as f:
        return {line.split(" ", 1)[1] for line in f}


class Sleeper:
    """A ``sleep N`` whose N no other test uses: its processes can be found inside and on the host."""

    counter = 0

    def __init__(self) -> None:
        Sleeper.counter += 1
        self.seconds = str(4000000 + (os.getpid() % 5000) * 100 + Sleeper.counter % 100)
        self.cmd = f"sleep {self.seconds}"

    def inside(self, sb: sandlet.Sandbox) -> int:
        r = sb.exec('n=0; for p in /proc/[0-9]*; do [ "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" = '
                    f'"sleep {self.seconds} " ] && n=$((n+1)); done; echo $n')
        return int(r.stdout) if r.exit_code == 0 else -1

    def on_host(self) -> int:
        return len(host_pids_with_argv(["sleep", self.seconds]))


class Conformance:
    """A fresh runtime root for one test and one backend, and the leak check at its end."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.rootfs = rootfs_dir()
        self.root = tempfile.mkdtemp(prefix="sandlet-conformance.")
        self.ids: Set[str] = set()
        self.mounts_before = mount_lines()
        self.rt = sandlet.Runtime(self.root)

    def spec(self, **fields: Any) -> Dict[str, Any]:
        return dict({"backend": self.backend, "layers": [self.rootfs]}, **fields)

    def create(self, **fields: Any) -> sandlet.Sandbox:
        sb = self.rt.create(self.spec(**fields))
        self.ids.add(sb.id)
        return sb

    def owner(self, script: str) -> subprocess.Popen:
        """Another process that opens this root (a trainer, say) and runs ``script`` with ``rt`` and
        ``spec`` defined; its stdout is a pipe."""
        code = ("import sys, time, sandlet\n"
                f"rt = sandlet.Runtime({self.root!r})\n"
                f"spec = {self.spec()!r}\n" + script)
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(sandlet.__file__))))
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)

    def sandbox_dirs(self) -> List[str]:
        try:
            return os.listdir(os.path.join(self.root, "sandboxes"))
        except OSError:
            return []

    def check_no_leaks(self) -> None:
        for name in self.sandbox_dirs():  # also those the test did not create itself (a warm pool's)
            name = name[len(".reclaim-"):] if name.startswith(".reclaim-") else name
            if name and not name.startswith("."):
                self.ids.add(name)
        self.rt.close()
        with sandlet.Runtime(self.root, warm_pool=False) as sweeper:
            sweeper.gc()
            assert sweeper.list() == [], f"sandboxes left listed: {sweeper.list()}"
        for sid in self.ids:
            assert until(lambda: not host_pids_in_cgroup(sid)), f"processes of {sid} left: {host_pids_in_cgroup(sid)}"
            assert until(lambda: not cgroup_dirs_named(sid)), f"cgroups of {sid} left: {cgroup_dirs_named(sid)}"

        def ours() -> List[str]:
            return [m for m in mount_lines() - self.mounts_before
                    if self.root in m or any(sid in m for sid in self.ids)]
        assert until(lambda: not ours(), 5), f"mounts left: {ours()}"
        dirs = [self.root]
        state = os.path.join(self.root, "sandboxes")
        if os.path.islink(state):
            dirs.append(os.path.realpath(state))
        for top in dirs:
            for path, subdirs, files in os.walk(top):
                for name in subdirs + files:
                    assert not any(sid in name for sid in self.ids), f"file left: {os.path.join(path, name)}"
        self.rt = sandlet.Runtime(self.root)

    def close(self) -> None:
        """Whatever a failed test left: destroyed, swept, the root removed."""
        self.rt.close()
        try:
            with sandlet.Runtime(self.root, warm_pool=False) as sweeper:
                for info in sweeper.list():
                    try:
                        sweeper.attach(info["id"]).destroy()
                    except sandlet.Error:
                        pass
                sweeper.gc()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def kill9(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait()
    if p.stdout:
        p.stdout.close()


def first_line(p: subprocess.Popen, seconds: float = 60) -> str:
    """The owner's first line (it prints one when it has done its part)."""
    assert p.stdout is not None
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    if not sel.select(seconds):
        return ""
    return p.stdout.readline().strip()


def shell(sb: sandlet.Sandbox, script: str, timeout: Optional[float] = 30) -> str:
    r = sb.exec(script, timeout=timeout)
    assert r.exit_code == 0, f"{script!r}: exit {r.exit_code}, stderr {r.stderr!r}"
    return r.stdout_text
