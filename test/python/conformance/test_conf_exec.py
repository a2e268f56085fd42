"""Exec semantics every backend must give, through the Python package."""
from __future__ import annotations

import errno
import os
import pickle
import signal
import subprocess

import pytest

import sandlet
from .conformance_helpers import Conformance, shell


def test_exit_codes(conf: Conformance) -> None:
    with conf.create() as sb:
        assert sb.exec(["true"]).exit_code == 0
        for code in (1, 2, 42, 126, 127, 255):
            r = sb.exec(f"exit {code}")
            assert (r.exit_code, r.signal, r.timed_out, r.ok) == (code, 0, False, False)
        with pytest.raises(sandlet.CommandFailed) as e:
            sb.exec("exit 3", check=True)
        assert e.value.exit_code == 3
    conf.check_no_leaks()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_signal_death(conf: Conformance, sig: int) -> None:
    with conf.create() as sb:
        r = sb.exec(f"kill -{int(sig)} $$")
        assert (r.exit_code, r.signal) == (-1, int(sig))  # the API's way: the signal, no exit code
        # A shell inside reports 128+N, as harnesses that run commands through a shell expect.
        assert shell(sb, f"sh -c 'kill -{int(sig)} $$'; echo $?") == f"{128 + int(sig)}\n"
        # So does the CLI (its exit status is shell-style).
        cli = os.environ.get("SANDLET_CLI")
        if cli:
            p = subprocess.run([cli, "--root", conf.root, "exec", sb.id, "--", "sh", "-c", f"kill -{int(sig)} $$"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            assert p.returncode == 128 + int(sig), p.stderr
    conf.check_no_leaks()


def test_stdin_env_cwd(conf: Conformance) -> None:
    with conf.create(env={"FROM_SPEC": "spec", "BOTH": "spec"}, workdir="/tmp") as sb:
        assert sb.exec("cat", stdin=b"in\0put\n").stdout == b"in\0put\n"
        assert sb.exec(["wc", "-c"], stdin=b"x" * (3 << 20)).stdout.split()[0] == b"3145728"
        r = sb.exec("cat", timeout=10)  # no stdin: EOF at once
        assert (r.exit_code, r.timed_out, r.stdout) == (0, False, b"")
        r = sb.exec('echo "$FROM_SPEC|$BOTH|$FROM_EXEC"', env={"BOTH": "exec", "FROM_EXEC": "exec"})
        assert r.stdout == b"spec|exec|exec\n"
        assert shell(sb, "pwd") == "/tmp\n"
        assert sb.exec("pwd", cwd="/etc").stdout == b"/etc\n"
    conf.check_no_leaks()


def test_users_including_one_added_at_run_time(conf: Conformance) -> None:
    with conf.create() as sb:
        assert shell(sb, "id -u") == "0\n"
        assert sb.exec("id -u; id -g", user="1000:1000").stdout == b"1000\n1000\n"
        assert sb.exec("id -un; echo $HOME", user="sandbox").stdout == b"sandbox\n/home/sandbox\n"
        shell(sb, "echo 'agent:x:4242:4343::/home/agent:/bin/sh' >> /etc/passwd; "
                  "echo 'agents:x:4343:' >> /etc/group; mkdir -p /home/agent; chown 4242:4343 /home/agent")
        r = sb.exec("id -u; id -g; echo $HOME; touch ~/f; stat -c %u:%g ~/f", user="agent")
        assert r.stdout == b"4242\n4343\n/home/agent\n4242:4343\n", r.stderr
        with pytest.raises(sandlet.NotFound) as e:
            sb.exec("true", user="nosuchuser")
        assert "nosuchuser" in str(e.value)
        # A working directory only root may enter is entered before the command becomes its user (as
        # container runtimes do): the command starts there, and the kernel still guards what is inside.
        shell(sb, "mkdir -p /rootonly/inner && chmod 700 /rootonly")
        r = sb.exec("pwd; ls . >/dev/null 2>&1 || echo cannot-list; cd inner 2>/dev/null || echo cannot-enter",
                    user="sandbox", cwd="/rootonly")
        assert r.stdout == b"/rootonly\ncannot-list\ncannot-enter\n", r
    conf.check_no_leaks()


def test_start_errors_are_oserrors_as_subprocess_raises_them(conf: Conformance) -> None:
    with conf.create() as sb:
        with pytest.raises(FileNotFoundError) as e:
            sb.exec(["/no/such/command"])
        assert isinstance(e.value, sandlet.NotFound)
        assert (e.value.errno, e.value.filename) == (errno.ENOENT, "/no/such/command")
        sb.write_file("/tmp/not-executable", "#!/bin/sh\necho hi\n", 0o644)
        with pytest.raises(PermissionError) as e2:
            sb.exec(["/tmp/not-executable"])
        assert isinstance(e2.value, sandlet.PermissionDenied)
        assert (e2.value.errno, e2.value.filename) == (errno.EACCES, "/tmp/not-executable")
        with pytest.raises(FileNotFoundError) as e3:
            sb.exec(["true"], cwd="/no/such/dir")
        assert (e3.value.errno, e3.value.filename) == (errno.ENOENT, "/no/such/dir")
        # The streaming form raises the same.
        with pytest.raises(FileNotFoundError):
            sb.exec_stream(["/no/such/command"]).wait()
        # Such errors survive pickling (multiprocessing, Ray) with their classes and fields.
        back = pickle.loads(pickle.dumps(e.value))
        assert isinstance(back, FileNotFoundError) and isinstance(back, sandlet.NotFound)
        assert (back.errno, back.filename, back.code_name) == (errno.ENOENT, "/no/such/command", "NOT_FOUND")
    conf.check_no_leaks()


def test_one_shot_run(conf: Conformance) -> None:
    r = conf.rt.run(["sh", "-c", "exit 7"], conf.spec())
    assert r.exit_code == 7
    r = conf.rt.run(["sh", "-c", "kill -9 $$"], conf.spec())
    assert (r.exit_code, r.signal) == (-1, 9)
    with pytest.raises(FileNotFoundError) as e:
        conf.rt.run(["/no/such/command"], conf.spec())
    assert e.value.filename == "/no/such/command"
    conf.check_no_leaks()
