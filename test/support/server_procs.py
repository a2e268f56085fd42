"""Process plumbing shared by registry_world.py and mirror_world.py (stdlib only).

Every server these modules start runs under GNU `timeout`, so it ends by itself after its max lifetime even
when the test process is killed; `timeout` passes a SIGTERM it receives on to the server. Started from the
main thread, the child also gets SIGTERM when the test process dies (PR_SET_PDEATHSIG; only from the main
thread because the signal fires when the *thread* that forked ends).
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from typing import Callable, List, Optional

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1
CLONE_NEWNET = 0x40000000


def _die_with_parent() -> None:
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def spawn(argv: List[str], log_path: str, max_lifetime: float, netns: Optional[str] = None,
          env: Optional[dict] = None, wrap: bool = True) -> subprocess.Popen:
    """Starts argv under `timeout` (inside the network namespace file `netns` when given), its output
    appended to log_path, in a process group of its own. wrap=False: argv itself is the process (it must
    end by itself, e.g. `sleep MAX`), so its pid is the Popen's."""
    cmd = ["timeout", "-k", "5", str(int(max_lifetime)), *argv] if wrap else list(argv)
    if netns:
        cmd = ["nsenter", f"--net={netns}", "--", *cmd]  # nsenter execs: the pid stays the same
    pre = _die_with_parent if threading.current_thread() is threading.main_thread() else None
    with open(log_path, "ab") as log:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=pre, env=env)


def stop(proc: Optional[subprocess.Popen], grace: float = 5.0) -> None:
    """SIGTERM (timeout forwards it), then SIGKILL to the whole group; reaps the process."""
    if proc is None:
        return
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group (nginx workers, say)
    except ProcessLookupError:
        pass
    proc.wait()


def free_port() -> int:
    """A free loopback TCP port (the kernel's pick; a later bind may lose a race, which is rare)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(fn: Callable[[], bool], timeout: float, what: str, proc: Optional[subprocess.Popen] = None,
               log_path: Optional[str] = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if fn():
                return
        except OSError:
            pass
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited ({proc.returncode}); log:\n{tail(log_path)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready after {timeout} s; log:\n{tail(log_path)}")
        time.sleep(0.05)


def tail(path: Optional[str], n: int = 3000) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        return f.read()[-n:].decode(errors="replace")


def run_in_netns(netns: str, fn: Callable[[], object]) -> object:
    """Runs fn on a thread that has joined the network namespace file `netns` (setns changes only the
    calling thread); returns what fn returns, raises what it raises."""
    out: dict = {}

    def body() -> None:
        try:
            fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns({netns})")
            finally:
                os.close(fd)
            out["value"] = fn()
        except BaseException as e:  # handed to the caller's thread
            out["error"] = e

    t = threading.Thread(target=body, name="netns")
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")


def alive(pid: int) -> bool:
    """Whether pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
