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
    cli = os.environ.get("SANDLET_CLI")
    if not cli:
        pytest.skip("SANDLET_CLI is not set (the ctest entry sets it)")
    # Enough small files that the copy outlasts the half second before the first progress line.
    sb.exec(["sh", "-c", "for d in $(seq 1 300); do mkdir -p /many/d$d; for i in $(seq 1 10); do "
                         "echo $d$i > /many/d$d/f$i; done; done"], timeout=120)
    master, slave = pty.openpty()
    try:
        p = subprocess.run([cli, "--root", rt.root, "cp", f"{sb.id}:/many", str(tmp_path / "tty")],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, timeout=120)
        os.close(slave)
        slave = -1
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert p.returncode == 0
    assert len(os.listdir(tmp_path / "tty")) == 300
    if b"copied" not in seen:
        pytest.skip("the copy ended within the half second before a progress line (a fast host)")
    assert b"entries" in seen and b"MiB" in seen
    # Not a terminal: nothing on stderr.
    p = subprocess.run([cli, "--root", rt.root, "cp", f"{sb.id}:/many", str(tmp_path / "pipe")],
                       capture_output=True, timeout=120)
    assert p.returncode == 0 and p.stderr == b""
