"""Directory copies from Python: copy_in / copy_out keep the tree, archives go both ways as tar (read by the
standard tarfile module), errors are OSErrors naming the path, progress is reported and can stop a copy,
and the asyncio face does the same."""
import asyncio
import io
import os
import stat
import tarfile

import pytest

import sandlet


def make_tree(root: str) -> None:
    os.makedirs(os.path.join(root, "pkg", "empty"))
    with open(os.path.join(root, "pkg", "mod.py"), "w") as f:
        f.write("VALUE = 42\n")
    with open(os.path.join(root, "run.sh"), "w") as f:
        f.write("#!/bin/sh\necho ran\n")
    os.chmod(os.path.join(root, "run.sh"), 0o755)
    os.symlink("pkg/mod.py", os.path.join(root, "link"))
    os.link(os.path.join(root, "run.sh"), os.path.join(root, "pkg", "run-again"))
    os.utime(os.path.join(root, "pkg", "mod.py"), (1600000000, 1600000000))


def test_copy_in_and_out_keep_the_tree(sb: sandlet.Sandbox, tmp_path) -> None:
    src = str(tmp_path / "src")
    make_tree(src)
    stats = sb.copy_in(src, "/work/task")
    assert stats == sandlet.CopyStats(entries=7, bytes=11 + 19, skipped=0)
    r = sb.exec(["sh", "-c", "/work/task/run.sh; readlink /work/task/link; stat -c '%a %Y' /work/task/pkg/mod.py; "
                             "ls -d /work/task/pkg/empty"])
    assert r.stdout == b"ran\npkg/mod.py\n644 1600000000\n/work/task/pkg/empty\n"

    sb.exec(["sh", "-c", "mkdir -p /work/task/logs && echo done > /work/task/logs/out.txt"])
    out = tmp_path / "back"
    back = sb.copy_out("/work/task", out)
    assert back.entries == 9
    assert (out / "logs" / "out.txt").read_text() == "done\n"
    assert os.readlink(out / "link") == "pkg/mod.py"
    assert os.stat(out / "run.sh").st_ino == os.stat(out / "pkg" / "run-again").st_ino
    assert stat.S_IMODE(os.stat(out / "run.sh").st_mode) == 0o755
    assert int(os.stat(out / "pkg" / "mod.py").st_mtime) == 1600000000


