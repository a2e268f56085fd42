"""Lifecycle, descendants and limits every backend must give, through the Python package: create, labels
and list filters, reattach after the owner was killed, gc after a kill mid-create, timeouts and cancels that
end every process, memory/pids/disk limits. Every test ends with the leak check."""
from __future__ import annotations

import errno
import os
import random
import time
from typing import List, Set

import pytest

import sandlet
from .conformance_helpers import Conformance, Sleeper, first_line, host_pids_in_cgroup, kill9, shell, until


def test_create_destroy(conf: Conformance) -> None:
    sb = conf.create(hostname="pyconf")
    assert shell(sb, "hostname") == "pyconf\n"
    info = sb.info()
    assert (info["id"], info["backend"]) == (sb.id, conf.backend)
    assert [r["id"] for r in conf.rt.list()] == [sb.id]
    sb.destroy()
    assert conf.rt.list() == []
    with pytest.raises(sandlet.FailedPrecondition):
        sb.exec("true")
    with pytest.raises(sandlet.NotFound):
        conf.rt.attach(sb.id)
    sb.close()
    conf.check_no_leaks()


def test_failed_create_names_the_field_and_leaves_nothing(conf: Conformance) -> None:
    with pytest.raises(sandlet.InvalidArgument) as e:
        conf.rt.create(backend=conf.backend, layers=["/no/such/layer"])
    assert "layers[0]" in str(e.value)
    with pytest.raises(sandlet.InvalidArgument) as e:
        conf.rt.create(conf.spec(limits={"memory": "lots"}))
    assert "memory" in str(e.value)
    assert conf.rt.list() == []
    conf.check_no_leaks()


def test_labels_and_list_filters(conf: Conformance) -> None:
    a = conf.create(labels={"task": "t1", "dataset": "d7"})
    b = conf.create(labels={"task": "t2"})
    c = conf.create()  # (kept: closing the last handle of an owned sandbox destroys it)
    assert sorted(r["id"] for r in conf.rt.list()) == sorted([a.id, b.id, c.id])
    assert [r["id"] for r in conf.rt.list("task=t1")] == [a.id]
    assert [r["id"] for r in conf.rt.list(labels={"task": "t1", "dataset": "d7"})] == [a.id]
    assert conf.rt.list(labels={"task": "t1", "dataset": "other"}) == []
    assert [r["id"] for r in conf.rt.list("task=t2")] == [b.id]
    assert conf.rt.list("task=none") == []
    with pytest.raises(sandlet.InvalidArgument):
        conf.rt.list("no-equals-sign")
    assert conf.rt.list("task=t1")[0]["spec"]["labels"] == {"task": "t1", "dataset": "d7"}
    conf.check_no_leaks()


def test_reattach_after_the_owner_was_killed(conf: Conformance) -> None:
    owner = conf.owner("sb = rt.create(spec, lifetime='detached')\n"
                       "sb.exec('echo before > /tmp/state')\n"
                       "print(sb.id, flush=True)\n"
                       "time.sleep(3600)\n")
    try:
        sid = first_line(owner)
        assert sid, "the owner printed no id"
        conf.ids.add(sid)
    finally:
        kill9(owner)
    conf.rt.gc()  # never touches a live detached sandbox
    sb = conf.rt.attach(sid)
    assert sb.read_file("/tmp/state") == b"before\n"
    assert shell(sb, "echo after") == "after\n"
    sb.destroy()
    conf.check_no_leaks()


def test_owned_sandbox_dies_with_its_killed_owner(conf: Conformance) -> None:
    owner = conf.owner("sb = rt.create(spec)\nprint(sb.id, flush=True)\ntime.sleep(3600)\n")
    try:
        sid = first_line(owner)
        assert sid
        conf.ids.add(sid)
        assert conf.rt.attach(sid).exec("true").exit_code == 0
    finally:
        kill9(owner)
    assert until(lambda: not host_pids_in_cgroup(sid))
    conf.rt.gc()
    assert sid not in [r["id"] for r in conf.rt.list()]
    conf.check_no_leaks()


def test_gc_after_the_owner_was_killed_mid_create(conf: Conformance) -> None:
    rng = random.Random(4321)
    for _ in range(5):
        owner = conf.owner("print('ready', flush=True)\n"
                           "while True:\n    rt.create(spec).destroy()\n")
        seen: Set[str] = set()
        try:
            assert first_line(owner) == "ready"
            end = time.monotonic() + 0.15 + rng.random() * 0.3  # the owner's import and open, then creates
            while time.monotonic() < end:
                seen.update(conf.sandbox_dirs())
        finally:
            kill9(owner)
        conf.ids.update(s[len(".reclaim-"):] if s.startswith(".reclaim-") else s for s in seen)
    conf.rt.gc()
    assert conf.rt.list() == []
    conf.check_no_leaks()


