"""Interactive shells from Python and the CLI: streamed stdin, terminals (size, resize, raw bytes), shell
sessions, and `sandlet exec -it` driven through a real pseudo-terminal as a person's terminal would be."""
from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

import sandlet


def test_exec_stream_takes_stdin_as_it_comes(sb: sandlet.Sandbox) -> None:
    with sb.exec_stream(["sh", "-c", "while read -r l; do echo \"got $l\"; done"], open_stdin=True) as s:
        chunks = iter(s)
        s.write("one\n")
        assert next(chunks) == (sandlet.STDOUT, b"got one\n")  # answered while stdin is open
        s.write(b"two\n")
        assert next(chunks) == (sandlet.STDOUT, b"got two\n")
        s.close_stdin()
        assert list(chunks) == []
        assert s.result is not None and s.result.exit_code == 0
    with pytest.raises(sandlet.FailedPrecondition, match="stdin_stream"):
        with sb.exec_stream(["sleep", "5"]) as s:
            s.write("x")


def test_tty_exec_resize_and_keys(sb: sandlet.Sandbox) -> None:
    r = sb.exec(["sh", "-c", "test -t 0 && test -t 2 && stty size"], tty=True, tty_size=(40, 120))
    assert r.exit_code == 0 and r.stdout == b"40 120\r\n" and r.stderr == b""
    with pytest.raises(sandlet.InvalidArgument, match="tty_size"):
        sb.exec(["true"], tty=True, tty_size=(0, 80))
    with sb.exec_stream(["sh", "-c", "trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done"],
                        tty=True) as s:
        seen = b""
        for _, data in s:
            seen += data
            if b"ready" in seen and b"50 132" not in seen:
                s.resize(50, 132)
            if b"50 132" in seen:
                s.write(b"\x03")  # Ctrl-C through the terminal
        assert s.result is not None and s.result.signal == signal.SIGINT


def test_session_keeps_state_and_separates_streams(sb: sandlet.Sandbox) -> None:
    with sb.session() as sess:
        assert sess.run("cd /tmp; export X=7").exit_code == 0
        r = sess.run("pwd; echo $X; echo err >&2; exit_code() { return 5; }; exit_code")
        assert (r.stdout, r.stderr, r.exit_code) == (b"/tmp\n7\n", b"err\n", 5)
        with pytest.raises(sandlet.CommandFailed):
            sess.run("false", check=True)
        r = sess.run("sleep 30", timeout=0.3)
        assert r.timed_out and not sess.alive
        with pytest.raises(sandlet.FailedPrecondition, match="timed out"):
            sess.run("true")
    with pytest.raises(sandlet.NotFound):
        sb.session(["/no/such/shell"])


def test_async_session_and_streams(root_dir: str, rootfs: str) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            sb = await rt.create(layers=[rootfs])
            async with await sb.session() as sess:
                r = await sess.run("cd /etc && pwd")
                assert r.stdout == b"/etc\n"
                task = asyncio.ensure_future(sess.run("sleep 30"))
                await asyncio.sleep(0.3)
                task.cancel()  # kills the session (the shell cannot stop one command alone)
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert not sess.alive
            s = sb.exec_stream(["cat"], open_stdin=True)
            await s.write(b"abc")
            s.close_stdin()
            assert [c async for c in s] == [(sandlet.STDOUT, b"abc")]
            await sb.destroy()
    asyncio.run(main())


# ---- the CLI under a real terminal ----------------------------------------------------------------------

def cli() -> str:
    path = os.environ.get("SANDLET_CLI")
    if not path:
        pytest.fail("SANDLET_CLI is not set (the ctest entry sets it)")
    return path


def set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal:
    """`sandlet exec -it` on the slave side of a new pseudo-terminal, as its controlling terminal (so that the
    kernel sends it SIGWINCH); the test types on the master and reads the screen's bytes from it."""

    def __init__(self, argv: list) -> None:
        self.master, slave = pty.openpty()
        set_size(slave, 30, 90)
        self.echo_before = termios.tcgetattr(slave)[3] & termios.ECHO

        def controlling_terminal() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, preexec_fn=controlling_terminal,
                                     close_fds=True)
        self.slave = slave
        self.screen = b""

    def read_until(self, text: bytes, timeout: float = 20) -> bytes:
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} not seen on the terminal; it shows {self.screen[-400:]!r}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    self.screen += os.read(self.master, 4096)
                except OSError:
                    break
        return self.screen

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


def test_cli_exec_it_is_a_terminal_session(sb: sandlet.Sandbox, rt: sandlet.Runtime) -> None:
    term = Terminal([cli(), "--root", rt.root, "exec", "-it", sb.id, "--", "sh"])
    try:
        term.type(b"stty size; tty; echo $((6 * 7))\r")
        screen = term.read_until(b"42\r\n")
        assert b"30 90\r\n" in screen and b"/dev/pts/" in screen
        # The local terminal went raw: keys reach the sandbox's terminal unchanged (no local echo doubling).
        assert not termios.tcgetattr(term.slave)[3] & termios.ECHO
        # A resize of this terminal (the kernel signals the CLI, its foreground job) reaches the command's.
        set_size(term.slave, 45, 150)
        time.sleep(0.3)
        term.type(b"stty size\r")
        term.read_until(b"45 150\r\n")
        # Ctrl-C goes to the sandbox's foreground command, not to the CLI.
        term.type(b"sleep 30\r")
        time.sleep(0.5)
        term.type(b"\x03")
        term.type(b"echo after-interrupt\r")
        term.read_until(b"after-interrupt\r\n")
        assert term.proc.poll() is None
        term.type(b"exit 3\r")
        assert term.proc.wait(timeout=20) == 3
        # The local terminal is as it was.
        assert termios.tcgetattr(term.slave)[3] & termios.ECHO == term.echo_before
    finally:
        term.close()


def test_cli_exec_i_streams_and_it_needs_a_terminal(sb: sandlet.Sandbox, rt: sandlet.Runtime) -> None:
    p = subprocess.Popen([cli(), "--root", rt.root, "exec", "-i", sb.id, "--", "sh", "-c",
                          "while read -r l; do echo \"got $l\"; done"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(b"first\n")
    p.stdin.flush()
    assert p.stdout.readline() == b"got first\n"  # streamed: answered before stdin ends
    p.stdin.write(b"second\n")
    p.stdin.close()
    assert p.stdout.read() == b"got second\n"
    assert p.wait(timeout=20) == 0
    # -t alone on a pipe: a terminal inside, output with its line ends.
    r = subprocess.run([cli(), "--root", rt.root, "exec", "-t", sb.id, "--", "sh", "-c", "test -t 1 && echo yes"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert (r.returncode, r.stdout) == (0, b"yes\r\n")
    r = subprocess.run([cli(), "--root", rt.root, "exec", "-it", sb.id, "--", "sh"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30)
    assert r.returncode == 2 and b"not a terminal" in r.stderr
