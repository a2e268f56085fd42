"""File transfer every backend must give: round trips, large files, and errors that are sandlet errors and
the built-in OSError subclasses at once, with the kernel's errno and the path, as ``open`` raises them."""
from __future__ import annotations

import asyncio
import errno

import pytest

import sandlet
from .conformance_helpers import Conformance, shell


def test_round_trip(conf: Conformance) -> None:
    data = bytes(range(256)) * 400
    with conf.create() as sb:
        sb.write_file("/tmp/a/b/data.bin", data, 0o640)
        assert sb.read_file("/tmp/a/b/data.bin") == data
        assert shell(sb, "stat -c %a /tmp/a/b/data.bin") == "640\n"
        sb.write_file("/tmp/text", "text is utf-8: é")
        assert sb.read_file("/tmp/text").decode() == "text is utf-8: é"
        sb.write_file("/tmp/text", b"")
        assert sb.read_file("/tmp/text") == b""
    conf.check_no_leaks()


def test_large_file_and_cap(conf: Conformance) -> None:
    data = bytes(range(251)) * ((40 << 20) // 251)
    with conf.create() as sb:
        sb.write_file("/tmp/large", data)
        assert sb.read_file("/tmp/large") == data
        with pytest.raises(sandlet.OutOfRange) as e:
            sb.read_file("/tmp/large", max_bytes=1 << 20)
        assert e.value.errno == errno.EFBIG and "/tmp/large" in str(e.value)
    conf.check_no_leaks()


def test_missing_file(conf: Conformance) -> None:
    with conf.create() as sb:
        with pytest.raises(FileNotFoundError) as e:
            sb.read_file("/no/such/file")
        assert isinstance(e.value, sandlet.NotFound) and isinstance(e.value, sandlet.Error)
        assert (e.value.errno, e.value.filename, e.value.strerror) == (errno.ENOENT, "/no/such/file",
                                                                        "No such file or directory")
        assert "/no/such/file" in str(e.value)
        with pytest.raises(NotADirectoryError) as e2:
            sb.write_file("/etc/passwd/x", "data")
        assert (e2.value.errno, e2.value.filename) == (errno.ENOTDIR, "/etc/passwd/x")
    conf.check_no_leaks()


def test_directory(conf: Conformance) -> None:
    with conf.create() as sb:
        with pytest.raises(IsADirectoryError) as e:
            sb.read_file("/tmp")
        assert isinstance(e.value, sandlet.Error)
        assert (e.value.errno, e.value.filename, e.value.code_name) == (errno.EISDIR, "/tmp", "FAILED_PRECONDITION")
        shell(sb, "mkdir /tmp/dir")
        with pytest.raises(IsADirectoryError):
            sb.write_file("/tmp/dir", "data")
    conf.check_no_leaks()


def test_permission_denied(conf: Conformance) -> None:
    with conf.create(user="sandbox") as sb:  # file calls act as the spec's user
        with pytest.raises(PermissionError) as e:
            sb.read_file("/etc/shadow")
        assert isinstance(e.value, sandlet.PermissionDenied)
        assert (e.value.errno, e.value.filename) == (errno.EACCES, "/etc/shadow")
        with pytest.raises(PermissionError) as e2:
            sb.write_file("/etc/new-file", "data")
        assert (e2.value.errno, e2.value.filename) == (errno.EACCES, "/etc/new-file")
        sb.write_file("/home/sandbox/mine", "data")
        assert shell(sb, "stat -c %u:%g /home/sandbox/mine") == "1000:1000\n"
        # The user's own file, made read-only: replacing it is refused as open(2) would refuse it, although
        # the directory would let a rename through; the file keeps its content.
        shell(sb, "chmod a-w /home/sandbox/mine")
        with pytest.raises(PermissionError) as e3:
            sb.write_file("/home/sandbox/mine", "replaced")
        assert (e3.value.errno, e3.value.filename) == (errno.EACCES, "/home/sandbox/mine")
        assert sb.read_file("/home/sandbox/mine") == b"data"
        assert shell(sb, "ls -a /home/sandbox | grep -c '^.sandlet-' || true") == "0\n"
    with conf.create() as sb:  # root may (CAP_DAC_OVERRIDE), as with open(2)
        sb.write_file("/tmp/ro", "data", 0o444)
        sb.write_file("/tmp/ro", "replaced", 0o444)
        assert sb.read_file("/tmp/ro") == b"replaced"
    conf.check_no_leaks()


def test_validated_paths_are_value_errors_not_oserrors(conf: Conformance) -> None:
    with conf.create() as sb:
        with pytest.raises(sandlet.InvalidArgument) as e:
            sb.write_file("relative", "x")
        assert isinstance(e.value, ValueError) and not isinstance(e.value, OSError)
        assert "path" in str(e.value)
    conf.check_no_leaks()


def test_async_file_errors_are_oserrors_too(conf: Conformance) -> None:
    async def scenario() -> None:
        async with sandlet.AsyncRuntime(conf.root) as rt:
            async with await rt.create(conf.spec(user="sandbox")) as sb:
                await sb.write_file("/home/sandbox/x", b"async")
                assert await sb.read_file("/home/sandbox/x") == b"async"
                with pytest.raises(FileNotFoundError):
                    await sb.read_file("/no/such/file")
                with pytest.raises(IsADirectoryError):
                    await sb.read_file("/tmp")
                with pytest.raises(PermissionError):
                    await sb.write_file("/etc/x", b"no")
                with pytest.raises(FileNotFoundError) as e:
                    await sb.exec(["/no/such/command"])
                assert e.value.filename == "/no/such/command"
    asyncio.run(scenario())
    conf.check_no_leaks()
