"""FnCall from Python: Runtime.call and AsyncRuntime.call (docs/FNCALL.md)."""
from __future__ import annotations

import asyncio

import pytest

import sandlet


def test_call_output_stdin_env_and_isolation(root_dir: str, rootfs: str) -> None:
    with sandlet.Runtime(root_dir) as rt:
        r = rt.call(script="cat; echo $X; exit 3", layers=[rootfs], env={"X": "one"}, stdin=b"in\n")
        assert (r.exit_code, r.stdout) == (3, b"in\none\n")
        rt.call(script="echo x > /tmp/leak", layers=[rootfs])
        r = rt.call(["sh", "-c", "test -e /tmp/leak || echo clean; echo [$X]"], layers=[rootfs])
        assert r.stdout == b"clean\n[]\n"
        assert rt.call(script="sleep 5", layers=[rootfs], timeout=0.2).timed_out
        with pytest.raises(sandlet.InvalidArgument):
            rt.call(layers=[rootfs])


def test_async_call(root_dir: str, rootfs: str) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            rs = await asyncio.gather(*(rt.call(script=f"echo {i}", layers=[rootfs]) for i in range(4)))
            assert [r.stdout for r in rs] == [f"{i}\n".encode() for i in range(4)]

    asyncio.run(main())


def test_call_pool_settings_and_stats(root_dir: str, rootfs: str) -> None:
    with sandlet.Runtime(root_dir) as rt:
        rt.set_call_pool(layers=[rootfs], max_size=1, reuse="replace")
        for _ in range(3):
            assert rt.call("true", layers=[rootfs]).exit_code == 0
        (pool,) = rt.call_stats()["pools"]
        assert (pool["max_size"], pool["reuse"], pool["reused"], pool["discarded_replace"]) == (1, "replace", 0, 3)
        with pytest.raises(sandlet.InvalidArgument, match="reuse"):
            rt.set_call_pool(layers=[rootfs], reuse="sometimes")
