"""Pause/resume and the runtime's counters from Python (sync and asyncio)."""
from __future__ import annotations

import asyncio
import time

import sandlet


def test_pause_resume_and_transparent_resume(sb: sandlet.Sandbox) -> None:
    sb.exec("(while :; do echo x >> /tmp/ticks; sleep 0.02; done) >/dev/null 2>&1 &", keep_background=True)
    sb.pause()
    assert sb.info()["state"] == "paused"
    cgroup = sb.info()["backend_state"]["cgroup_v2"]
    with open(f"{cgroup}/cgroup.events") as f:
        assert "frozen 1" in f.read()
    # An exec resumes it first.
    assert sb.exec("echo back").stdout == b"back\n"
    assert sb.info()["state"] == "running"
    sb.pause()
    sb.resume()
    assert sb.info()["state"] == "running"


def test_stats_count_warm_pool_hits(rt: sandlet.Runtime, rootfs: str) -> None:
    assert rt.stats()["warm_pool"]["hits"] == 0
    for i in range(4):
        with rt.create(layers=[rootfs]) as sb:
            assert sb.exec("true").exit_code == 0
        if i >= 1:  # the pool starts at the second create and fills on a thread of its own
            deadline = time.monotonic() + 10
            while rt.stats()["warm_pool"]["ready"] < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
    pool = rt.stats()["warm_pool"]
    assert pool["hits"] + pool["misses"] == 4
    assert pool["misses"] >= 1  # the first create cannot be a hit: the pool starts at the second
    assert pool["hits"] >= 2, pool  # the third and the fourth found a prepared sandbox


def test_async_pause_resume(root_dir: str, rootfs: str) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            async with await rt.create(layers=[rootfs]) as sb:
                await sb.pause()
                assert (await sb.info())["state"] == "paused"
                await sb.resume()
                assert (await sb.info())["state"] == "running"
                assert rt.stats()["warm_pool"]["misses"] == 1

    asyncio.run(main())
