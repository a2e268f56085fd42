"""The synchronous API: exec, files, info/list, context managers, streaming, layers and environments."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import sandlet
from conftest import python_env


def test_version_and_backends(rt: sandlet.Runtime) -> None:
    assert sandlet.__version__.count(".") == 2
    assert sandlet.ABI_VERSION == 1
    backends = {b["name"]: b for b in rt.backends()}
    assert backends["container"]["available"] is True
    assert {"prepare_ahead", "one_shot", "pause", "store_layers"} <= set(backends["container"]["capabilities"])
    vm = backends["microvm"]
    assert vm["details"]["accelerator"] in ("kvm", "tcg")
    if vm["available"]:
        assert set(vm["capabilities"]) == {"prepare_ahead", "pause", "layer_images"} and vm["details"]["kernel"]
    else:
        assert vm["capabilities"] == [] and vm["reason"]
    assert backends["fullvm"]["capabilities"] == [] and "not built" in backends["fullvm"]["reason"]
    assert {"set_limits", "reuse_check"} <= set(backends["container"]["capabilities"])
    # A fork is one snapshot and N restores: the runtime reports it wherever snapshots are.
    assert {"snapshot", "fork"} <= set(backends["container"]["capabilities"]) and "fork" not in vm["capabilities"]
    pools_on = ["container"] + (["microvm"] if vm["available"] else [])
    assert backends["fncall"]["available"] and backends["fncall"]["details"]["pools_on"] == pools_on
    with pytest.raises(sandlet.InvalidArgument, match="sandlet_call"):
        rt.create({"layers": ["/"], "backend": "fncall"})
    assert rt.root and os.path.isdir(rt.root)


def test_exec_string_argv_env_cwd_stdin(sb: sandlet.Sandbox) -> None:
    r = sb.exec("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (3, b"out\n", b"err\n", False)
    assert sb.exec(["echo", "a b"]).stdout_text == "a b\n"
    assert sb.exec("echo $FOO", env={"FOO": "bar"}).stdout == b"bar\n"
    assert sb.exec("pwd", cwd="/tmp").stdout == b"/tmp\n"
    assert sb.exec(["cat"], stdin=b"\x00bytes\xff").stdout == b"\x00bytes\xff"
    assert sb.exec(["cat"], stdin="text").stdout == b"text"
    r = sb.exec(["true"])
    assert r.ok and r.signal == 0 and not r.timed_out and r.duration_ns > 0
    assert "exit_code=0" in repr(r)


def test_exec_timeout_kill_and_output_limit(sb: sandlet.Sandbox) -> None:
    t0 = time.monotonic()
    r = sb.exec("sleep 30 & sleep 30", timeout=0.3)
    assert r.timed_out and not r.ok and time.monotonic() - t0 < 10
    assert "sleep" not in sb.exec("ps -o comm").stdout_text  # every process of it was killed
    r = sb.exec("head -c 100000 /dev/zero", output_limit=1000)
    assert len(r.stdout) == 1000 and r.stdout_truncated
    r = sb.exec("sh -c 'kill -9 $$'")
    assert r.exit_code == -1 and r.signal == 9


def test_run_one_shot(rt: sandlet.Runtime, rootfs: str, tmp_path) -> None:
    out_path = tmp_path / "out"
    with open(out_path, "wb") as out:
        r = rt.run("echo $GREETING $FROM_SPEC; exit 3", layers=[rootfs], env={"GREETING": "hi"}, stdout=out)
    assert r.exit_code == 3 and r.stdout == b"" and r.run_ns > 0
    assert out_path.read_bytes() == b"hi\n"
    # The spec as a dict (its env is the command's base), stdin and stderr as descriptors.
    in_r, in_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        os.write(in_w, b"from the host")
        os.close(in_w)
        r = rt.run(["sh", "-c", "cat >&2; echo \" $FROM_SPEC\" >&2"], {"layers": [rootfs], "env": {"FROM_SPEC": "1"}},
                   stdin=in_r, stderr=err_w)
        os.close(err_w)
        err_w = -1
        assert r.ok and os.read(err_r, 100) == b"from the host 1\n"
    finally:
        for fd in (in_r, err_r, err_w):
            if fd >= 0:
                os.close(fd)
    t0 = time.monotonic()
    r = rt.run("sleep 30 & sleep 30", layers=[rootfs], timeout=0.3)
    assert r.timed_out and r.signal == 9 and time.monotonic() - t0 < 10
    with pytest.raises(sandlet.NotFound):
        rt.run(["no-such-command"], layers=[rootfs])
    with pytest.raises(sandlet.CommandFailed):
        rt.run("exit 4", layers=[rootfs], check=True)
    with pytest.raises(sandlet.InvalidArgument, match="stdout"):
        rt.run("true", layers=[rootfs], stdout="not a file")
    assert rt.list() == []  # each run's sandbox is gone from the listing when it returns


def test_check_raises_command_failed(sb: sandlet.Sandbox) -> None:
    assert sb.exec("true", check=True).ok
    with pytest.raises(sandlet.CommandFailed) as e:
        sb.exec("echo boom >&2; exit 4", check=True)
    assert e.value.exit_code == 4 and "boom" in str(e.value) and e.value.result.stderr == b"boom\n"


def test_files(sb: sandlet.Sandbox) -> None:
    sb.write_file("/work/a/b.txt", "hello")
    assert sb.read_file("/work/a/b.txt") == b"hello"
    sb.write_file("/work/run.sh", b"#!/bin/sh\necho ran\n", mode=0o755)
    assert sb.exec("/work/run.sh").stdout == b"ran\n"
    with pytest.raises(sandlet.NotFound):
        sb.read_file("/no/such/file")
    sb.write_file("/big", b"x" * 5000)
    with pytest.raises(sandlet.OutOfRange):
        sb.read_file("/big", max_bytes=100)
    with pytest.raises(sandlet.InvalidArgument):
        sb.write_file("relative/path", b"")


def test_error_mapping(rt: sandlet.Runtime, sb: sandlet.Sandbox, rootfs: str) -> None:
    with pytest.raises(sandlet.NotFound) as e:
        sb.exec(["no-such-command"])
    assert isinstance(e.value, LookupError) and isinstance(e.value, sandlet.Error)
    assert e.value.code == 5 and e.value.code_name == "NOT_FOUND" and "no-such-command" in e.value.message
    with pytest.raises(sandlet.InvalidArgument) as e:
        rt.create(layers=[rootfs], limits={"memory": "lots"})
    assert isinstance(e.value, ValueError) and "memory" in str(e.value)
    with pytest.raises(sandlet.InvalidArgument, match="colour"):
        rt.create(layers=[rootfs], colour="blue")
    with pytest.raises(sandlet.InvalidArgument, match="timeout"):
        sb.exec("true", timeout=-1)
    with pytest.raises(sandlet.NotFound):
        rt.attach("0123456789ab")
    copy = pickle.loads(pickle.dumps(e.value))
    assert type(copy) is sandlet.InvalidArgument and copy.code == 3 and copy.message == e.value.message


def test_destroy_and_close_semantics(rt: sandlet.Runtime, rootfs: str) -> None:
    sb = rt.create(layers=[rootfs], labels={"case": "destroy"})
    sid = sb.id
    sb.destroy()
    with pytest.raises(sandlet.FailedPrecondition):
        sb.exec("true")
    sb.close()
    sb.close()  # idempotent
    with pytest.raises(sandlet.FailedPrecondition, match="closed"):
        sb.exec("true")
    assert sid not in [s["id"] for s in rt.list()]


def test_create_soon_open_then_run(root_dir: str, rootfs: str) -> None:
    # The hint of a one-shot script: the open prepares the create that follows (or wastes it at close).
    with sandlet.Runtime(root_dir, create_soon=True) as rt:
        assert rt.run("exit 4", layers=[rootfs]).exit_code == 4
    with sandlet.Runtime(root_dir, create_soon=True) as rt:
        assert rt.list() == []


def test_runtime_close_destroys_owned(root_dir: str, rootfs: str) -> None:
    with sandlet.Runtime(root_dir) as rt:
        sb = rt.create(layers=[rootfs])
        assert [s["state"] for s in rt.list()] == ["running"]
    assert rt.closed
    with pytest.raises(sandlet.FailedPrecondition):
        rt.list()
    with pytest.raises(sandlet.FailedPrecondition):
        sb.exec("true")  # its runtime is closed
    sb.close()
    with sandlet.Runtime(root_dir) as rt2:
        assert rt2.list() == []


def test_info_and_list_by_label(rt: sandlet.Runtime, rootfs: str) -> None:
    with rt.create(layers=[rootfs], labels={"task": "t1"}, env={"A": "1"}) as a, \
         rt.create({"layers": [rootfs], "labels": {"task": "t2"}}) as b:
        info = a.info()
        assert info["id"] == a.id and info["state"] == "running" and info["spec"]["labels"] == {"task": "t1"}
        assert a.exec("echo $A").stdout == b"1\n"
        assert [s["id"] for s in rt.list(label="task=t2")] == [b.id]
        with rt.create(layers=[rootfs], labels={"task": "t2", "iteration": "3"}) as c:
            assert [s["id"] for s in rt.list(labels={"task": "t2", "iteration": "3"})] == [c.id]
            assert [s["id"] for s in rt.list(label="iteration=3", labels={"task": "t1"})] == []
        with pytest.raises(sandlet.InvalidArgument, match="key=value"):
            rt.list(label="no-equals-sign")
        assert {s["id"] for s in rt.list()} == {a.id, b.id}


def test_spec_object(rt: sandlet.Runtime, rootfs: str) -> None:
    spec = sandlet.Spec()
    spec.add_layer(rootfs)
    spec.set_hostname("box1")
    spec.set_memory(256 << 20)
    with pytest.raises(sandlet.InvalidArgument, match="hostname"):
        spec.set_hostname("not a hostname!")
    assert json.loads(spec.to_json())["hostname"] == "box1"
    with rt.create(spec) as sb:
        assert sb.exec("hostname").stdout == b"box1\n"
    with rt.create(spec, hostname="box2") as sb:  # keyword fields override a Spec
        assert sb.exec("hostname").stdout == b"box2\n"


def test_exec_stream_sync(sb: sandlet.Sandbox) -> None:
    stream = sb.exec_stream("for i in 1 2 3; do echo $i; sleep 0.05; done; echo e >&2")
    chunks = list(stream)
    assert b"".join(d for s, d in chunks if s == sandlet.STDOUT) == b"1\n2\n3\n"
    assert b"".join(d for s, d in chunks if s == sandlet.STDERR) == b"e\n"
    assert stream.result is not None and stream.result.ok and stream.result.stdout == b""
    # Leaving the loop early kills the command.
    with sb.exec_stream("echo first; sleep 30; touch /after") as s2:
        for _stream, data in s2:
            assert data == b"first\n"
            break
    time.sleep(0.2)
    assert "sleep" not in sb.exec("ps -o comm").stdout_text
    assert not sb.exec("test -e /after").ok


def test_gil_released_during_sync_exec(sb: sandlet.Sandbox) -> None:
    counter = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        before = counter[0]
        sb.exec("sleep 0.5")
        during = counter[0] - before
    finally:
        stop.set()
        t.join()
    # A thread that never got the GIL would have counted nothing during the half second.
    assert during > 10_000, during


def test_threads_share_a_sandbox(sb: sandlet.Sandbox) -> None:
    results = []

    def work(i: int) -> None:
        results.append(sb.exec(f"echo {i}").stdout)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == sorted(f"{i}\n".encode() for i in range(16))


def test_ctrl_c_kills_the_command(root_dir: str, rootfs: str) -> None:
    script = textwrap.dedent(f"""
        import os, signal, threading, time, sandlet
        with sandlet.Runtime({root_dir!r}) as rt, rt.create(layers=[{rootfs!r}]) as sb:
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
            t0 = time.monotonic()
            try:
                sb.exec("sleep 30")
                print("not interrupted")
            except KeyboardInterrupt:
                print("interrupted after", round(time.monotonic() - t0, 1))
            print("left:", sb.exec("ps -o comm").stdout_text.split()[1:])
    """)
    out = subprocess.run([sys.executable, "-c", script], env=python_env(), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "interrupted after" in out.stdout, out.stdout
    assert float(out.stdout.split("interrupted after")[1].split()[0]) < 5
    assert "sleep" not in out.stdout.split("left:")[1]


def test_ctrl_c_ends_a_one_shot_run(root_dir: str, rootfs: str) -> None:
    script = textwrap.dedent(f"""
        import os, signal, threading, time, sandlet
        with sandlet.Runtime({root_dir!r}) as rt:
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
            t0 = time.monotonic()
            try:
                rt.run("sleep 30", layers=[{rootfs!r}])
                print("not interrupted")
            except KeyboardInterrupt:
                print("interrupted after", round(time.monotonic() - t0, 1))
            print("listed:", len(rt.list()))
    """)
    out = subprocess.run([sys.executable, "-c", script], env=python_env(), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "interrupted after" in out.stdout, out.stdout
    assert float(out.stdout.split("interrupted after")[1].split()[0]) < 5
    assert "listed: 0" in out.stdout


def test_layers_and_environments(rt: sandlet.Runtime, rootfs: str, tmp_path) -> None:
    ws = tmp_path / "workspace"
    (ws / "repo").mkdir(parents=True)
    (ws / "repo" / "main.sh").write_text("echo from-workspace\n")
    for i in range(300):
        (ws / "repo" / f"f{i}.txt").write_text(str(i))
    calls = []
    base = rt.layer_import(rootfs, role="base", name="bb")
    got = rt.layer_import(ws, role="workspace", name="ws", progress=lambda b, t, f: calls.append(f))
    layer = got["layers"][0]
    assert got["existed"] == [False] and layer["role"] == "workspace" and layer["digest"]
    assert calls, "progress was never called"
    assert rt.layer_import(ws, role="workspace")["existed"] == [True]  # content-addressed
    assert {l["name"] for l in rt.layer_list()} >= {"bb", "ws"}
    assert rt.layer_inspect("ws")["digest"] == layer["digest"]
    assert rt.layer_inspect(layer["digest"][:12])["digest"] == layer["digest"]
    with pytest.raises(sandlet.NotFound):
        rt.layer_inspect("no-such-layer")

    version = rt.env_create("task", ["bb", "ws"], env={"GREETING": "hi"}, workdir="/repo")
    assert version["version"] == 1
    assert [e["name"] for e in rt.env_list()] == ["task"]
    with rt.create(environment="task") as sb:
        assert sb.exec("sh main.sh; echo $GREETING; pwd").stdout == b"from-workspace\nhi\n/repo\n"
        assert sb.info()["environment"] == "task@1"
        with pytest.raises(sandlet.FailedPrecondition):
            rt.layer_remove("ws")  # an environment and a live sandbox use it
    rt.env_remove("task")
    rt.layer_remove("ws")
    assert base["layers"][0]["digest"] in {l["digest"] for l in rt.layer_list()}
    report = rt.layer_gc()
    assert "bytes_freed" in report


def test_bad_calls_are_clear(rt: sandlet.Runtime, sb: sandlet.Sandbox) -> None:
    with pytest.raises(sandlet.InvalidArgument, match="argv"):
        sb.exec([])
    with pytest.raises(sandlet.InvalidArgument):
        sandlet.Spec.from_json("{not json")
    with pytest.raises(sandlet.InvalidArgument, match="layer"):
        rt.create()  # a spec needs a layer or an environment
    with pytest.raises(sandlet.NotFound):
        rt.layer_import("/no/such/dir")
