"""The kernel features report and the accept_weaker spec field from Python."""
from __future__ import annotations

import asyncio

import pytest

import sandlet


def test_features_report(rt: sandlet.Runtime) -> None:
    report = rt.features()
    assert report["container_backend"] == ""
    names = {f["name"]: f for f in report["features"]}
    for name in ("clone3", "overlay_layer_fds", "erofs_file_backed", "cgroup_kill", "idmap_tmpfs"):
        assert name in names, name
        assert isinstance(names[name]["present"], bool) and names[name]["path"]
    assert set(report["paths"]) == {"overlay", "store_layers"}
    assert isinstance(report["weaker_guarantees"], list)


def test_accept_weaker_keyword_and_setter(rt: sandlet.Runtime, rootfs: str) -> None:
    with rt.create(layers=[rootfs], accept_weaker=["memory_swap"], limits={"memory": "64M"}) as sb:
        assert sb.info()["spec"]["accept_weaker"] == ["memory_swap"]
        assert sb.exec("echo ok").stdout == b"ok\n"
    spec = sandlet.Spec()
    spec.accept_weaker("exec_kill_descendants")
    assert '"accept_weaker":["exec_kill_descendants"]' in spec.to_json()
    with pytest.raises(sandlet.InvalidArgument, match="accept_weaker"):
        rt.create(layers=[rootfs], accept_weaker=["no_such_guarantee"])
    with pytest.raises(sandlet.InvalidArgument, match="accept_weaker"):
        spec.accept_weaker("no_such_guarantee")


def test_async_features(root_dir: str) -> None:
    async def main() -> dict:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            return await rt.features()
    assert asyncio.run(main())["features"]