def test_timeout_kills_every_descendant(conf: Conformance) -> None:
    s = Sleeper()
    with conf.create() as sb:
        start = time.monotonic()
        r = sb.exec(f"{s.cmd} & {s.cmd} & ({s.cmd} &); setsid {s.cmd} & {s.cmd}", timeout=1)
        assert r.timed_out and r.signal == 9 and r.exit_code == -1
        assert time.monotonic() - start < 10
        assert until(lambda: s.inside(sb) == 0) and until(lambda: s.on_host() == 0)
        assert shell(sb, "echo alive") == "alive\n"
    conf.check_no_leaks()


def test_cancel_kills_every_descendant(conf: Conformance) -> None:
    s = Sleeper()
    with conf.create() as sb:
        stream = sb.exec_stream(f"{s.cmd} & ({s.cmd} &); {s.cmd}")
        assert until(lambda: s.inside(sb) == 3)
        if conf.backend == "container":
            assert s.on_host() == 3  # (a VM's processes are not the host's)
        stream.cancel()
        with pytest.raises(sandlet.Cancelled):
            stream.wait()
        assert until(lambda: s.inside(sb) == 0) and until(lambda: s.on_host() == 0)
    conf.check_no_leaks()


def test_memory_limit(conf: Conformance) -> None:
    with conf.create(limits={"memory": "64M"}) as sb:
        r = sb.exec('head -c 268435456 /dev/zero | tail -n 1 >/dev/null; echo "tail: $?"', timeout=60)
        # The OOM killer ends tail (the shell sees 137), or the shell too before tail's memory is reaped.
        assert r.stdout == b"tail: 137\n" or (r.exit_code, r.signal) == (-1, 9), (r.stdout, r.stderr)
        assert shell(sb, "echo alive") == "alive\n"
    conf.check_no_leaks()


def test_pids_limit(conf: Conformance) -> None:
    s = Sleeper()
    with conf.create(limits={"pids": 32}) as sb:
        r = sb.exec(f"(i=0; while [ $i -lt 100 ]; do {s.cmd} & i=$((i+1)); done) 2>/dev/null; "
                    "set -- /proc/[0-9]*; echo $#", timeout=30)
        assert 20 <= int(r.stdout) <= 32
        assert until(lambda: s.on_host() == 0)
    conf.check_no_leaks()


def test_disk_limit(conf: Conformance) -> None:
    with conf.create(limits={"disk": "16M"}) as sb:
        r = sb.exec("dd if=/dev/zero of=/big bs=1048576 count=64 2>&1", timeout=60)
        assert r.exit_code != 0 and b"No space left on device" in r.stdout
        shell(sb, "rm -f /big")
        with pytest.raises(sandlet.ResourceExhausted) as e:
            sb.write_file("/big-file", b"x" * (32 << 20))
        assert isinstance(e.value, OSError)
        assert (e.value.errno, e.value.filename) == (errno.ENOSPC, "/big-file")
        sb.write_file("/small", b"y" * (1 << 20))
    conf.check_no_leaks()


def capabilities(conf: Conformance) -> List[str]:
    return next(b["capabilities"] for b in conf.rt.backends() if b["name"] == conf.backend)


def test_warm_pool_serves_repeated_creates_where_the_backend_prepares_ahead(conf: Conformance) -> None:
    ahead = "prepare_ahead" in capabilities(conf)
    assert conf.rt.stats()["warm_pool"]["hits"] == 0
    for i in range(4):
        with conf.create(hostname=f"h{i}") as sb:
            assert shell(sb, "hostname") == f"h{i}\n"  # a pooled sandbox still gets its spec
        if ahead and i >= 1:  # the pool starts at the second create and fills on a thread of its own
            assert until(lambda: conf.rt.stats()["warm_pool"]["ready"] >= 1)
    pool = conf.rt.stats()["warm_pool"]
    if ahead:
        assert pool["hits"] >= 2, pool  # the third and fourth found a prepared sandbox
        assert pool["hits"] + pool["misses"] == 4
        assert pool["backend"] == conf.backend
    else:
        assert pool["hits"] == 0
    conf.check_no_leaks()


def test_pause_freezes_the_sandbox_or_is_unimplemented(conf: Conformance) -> None:
    with conf.create() as sb:
        if "pause" not in capabilities(conf):
            with pytest.raises(sandlet.Unimplemented, match=conf.backend):
                sb.pause()
        else:
            sb.exec("(while :; do echo x >> /tmp/ticks; sleep 0.02; done) >/dev/null 2>&1 &", keep_background=True)
            assert until(lambda: sb.exec("test -s /tmp/ticks").exit_code == 0)
            before = sb.read_file("/tmp/ticks").count(b"x")
            sb.pause()
            assert sb.info()["state"] == "paused"
            time.sleep(0.4)  # ~20 ticks if it were running
            first = sb.read_file("/tmp/ticks").count(b"x")  # this call resumes it
            assert first - before <= 3
            assert until(lambda: sb.read_file("/tmp/ticks").count(b"x") > first + 3)
    conf.check_no_leaks()
