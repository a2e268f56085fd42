"""Runtime.build and AsyncRuntime.build: a recipe FROM the busybox layer, progress on the caller's thread, the
cache on the second build, a failing step and bad input leaving nothing behind, cancellation."""
from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from pathlib import Path
from typing import List

import pytest

import sandlet


def recipe(ctx: Path, text: str) -> Path:
    (ctx / "Dockerfile").write_text(text)
    return ctx / "Dockerfile"


@pytest.fixture
def ctx(root_dir: str) -> Path:
    path = Path(root_dir) / "ctx"
    path.mkdir()
    (path / "greeting.txt").write_text("hello\n")
    return path


def layer_count(rt: sandlet.Runtime) -> int:
    return len(rt.layer_list())


def test_build_sync_then_cached(rt: sandlet.Runtime, rootfs: str, ctx: Path) -> None:
    rt.layer_import(rootfs, name="busybox")
    path = recipe(ctx, "FROM busybox\nARG WHO=world\nENV WHO=$WHO\nWORKDIR /app\nCOPY greeting.txt .\n"
                       "RUN echo \"$(cat greeting.txt) $WHO\" > out.txt; echo ran\nUSER 1000\n")
    events: List[sandlet.BuildEvent] = []
    caller = threading.get_ident()
    threads = set()

    def progress(e: sandlet.BuildEvent) -> None:
        threads.add(threading.get_ident())
        events.append(e)

    r = rt.build(path, ctx, tag="py", build_args={"WHO": "python"}, progress=progress)
    assert r["environment"] == "py@1"
    assert r["sandboxes"] == 3 and r["cached_steps"] == 0
    assert r["env"]["WHO"] == "python" and r["workdir"] == "/app" and r["user"] == "1000"
    assert threads == {caller}
    assert [e.text for e in events if e.stream == 0][0] == "FROM busybox"
    assert b"".join(e.data for e in events if e.stream == sandlet.STDOUT) == b"ran\n"
    with rt.create(environment="py") as sb:
        assert sb.exec("cat out.txt; pwd; id -u").stdout == b"hello python\n/app\n1000\n"

    events.clear()
    again = rt.build(path, ctx, tag="py", build_args={"WHO": "python"}, progress=progress)
    assert again["sandboxes"] == 0 and again["cached_steps"] == 3
    assert again["layers"] == r["layers"]
    assert [e.cached for e in events if e.stream == 0 and e.text.split()[0] in ("WORKDIR", "COPY", "RUN")] == [True] * 3


def test_build_failure_and_bad_input_leave_nothing(rt: sandlet.Runtime, rootfs: str, ctx: Path, root_dir: str) -> None:
    rt.layer_import(rootfs, name="busybox")
    before = layer_count(rt)
    path = recipe(ctx, "FROM busybox\nRUN touch /made\nRUN echo oops >&2; exit 4\n")
    with pytest.raises(sandlet.Aborted) as info:
        rt.build(path, ctx)
    assert str(info.value).split(": ", 1)[1].startswith(f"step 3/3 ({path}:3 RUN echo oops >&2; exit 4): exit status 4\noops")
    assert layer_count(rt) == before
    with pytest.raises(sandlet.InvalidArgument, match="build recipe .*missing"):
        rt.build(ctx / "missing", ctx)
    with pytest.raises(sandlet.InvalidArgument, match=r":2: ONBUILD is not supported"):
        rt.build(recipe(ctx, "FROM busybox\nONBUILD RUN x\n"), ctx)
    with pytest.raises(sandlet.InvalidArgument, match="invalid build argument name"):
        rt.build(path, ctx, build_args={"A=B": "x"})
    assert layer_count(rt) == before
    assert rt.list() == []