def test_archives_both_ways(sb: sandlet.Sandbox, tmp_path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        data = b"from a tarball\n"
        info = tarfile.TarInfo("dir/file.txt")
        info.size = len(data)
        info.mode = 0o600
        t.addfile(info, io.BytesIO(data))
    stats = sb.put_archive("/unpacked", buf.getvalue())
    assert stats.entries == 3  # the root, the implied "dir", the file
    assert sb.read_file("/unpacked/dir/file.txt") == b"from a tarball\n"

    tar_bytes = sb.get_archive("/unpacked")
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as t:
        names = sorted(m.name for m in t.getmembers())
        assert names == ["unpacked", "unpacked/dir", "unpacked/dir/file.txt"]
        assert t.getmember("unpacked/dir/file.txt").mode == 0o600
    with open(tmp_path / "out.tar", "wb") as f:
        st = sb.get_archive("/unpacked", f)
    assert st.entries == 3
    assert os.path.getsize(tmp_path / "out.tar") == len(tar_bytes)


def test_errors_are_os_errors_naming_the_path(sb: sandlet.Sandbox, tmp_path) -> None:
    with pytest.raises(FileNotFoundError) as e:
        sb.copy_out("/no/such/dir", tmp_path / "x")
    assert "/no/such/dir" in str(e.value)
    with pytest.raises(FileNotFoundError):
        sb.copy_in(tmp_path / "missing", "/x")
    with pytest.raises(sandlet.InvalidArgument, match="'path'"):
        sb.copy_in(str(tmp_path), "relative/path")
    sb.exec(["sh", "-c", "mkdir -p /many && for i in 1 2 3 4 5 6; do touch /many/$i; done"])
    with pytest.raises(sandlet.OutOfRange, match="max_entries"):
        sb.copy_out("/many", tmp_path / "capped", max_entries=3)


def test_progress_is_reported_and_can_stop_a_copy(sb: sandlet.Sandbox, tmp_path) -> None:
    src = tmp_path / "many"
    src.mkdir()
    for i in range(50):
        (src / f"f{i}").write_bytes(b"x" * 1000)
    seen = []
    sb.copy_in(src, "/p", progress=lambda entries, nbytes, skipped: seen.append((entries, nbytes)))
    assert seen and seen[-1][0] == 51 and seen[-1][1] == 50000

    class Stop(Exception):
        pass

    def stop_at_ten(entries: int, nbytes: int, skipped: int) -> None:
        if entries >= 10:
            raise Stop()

    with pytest.raises(Stop):
        sb.copy_out("/p", tmp_path / "stopped", progress=stop_at_ten)
    assert len(os.listdir(tmp_path / "stopped")) < 50


def test_async_copies(root_dir: str, rootfs: str, tmp_path) -> None:
    src = str(tmp_path / "src")
    make_tree(src)

    async def main() -> bytes:
        async with sandlet.AsyncRuntime(root_dir) as art:
            async with await art.create(layers=[rootfs]) as asb:
                await asb.copy_in(src, "/a")
                await asb.copy_out("/a", tmp_path / "a-back")
                return await asb.get_archive("/a/pkg")

    tar_bytes = asyncio.run(main())
    assert (tmp_path / "a-back" / "pkg" / "mod.py").read_text() == "VALUE = 42\n"
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as t:
        assert "pkg/mod.py" in t.getnames()


def test_cli_shows_progress_on_a_terminal_only(sb: sandlet.Sandbox, rt: sandlet.Runtime, tmp_path) -> None:
    import pty
    import subprocess
    import time
    cli = os.environ.get("SANDLET_CLI")
    if not cli:
        pytest.fail("SANDLET_CLI is not set (the ctest entry sets it)")
    # A tar stream on stdin that arrives in two halves a second apart: the copy outlasts the half second
    # before the first progress line, whatever the host's speed.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for i in range(40):
            data = b"x" * 100000
            info = tarfile.TarInfo(f"f{i}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    archive = buf.getvalue()

    def copy(stderr_to_terminal: bool) -> bytes:
        master, slave = pty.openpty()
        p = subprocess.Popen([cli, "--root", rt.root, "cp", "--tar", "-", f"{sb.id}:/slow"], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=slave if stderr_to_terminal else subprocess.PIPE)
        os.close(slave)
        half = len(archive) // 2
        p.stdin.write(archive[:half])
        p.stdin.flush()
        time.sleep(1.2)
        p.stdin.write(archive[half:])
        p.stdin.close()
        piped = p.stderr.read() if p.stderr else b""
        assert p.wait(timeout=60) == 0
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            seen += chunk
        os.close(master)
        return seen if stderr_to_terminal else piped

    line = copy(True)
    assert b"copied" in line and b"entries" in line and b"MiB" in line, line
    assert sb.exec(["sh", "-c", "ls /slow | wc -l"]).stdout == b"40\n"
    assert copy(False) == b""  # not a terminal: nothing on stderr


def test_cancelling_an_async_copy_stops_it(root_dir: str, rootfs: str, tmp_path) -> None:
    async def main() -> int:
        async with sandlet.AsyncRuntime(root_dir) as art:
            async with await art.create(layers=[rootfs]) as asb:
                await asb.exec(["sh", "-c", "mkdir /many && cd /many && for i in $(seq 1 2000); do echo $i > f$i; done"],
                               timeout=120)
                seen = []
                task = asyncio.ensure_future(asb.copy_out("/many", tmp_path / "c",
                                                          progress=lambda e, b, s: seen.append(e)))
                while not seen:
                    await asyncio.sleep(0.001)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                return len(os.listdir(tmp_path / "c"))

    assert asyncio.run(main()) < 2000
