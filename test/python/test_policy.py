"""policy= and toolkit= from Python: file rules bind root inside; toolkit=True runs from the toolkit."""
from __future__ import annotations

import os
import pathlib
import shutil

import pytest

import sandlet


def _toolkit(tmp_path: pathlib.Path, rootfs: str) -> pathlib.Path:
    tk = tmp_path / "toolkit"
    (tk / "bin").mkdir(parents=True)
    shutil.copy(os.path.join(rootfs, "bin", "busybox"), tk / "bin" / "busybox")
    (tk / "bin" / "busybox").chmod(0o755)
    (tk / "bin" / "sh").symlink_to("busybox")
    return tk


def test_toolkit_exec_ignores_an_overwritten_shell(rt: sandlet.Runtime, rootfs: str, tmp_path: pathlib.Path) -> None:
    sb = rt.create(layers=[rootfs], toolkit=_toolkit(tmp_path, rootfs))
    try:
        assert sb.exec(["/bin/busybox", "sh", "-c",
                        "busybox rm /bin/sh; busybox printf '#!/bin/busybox sh\\necho pwned\\n' > /bin/sh; "
                        "busybox chmod 755 /bin/sh"]).ok
        assert sb.exec("echo ok").stdout == b"pwned\n"
        assert sb.exec("echo ok", toolkit=True).stdout == b"ok\n"
        assert sb.exec(["sh", "-c", "echo $PATH"], toolkit=True).stdout.startswith(b"/.sandlet/toolkit/bin:")
    finally:
        sb.destroy()


def test_toolkit_refused_without_one(rt: sandlet.Runtime, rootfs: str) -> None:
    sb = rt.create(layers=[rootfs])
    try:
        with pytest.raises(sandlet.FailedPrecondition, match="toolkit"):
            sb.exec("echo ok", toolkit=True)
    finally:
        sb.destroy()


def test_read_only_rule_and_its_errors(rt: sandlet.Runtime, rootfs: str) -> None:
    sb = rt.create(layers=[rootfs], policy={"files": [{"path": "/etc", "access": "read-only"}]})
    try:
        r = sb.exec("echo x > /etc/passwd")
        assert r.exit_code != 0 and b"Read-only file system" in r.stderr
        with pytest.raises(OSError):
            sb.write_file("/etc/new", "x")
    finally:
        sb.destroy()
    with pytest.raises(sandlet.InvalidArgument, match=r"policy\.files\[0\]\.access"):
        rt.create(layers=[rootfs], policy={"files": [{"path": "/etc", "access": "rw"}]})
