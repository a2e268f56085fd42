"""Pause and resume of a job's sandboxes by label (Runtime.pause / resume), sync and async."""
from __future__ import annotations

import asyncio

import pytest

import sandlet


def test_pause_and_resume_by_labels(rt: sandlet.Runtime, rootfs: str) -> None:
    job = [rt.create(layers=[rootfs], labels={"job": "j1", "team": "a"}) for _ in range(3)]
    other = rt.create(layers=[rootfs], labels={"job": "j2", "team": "a"})
    for sb in job:
        sb.write_file("/tmp/kept", "yes")
        sb.exec("sleep 1000 & echo started", keep_background=True)
    p = rt.pause(labels={"job": "j1", "team": "a"})
    assert (p["matched"], p["paused"], p["already"], p["failed"]) == (3, 3, 0, [])
    assert {s["state"] for s in rt.list(labels={"job": "j1"})} == {"paused"}
    assert other.info()["state"] == "running"
    r = rt.resume(labels={"job": "j1"})
    assert (r["matched"], r["resumed"], r["failed"]) == (3, 3, [])
    for sb in job:
        assert sb.read_file("/tmp/kept") == b"yes"
        assert "sleep" in sb.exec("ps -o comm").stdout_text
        sb.destroy()
    other.destroy()


def test_exec_resumes_a_sandbox_paused_by_label(rt: sandlet.Runtime, rootfs: str) -> None:
    sb = rt.create(layers=[rootfs], labels={"job": "x"})
    assert rt.pause(labels={"job": "x"})["paused"] == 1
    assert sb.exec("echo hi").stdout_text == "hi\n"
    assert sb.info()["state"] == "running"
    sb.destroy()


def test_pause_needs_labels(rt: sandlet.Runtime) -> None:
    with pytest.raises(sandlet.InvalidArgument):
        rt.pause(labels={})


def test_async_pause_and_resume(root_dir: str, rootfs: str) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as art:
            sb = await art.create(layers=[rootfs], labels={"job": "a1"})
            assert (await art.pause(labels={"job": "a1"}))["paused"] == 1
            assert (await art.resume(labels={"job": "a1"}))["resumed"] == 1
            await sb.destroy()
    asyncio.run(main())
