"""mounts=: host directories in a sandbox from Python (strings, dicts, path-like sources)."""
from __future__ import annotations

import os
import pathlib

import pytest

import sandlet
from conftest import mounts_under


def test_mounts_read_only_and_read_write(rt: sandlet.Runtime, rootfs: str, tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    out = tmp_path / "out"
    data.mkdir()
    out.mkdir()
    out.chmod(0o777)
    (data / "task.txt").write_text("the task\n")
    sb = rt.create(layers=[rootfs], mounts=[f"{data}:/data", {"source": out, "target": "/out", "readonly": False}])
    try:
        assert sb.exec("cat /data/task.txt").stdout == b"the task\n"
        r = sb.exec("touch /data/x")
        assert r.exit_code != 0 and b"Read-only file system" in r.stderr
        assert sb.exec("cp /data/task.txt /out/copy && chmod 4755 /out/copy").ok
        copied = out / "copy"
        assert copied.read_text() == "the task\n"
        assert copied.stat().st_uid != 0  # stored under the sandbox's host ids, never host root's
        assert mounts_under(str(tmp_path)) == []  # nothing of it is attached on the host
    finally:
        sb.destroy()
    # One string alone, and the one-shot run.
    r = rt.run("cat /data/task.txt", layers=[rootfs], mounts=f"{data}:/data:ro", stdout=None)
    assert r.ok


def test_mounts_errors_name_the_field(rt: sandlet.Runtime, rootfs: str, tmp_path: pathlib.Path) -> None:
    with pytest.raises(sandlet.InvalidArgument, match=r"mounts\[0\]\.source") as e:
        rt.create(layers=[rootfs], mounts=[{"source": str(tmp_path / "missing"), "target": "/data"}])
    assert e.value.errno == 2
    with pytest.raises(sandlet.InvalidArgument, match=r"mounts\[1\]\.target"):
        rt.create(layers=[rootfs], mounts=[f"{tmp_path}:/data", f"{tmp_path}:/data/sub"])
    with pytest.raises(sandlet.InvalidArgument, match=r"mounts\[0\]"):
        rt.create(layers=[rootfs], mounts=["no-colon"])
    assert rt.list() == []


def test_spec_add_mount_round_trips(tmp_path: pathlib.Path) -> None:
    s = sandlet.Spec()
    s.add_mount(os.fspath(tmp_path), "/data")
    s.add_mount("/srv", "/srv", readonly=False)
    again = sandlet.Spec.from_json(s.to_json())
    assert '"mounts":[{"source":"%s","target":"/data","readonly":true},' % tmp_path in again.to_json()
    assert '{"source":"/srv","target":"/srv","readonly":false}' in again.to_json()
