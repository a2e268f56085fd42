"""Runtime.layer_export / AsyncRuntime.layer_export: a layer written to one file and imported under
another runtime root keeps its digest, role and files."""
from __future__ import annotations

import asyncio
import os
import shutil
import tarfile
import tempfile
from typing import Iterator

import pytest

import sandlet


def mounts_under(path: str) -> list:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(path.rstrip("/") + "/")]


@pytest.fixture
def other_root() -> Iterator[str]:
    """A second runtime root (the "other machine"); nothing may stay mounted under it."""
    path = tempfile.mkdtemp(prefix="sandlet-pytest-other.")
    yield path
    left = mounts_under(path)
    with sandlet.Runtime(path) as rt:
        rt.gc()
    shutil.rmtree(path, ignore_errors=True)
    assert not left, f"mounts left under {path}: {left}"


def make_layer_dir(path) -> None:
    (path / "sub dir").mkdir(parents=True)
    (path / "sub dir" / "data").write_bytes(os.urandom(70000))
    (path / "hello").write_text("exported layer\n")
    os.symlink("hello", path / "hello.link")
    os.link(path / "hello", path / "hello.hard")
    os.setxattr(path / "hello", "user.note", b"kept")
    os.utime(path / "hello", ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))


def test_export_import_round_trip(root_dir: str, other_root: str, rootfs: str, tmp_path) -> None:
    make_layer_dir(tmp_path / "src")
    out = tmp_path / "layer.tar"
    with sandlet.Runtime(root_dir) as rt:
        layer = rt.layer_import(tmp_path / "src", role="workspace", name="ws")["layers"][0]
        result = rt.layer_export("ws", out)
    assert result["digest"] == layer["digest"]
    assert result["path"] == str(out) and result["compression"] == "none"
    assert result["bytes"] == out.stat().st_size and result["files"] == 6
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]
    with tarfile.open(out) as t:  # an ordinary pax tar
        assert sorted(t.getnames()) == [".", "hello", "hello.hard", "hello.link", "sub dir", "sub dir/data"]
        assert t.pax_headers["SANDLET.format"] == "1"

    with sandlet.Runtime(other_root) as rt:
        got = rt.layer_import(out)
        assert got["layers"][0]["digest"] == layer["digest"]
        assert got["layers"][0]["role"] == "workspace" and got["layers"][0]["name"] == "ws"
        assert got["missing"] == []
        rt.layer_import(rootfs, name="bb")
        with rt.create(layers=["bb", "ws"]) as sb:
            r = sb.exec("cat /hello; readlink /hello.link; wc -c < '/sub dir/data'; stat -c %i /hello /hello.hard")
            lines = r.stdout.decode().split("\n")
            assert lines[:3] == ["exported layer", "hello", "70000"]
            assert lines[3] == lines[4]  # still one inode
        assert rt.layer_import(out)["existed"] == [True]


def test_tampered_export_is_refused(root_dir: str, other_root: str, tmp_path) -> None:
    make_layer_dir(tmp_path / "src")
    out = tmp_path / "layer.tar"
    with sandlet.Runtime(root_dir) as rt:
        digest = rt.layer_import(tmp_path / "src")["layers"][0]["digest"]
        rt.layer_export(digest, out)
    data = bytearray(out.read_bytes())
    data[data.index(b"exported layer")] ^= 0x20
    out.write_bytes(bytes(data))
    with sandlet.Runtime(other_root) as rt:
        with pytest.raises(sandlet.DataLoss, match=digest):
            rt.layer_import(out)
        assert rt.layer_list() == []


def test_export_from_asyncio(root_dir: str, other_root: str, tmp_path) -> None:
    make_layer_dir(tmp_path / "src")
    out = tmp_path / "layer.tar.zst"

    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            digest = (await rt.layer_import(tmp_path / "src", name="x"))["layers"][0]["digest"]
            result = await rt.layer_export("x", out, zstd_level=5)
            assert result["digest"] == digest and result["compression"] == "zstd"
        async with sandlet.AsyncRuntime(other_root) as rt:
            assert (await rt.layer_import(out))["layers"][0]["digest"] == digest

    asyncio.run(main())
    assert out.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame
