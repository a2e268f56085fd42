"""Reattaching from another Python process, and what a killed owner leaves behind."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import sandlet
from conftest import python_env


def child(script: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=python_env(), capture_output=True,
                          text=True, timeout=120, **kw)


def test_reattach_from_a_second_process(root_dir: str, rootfs: str) -> None:
    out = child(f"""
        import sandlet
        with sandlet.Runtime({root_dir!r}) as rt:
            sb = rt.create(layers=[{rootfs!r}], lifetime="detached", max_lifetime_s=600, labels={{"job": "j1"}})
            sb.write_file("/state/step", "3")
            sb.exec("sleep 1000 & echo started", keep_background=True)
            print(sb.id)
    """)
    assert out.returncode == 0, out.stderr
    sid = out.stdout.strip()

    with sandlet.Runtime(root_dir) as rt:
        assert [s["id"] for s in rt.list(label="job=j1")] == [sid]
        with rt.attach(sid) as sb:
            assert sb.read_file("/state/step") == b"3"
            assert "sleep" in sb.exec("ps -o comm").stdout_text  # its processes kept running
            sb.destroy()
        assert rt.list() == []


def test_owned_sandboxes_of_a_killed_process_are_swept(root_dir: str, rootfs: str) -> None:
    out = child(f"""
        import os, signal, sandlet
        rt = sandlet.Runtime({root_dir!r})
        sb = rt.create(layers=[{rootfs!r}])
        print(sb.id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert out.returncode == -9
    sid = out.stdout.strip()
    with sandlet.Runtime(root_dir) as rt:  # opening sweeps what the dead owner left
        assert sid not in [s["id"] for s in rt.list() if s["state"] == "running"]
        rt.gc()
        with pytest.raises(sandlet.NotFound):
            rt.attach(sid)


def test_an_exec_dies_with_the_process_that_started_it(root_dir: str, rootfs: str) -> None:
    with sandlet.Runtime(root_dir) as rt:
        sb = rt.create(layers=[rootfs], lifetime="detached", max_lifetime_s=600)
        sid = sb.id
        sb.close()
    out = child(f"""
        import os, signal, threading, sandlet
        rt = sandlet.Runtime({root_dir!r})
        sb = rt.attach({sid!r})
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGKILL)).start()
        sb.exec("sleep 1; touch /late")
    """)
    assert out.returncode == -9
    with sandlet.Runtime(root_dir) as rt, rt.attach(sid) as sb:
        import time
        time.sleep(1.5)
        assert not sb.exec("test -e /late").ok  # the command was killed with its client
        assert "sleep" not in sb.exec("ps -o comm").stdout_text
        sb.destroy()


def test_handles_do_not_survive_fork(rt: sandlet.Runtime, rootfs: str) -> None:
    """A forked child (e.g. a PyTorch DataLoader worker) gets a clear error, and releasing the inherited
    handles there neither destroys the parent's sandbox nor hangs."""
    import os
    sb = rt.create(layers=[rootfs])
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status
        code = 0
        try:
            sb.exec("true")
            code = 10
        except sandlet.FailedPrecondition as e:
            code = 0 if "fork" in str(e) else 11
        except BaseException:
            code = 12
        try:
            sb.close()   # must not destroy the parent's sandbox
            rt.close()   # must not wait for threads that only exist in the parent
        except BaseException:
            code = 13
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert sb.exec("echo alive").stdout == b"alive\n"
    sb.close()