def test_build_secret_reaches_its_step_only(rt: sandlet.Runtime, rootfs: str, ctx: Path, tmp_path: Path) -> None:
    rt.layer_import(rootfs, name="busybox")
    value = f"py-secret-{os.getpid()}-{id(rt)}"
    (tmp_path / "token").write_text(value)
    os.environ["SANDLET_PY_TEST_SECRET"] = value + "-env"
    try:
        path = recipe(ctx, "FROM busybox\n"
                           "RUN --mount=type=secret,id=tok --mount=type=secret,id=e,target=/etc/e "
                           "sha256sum /run/secrets/tok /etc/e | cut -d' ' -f1 > /sums\n"
                           "RUN (test -e /run/secrets/tok && echo visible || echo absent) > /later\n")
        events: List[sandlet.BuildEvent] = []
        r = rt.build(path, ctx, tag="sec", progress=events.append,
                     secrets=[f"id=tok,src={tmp_path / 'token'}", "id=e,env=SANDLET_PY_TEST_SECRET"])
        assert value not in repr(r) and all(value.encode() not in e.data for e in events)
        want = [hashlib.sha256(v.encode()).hexdigest() for v in (value, value + "-env")]
        with rt.create(environment="sec") as sb:
            assert sb.exec("cat /sums /later").stdout.decode().split() == want + ["absent"]
        # The mapping form; a missing required one is refused before any sandbox.
        again = rt.build(path, ctx, secrets={"tok": tmp_path / "token", "e": tmp_path / "token"})
        assert again["cached_steps"] == 2
        with pytest.raises(sandlet.InvalidArgument, match=r":2: RUN needs secret x \(required=true\)"):
            rt.build(recipe(ctx, "FROM busybox\nRUN --mount=type=secret,id=x,required=true true\n"), ctx)
        with pytest.raises(sandlet.InvalidArgument, match=r"secrets\[0\]'.*needs exactly one of src=FILE"):
            rt.build(path, ctx, secrets=["id=tok"])
    finally:
        del os.environ["SANDLET_PY_TEST_SECRET"]


def test_build_async_progress_on_the_loop_and_cancel(root_dir: str, rootfs: str, ctx: Path) -> None:
    path = recipe(ctx, "FROM busybox\nRUN echo up; sleep 60\n")

    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            await rt.layer_import(rootfs, name="busybox")
            loop_thread = threading.get_ident()
            started = asyncio.Event()

            def progress(e: sandlet.BuildEvent) -> None:
                assert threading.get_ident() == loop_thread
                if e.stream == sandlet.STDOUT:
                    started.set()

            task = asyncio.ensure_future(rt.build(path, ctx, progress=progress))
            await asyncio.wait_for(started.wait(), 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The cancelled build cleans up on its thread; a new one succeeds and sees the same store.
            ok = await rt.build(recipe(ctx, "FROM busybox\nRUN echo fine\n"), ctx, tag="a")
            assert ok["environment"] == "a@1"
            assert len(await rt.layer_list()) == 2
    asyncio.run(main())


def test_build_network_is_checked_as_a_sandbox_s_and_keys_the_cache(rt: sandlet.Runtime, rootfs: str, ctx: Path,
                                                                   root_dir: str) -> None:
    rt.layer_import(rootfs, name="busybox")
    path = recipe(ctx, "FROM busybox\nRUN echo fetched > /f\nRUN --network=none true\n")
    # A policy object with no rules (no egress, so no real network): a dict or its JSON, the same policy.
    first = rt.build(path, ctx, network={"allow": []})
    assert first["sandboxes"] == 2
    assert rt.build(path, ctx, network='{"allow": []}')["sandboxes"] == 0
    # Another network is another RUN (the key holds it); the step that opted out is keyed "none" either way.
    other = rt.build(path, ctx, network="none")
    assert [s["cached"] for s in other["steps"]][1] is False
    before = layer_count(rt)
    with pytest.raises(sandlet.InvalidArgument, match=r"invalid spec field 'network\.allow\[0\]'"):
        rt.build(path, ctx, network={"allow": ["tcp:10.0.0.1/33:443"]})
    with pytest.raises(sandlet.InvalidArgument, match=r"invalid spec field 'network\.publish'"):
        rt.build(path, ctx, network={"publish": [{"port": 80}]})
    with pytest.raises(sandlet.InvalidArgument, match=r"invalid spec field 'network'"):
        rt.build(path, ctx, network=5)  # type: ignore[arg-type]
    assert layer_count(rt) == before and rt.list() == []

    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as art:
            with pytest.raises(sandlet.InvalidArgument, match=r"'network\.dns\[0\]'"):
                await art.build(path, ctx, network={"allow": [], "dns": ["resolver"]})
            assert (await art.build(path, ctx, network={"allow": []}))["sandboxes"] == 0
    asyncio.run(main())
