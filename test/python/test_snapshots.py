"""Snapshots, restore, fork and secrets from Python (sync and asyncio), on real sandboxes standing on the
busybox test root imported as a store layer (a restore stacks store layers)."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Iterator

import pytest

import sandlet
import sandlet._aio
from sandlet._fork import close_handles

SNAPSHOT_KEYS = {"layer", "existed", "frozen_ns", "total_ns", "entries", "bytes", "flattened"}


@pytest.fixture
def base(rt: sandlet.Runtime, rootfs: str) -> str:
    return rt.layer_import(rootfs, name="busybox")["layers"][0]["digest"]


@pytest.fixture
def parent(rt: sandlet.Runtime, base: str) -> Iterator[sandlet.Sandbox]:
    with rt.create(layers=[base], hostname="agent", labels={"task": "t1"}) as sb:
        sb.exec("mkdir /work && echo step-k > /work/state && echo junk > /tmp/residue", check=True)
        yield sb


def out(sb: sandlet.Sandbox, cmd: str) -> str:
    return sb.exec(cmd, check=True).stdout_text


def test_snapshot_then_restore(rt: sandlet.Runtime, base: str, parent: sandlet.Sandbox) -> None:
    parent.exec("mkdir -p /work/cache && echo c > /work/cache/x", check=True)
    snap = parent.snapshot(exclude=["/work/cache"])
    assert set(snap) == SNAPSHOT_KEYS
    layer = snap["layer"]
    assert layer["role"] == "diff" and layer["stack"] == [base]
    assert snap["existed"] is False and snap["flattened"] is False
    assert snap["entries"] > 0 and snap["bytes"] > 0 and snap["total_ns"] >= snap["frozen_ns"] > 0
    with rt.create(layers=[layer["digest"]]) as restored:
        assert out(restored, "cat /work/state") == "step-k\n"
        assert out(restored, "ls /work/cache /tmp/residue 2>&1 || echo absent").endswith("absent\n")
        restored.exec("echo mine > /work/restored", check=True)
    assert parent.exec("cat /work/restored").exit_code != 0  # a restore is a copy, not a view

    # Incremental: the next one goes on the first; a named one can be looked up by its name.
    parent.exec("echo more > /work/more", check=True)
    second = parent.snapshot(name="step-k1", default_excludes=False)
    assert second["layer"]["stack"] == [base, layer["digest"]]
    assert rt.layer_inspect("step-k1")["digest"] == second["layer"]["digest"]
    with rt.create(layers=["step-k1"]) as restored:
        assert out(restored, "cat /work/state /work/more /tmp/residue") == "step-k\nmore\njunk\n"
    # full=True packs everything since the create again, on the base alone.
    assert parent.snapshot(full=True)["layer"]["stack"] == [base]


def test_fork_children_identity_and_lineage(rt: sandlet.Runtime, parent: sandlet.Sandbox) -> None:
    with parent.fork(3, labels={"branch": "b"}) as forked:
        assert isinstance(forked, sandlet.ForkResult)
        assert set(forked.snapshot) == SNAPSHOT_KEYS and forked.digest == forked.snapshot["layer"]["digest"]
        assert forked.errors == [None, None, None] and forked.ok and forked.check() is forked
        children = list(forked)
        assert children == forked.children and len(children) == 3
        seeds = set()
        for i, child in enumerate(children):
            assert isinstance(child, sandlet.Sandbox)
            assert out(child, "cat /work/state; hostname") == f"step-k\nagent-{i}\n"
            seed = out(child, "echo $SANDLET_SEED").strip()
            assert len(seed) == 16 and int(seed, 16) >= 0
            seeds.add(seed)
            labels = child.info()["spec"]["labels"]
            assert labels["task"] == "t1" and labels["branch"] == "b"
            assert labels["sandlet.parent"] == parent.id
            assert labels["sandlet.snapshot"] == forked.digest
            assert labels["sandlet.fork_index"] == str(i)
        assert len(seeds) == 3
        assert len({c.id for c in children} | {parent.id}) == 4
        # Each child diverges on its own.
        children[0].exec("echo zero > /work/state", check=True)
        assert out(children[1], "cat /work/state") == "step-k\n"
        assert out(parent, "cat /work/state") == "step-k\n"
        ids = {c.id for c in children}
        assert ids <= {r["id"] for r in rt.list()}
    # Leaving the block destroyed the (owned) children and closed their handles.
    assert all(c.closed for c in children)
    assert {r["id"] for r in rt.list()} == {parent.id}


def test_fork_of_a_snapshot_layer(rt: sandlet.Runtime, base: str, parent: sandlet.Sandbox) -> None:
    digest = parent.snapshot()["layer"]["digest"]
    with rt.fork_snapshot(digest, 2, labels={"x": "y"}, limits={"memory": "256M"}, hostname="node") as forked:
        assert forked.ok and forked.digest == digest and forked.snapshot["existed"] is True
        for i, child in enumerate(forked):
            assert out(child, "cat /work/state; hostname") == f"step-k\nnode-{i}\n"
            spec = child.info()["spec"]
            assert spec["limits"]["memory"] == 256 << 20
            assert "sandlet.parent" not in spec["labels"]
            assert spec["labels"]["x"] == "y" and spec["labels"]["sandlet.fork_index"] == str(i)
    # Without a spec: the default one.
    with rt.fork_snapshot(digest, 1) as forked:
        assert out(forked.children[0], "hostname") == "sandbox-0\n"
    assert {r["id"] for r in rt.list()} == {parent.id}


def test_secrets_are_hidden_and_not_forked(rt: sandlet.Runtime, base: str) -> None:
    with rt.create(layers=[base], secrets={"TOKEN": "s3cret"}, env={"PLAIN": "p"}) as sb:
        assert out(sb, "echo $TOKEN $PLAIN") == "s3cret p\n"
        info = sb.info()
        assert info["spec"]["secrets"] == {"TOKEN": "<hidden>"}
        assert "s3cret" not in json.dumps(info) and "s3cret" not in json.dumps(rt.list())
        with sb.fork(1) as forked:
            child = forked.children[0]
            assert child is not None and out(child, "echo \"[$TOKEN]\"") == "[]\n"
            assert "secrets" not in child.info()["spec"]
        with sb.fork(1, copy_secrets=True) as forked:
            child = forked.children[0]
            assert child is not None and out(child, "echo $TOKEN") == "s3cret\n"
            assert child.info()["spec"]["secrets"] == {"TOKEN": "<hidden>"}
    spec = sandlet.Spec()
    spec.set_secret("KEY", "hush")
    assert "hush" not in repr(spec) and "<hidden>" in repr(spec)
    with pytest.raises(sandlet.InvalidArgument, match="secrets"):
        rt.create(layers=[base], secrets={"TOKEN": "a"}, env={"TOKEN": "b"})


def test_fork_of_a_detached_sandbox_leaves_its_children(rt: sandlet.Runtime, base: str) -> None:
    sb = rt.create(layers=[base], lifetime="detached")
    try:
        with sb.fork(2) as forked:
            ids = [c.id for c in forked]
        assert set(ids) <= {r["id"] for r in rt.list()}  # detached as their parent: only closed
        for sandbox_id in ids:
            with rt.attach(sandbox_id) as child:
                child.destroy()
    finally:
        sb.destroy()
        sb.close()
    assert rt.list() == []


def test_bad_forks_raise(rt: sandlet.Runtime, base: str, parent: sandlet.Sandbox) -> None:
    with pytest.raises(sandlet.InvalidArgument, match="'n'") as e:
        parent.fork(0)
    assert e.value.code_name == "INVALID_ARGUMENT"
    with pytest.raises(sandlet.InvalidArgument):
        parent.fork(-1)
    with pytest.raises(sandlet.InvalidArgument, match="'n'"):
        parent.fork(1025)
    with pytest.raises(sandlet.InvalidArgument, match="labels"):
        parent.fork(1, labels={"a=b": "c"})
    with pytest.raises(sandlet.NotFound):
        rt.fork_snapshot("sha256:" + "0" * 64, 1)
    with pytest.raises(sandlet.NotFound):
        rt.fork_snapshot("no-such-snapshot", 1)
    with pytest.raises(sandlet.InvalidArgument, match="not a snapshot"):
        rt.fork_snapshot(base, 1)  # an imported layer, not a snapshot
    digest = parent.snapshot()["layer"]["digest"]
    with pytest.raises(sandlet.InvalidArgument, match="layers"):
        rt.fork_snapshot(digest, 1, layers=[base])
    with pytest.raises(sandlet.InvalidArgument, match="max_depth"):
        parent.snapshot(max_depth=1)
    assert {r["id"] for r in rt.list()} == {parent.id}


def test_snapshot_and_fork_from_asyncio(root_dir: str, rootfs: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        async with sandlet.AsyncRuntime(root_dir) as rt:
            base = (await rt.layer_import(rootfs))["layers"][0]["digest"]
            async with await rt.create(layers=[base], hostname="a", secrets={"S": "x"}) as sb:
                await sb.exec("echo async > /state", check=True)
                snap = await sb.snapshot()
                assert set(snap) == SNAPSHOT_KEYS and snap["layer"]["stack"] == [base]
                async with await rt.create(layers=[snap["layer"]["digest"]]) as restored:
                    assert (await restored.exec("cat /state")).stdout_text == "async\n"
                forked = await sb.fork(2, copy_secrets=True)
                assert isinstance(forked, sandlet.AsyncForkResult)
                async with forked:
                    assert forked.ok
                    results = await asyncio.gather(*(c.exec("cat /state; hostname; echo $S") for c in forked))
                    assert [r.stdout_text for r in results] == ["async\na-0\nx\n", "async\na-1\nx\n"]
                    assert all(isinstance(c, sandlet.AsyncSandbox) for c in forked)
                assert all(c is not None and c.closed for c in forked.children)
                async with await rt.fork_snapshot(forked.digest, 1, labels={"k": "v"}) as more:
                    child = more.children[0]
                    assert child is not None
                    assert (await child.info())["spec"]["labels"]["sandlet.snapshot"] == forked.digest
                with pytest.raises(sandlet.InvalidArgument):
                    await sb.fork(0)
                with pytest.raises(sandlet.NotFound):
                    await rt.fork_snapshot("sha256:" + "1" * 64, 1)

                # A cancelled fork: the children that still arrive are closed, so destroyed.
                orphans: list = []
                arrived = asyncio.Event()

                def close_orphans(raw: Any) -> None:
                    orphans.append(raw)
                    close_handles(raw)
                    arrived.set()

                monkeypatch.setattr(sandlet._aio, "close_handles", close_orphans)
                task = asyncio.ensure_future(sb.fork(2))
                await asyncio.sleep(0)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await asyncio.wait_for(arrived.wait(), 60)
                handles = orphans[0][1]
                assert len(handles) == 2 and all(h is not None and h.closed for h in handles)
                deadline = time.monotonic() + 30
                while {r["id"] for r in await rt.list()} != {sb.id}:
                    assert time.monotonic() < deadline, await rt.list()
                    await asyncio.sleep(0.05)
            assert await rt.list() == []

    asyncio.run(main())
