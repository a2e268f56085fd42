"""The asyncio API: driven by the library's event loop, cancellable, and leaves the GIL free."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

import sandlet


def run(coro):
    return asyncio.run(coro)


def test_create_exec_files_destroy(root_dir: str, rootfs: str) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            async with await rt.create(layers=[rootfs], labels={"k": "v"}) as sb:
                r = await sb.exec("echo hi; exit 2")
                assert (r.exit_code, r.stdout) == (2, b"hi\n")
                await sb.write_file("/w/x", b"data")
                assert await sb.read_file("/w/x") == b"data"
                assert (await sb.info())["spec"]["labels"] == {"k": "v"}
                assert [s["id"] for s in await rt.list(label="k=v")] == [sb.id]
                with pytest.raises(sandlet.NotFound):
                    await sb.read_file("/nope")
                with pytest.raises(sandlet.NotFound):
                    await sb.exec(["no-such-command"])
                with pytest.raises(sandlet.CommandFailed):
                    await sb.exec("false", check=True)
                await sb.destroy()
                with pytest.raises(sandlet.FailedPrecondition):
                    await sb.exec("true")
            assert await rt.list() == []
    run(main())


def test_one_shot_runs_in_flight_and_cancelled(root_dir: str, rootfs: str, tmp_path) -> None:
    async def main() -> None:
        async with await sandlet.AsyncRuntime.open(root_dir) as rt:
            results = await asyncio.gather(*[rt.run(f"exit {i}", layers=[rootfs]) for i in range(6)])
            assert [r.exit_code for r in results] == list(range(6))
            with open(tmp_path / "out", "wb") as out:
                assert (await rt.run(["echo", "to a file"], layers=[rootfs], stdout=out)).ok
            assert (tmp_path / "out").read_bytes() == b"to a file\n"
            task = asyncio.ensure_future(rt.run("sleep 30", layers=[rootfs]))
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - t0 < 5
            for _ in range(100):  # the cancelled run's sandbox is gone once the library has its cancel
                if not await rt.list():
                    break
                await asyncio.sleep(0.05)
            assert await rt.list() == []
    run(main())


def test_create_errors_are_raised(root_dir: str) -> None:
    async def main() -> None:
        async with await sandlet.AsyncRuntime.open(root_dir) as rt:
            with pytest.raises(sandlet.InvalidArgument, match="layers"):
                await rt.create(layers=["/no/such/dir"])
            with pytest.raises(sandlet.NotFound):
                await rt.attach("0123456789ab")
    run(main())


def test_many_concurrent_execs_in_many_sandboxes(root_dir: str, rootfs: str) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            sandboxes = await asyncio.gather(*[rt.create(layers=[rootfs]) for _ in range(8)])
            results = await asyncio.gather(*[sandboxes[i % 8].exec(["echo", str(i)]) for i in range(1000)])
            assert [r.stdout for r in results] == [f"{i}\n".encode() for i in range(1000)]
            for sb in sandboxes:
                sb.close()
    run(main())


def test_streaming_output(root_dir: str, rootfs: str) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt, await rt.create(layers=[rootfs]) as sb:
            stream = sb.exec_stream("for i in 1 2 3; do echo $i; sleep 0.05; done; echo e >&2; exit 7")
            arrivals = []
            async for which, data in stream:
                arrivals.append((which, data, time.monotonic()))
            result = await stream.wait()
            assert result.exit_code == 7 and stream.result is result
            assert b"".join(d for w, d, _ in arrivals if w == sandlet.STDOUT) == b"1\n2\n3\n"
            assert b"".join(d for w, d, _ in arrivals if w == sandlet.STDERR) == b"e\n"
            # Chunks arrived as produced, not all at the end.
            assert arrivals[-1][2] - arrivals[0][2] > 0.05
            # Leaving the block early kills the command.
            async with sb.exec_stream("echo go; sleep 30; touch /after") as s2:
                async for _which, data in s2:
                    break
            assert not (await sb.exec("test -e /after")).ok
            assert "sleep" not in (await sb.exec("ps -o comm")).stdout_text
    run(main())


def test_cancelling_an_awaited_exec_kills_the_command(root_dir: str, rootfs: str) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt, await rt.create(layers=[rootfs]) as sb:
            task = asyncio.create_task(sb.exec("sleep 2 && touch /done; sleep 30"))
            await asyncio.sleep(0.3)
            assert "sleep" in (await sb.exec("ps -o comm")).stdout_text
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(50):  # the kill is asynchronous: give it a moment
                if "sleep" not in (await sb.exec("ps -o comm")).stdout_text:
                    break
                await asyncio.sleep(0.05)
            assert "sleep" not in (await sb.exec("ps -o comm")).stdout_text
            await asyncio.sleep(2.2)
            assert not (await sb.exec("test -e /done")).ok
            # wait_for timeouts are cancellations too.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(sb.exec("sleep 30"), 0.2)
            assert (await sb.exec("echo still usable")).ok
    run(main())


def test_cancelled_create_leaves_nothing(root_dir: str, rootfs: str) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir, warm_pool=False) as rt:
            task = asyncio.create_task(rt.create(layers=[rootfs]))
            await asyncio.sleep(0)  # submitted, not finished
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(100):  # the sandbox that still arrives is closed, so destroyed
                await asyncio.sleep(0.05)
                if not await rt.list():
                    break
            assert await rt.list() == []
    run(main())


def test_gil_free_while_100_execs_in_flight(root_dir: str, rootfs: str) -> None:
    counter = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            counter[0] += 1

    async def main() -> int:
        async with sandlet.AsyncRuntime(root_dir) as rt, await rt.create(layers=[rootfs]) as sb:
            t = threading.Thread(target=spin)
            t.start()
            try:
                await asyncio.sleep(0.05)
                before = counter[0]
                results = await asyncio.gather(*[sb.exec("sleep 0.5") for _ in range(100)])
                assert all(r.ok for r in results)
                return counter[0] - before
            finally:
                stop.set()
                t.join()

    assert run(main()) > 10_000


def test_several_event_loops(root_dir: str, rootfs: str) -> None:
    rt = sandlet.AsyncRuntime(root_dir)
    try:
        sb = run(rt.create(layers=[rootfs]))
        for i in range(3):  # a new loop each time: each gets its own bridge
            assert run(sb.exec(f"echo {i}")).stdout == f"{i}\n".encode()

        results = []

        def in_thread() -> None:
            results.append(asyncio.run(sb.exec("echo thread")).stdout)

        t = threading.Thread(target=in_thread)
        t.start()
        t.join()
        assert results == [b"thread\n"]
        assert sb.sync.exec("echo sync").stdout == b"sync\n"  # the same sandbox, synchronous API
        sb.close()
    finally:
        rt.close()


def test_layers_from_asyncio(root_dir: str, rootfs: str, tmp_path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "hello").write_text("layer file\n")

    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            await rt.layer_import(rootfs, name="bb")
            await rt.layer_import(tmp_path / "ws", role="workspace", name="ws")
            await rt.env_create("e", ["bb", "ws"])
            async with await rt.create(environment="e") as sb:
                assert (await sb.exec("cat /hello")).stdout == b"layer file\n"
    run(main())


def test_burst_of_creates_from_one_asyncio_thread(root_dir: str, rootfs: str) -> None:
    """200 sandboxes asked for at once from one coroutine batch: all arrive, all work, none is left."""
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            boxes = await asyncio.gather(*[rt.create(layers=[rootfs], labels={"burst": "1"}) for _ in range(200)])
            assert len({b.id for b in boxes}) == 200
            results = await asyncio.gather(*[b.exec("cat /proc/self/status | grep -c Pid") for b in boxes])
            assert all(r.ok for r in results)
            assert len(await rt.list(label="burst=1")) == 200
            await asyncio.gather(*[b.destroy() for b in boxes])
            for b in boxes:
                b.close()
            assert await rt.list() == []
    run(main())
