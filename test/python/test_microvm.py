"""The microvm backend's own checks, beyond the conformance suite (which runs on it too): the jail QEMU
runs in, seen from the host; the guest's isolation seen from inside; store layers as disks; refusals that
name the field and leave nothing behind. Boots few VMs (each is seconds under TCG)."""
from __future__ import annotations

import os
import platform

import pytest

import sandlet


def microvm_or_skip(rt: sandlet.Runtime) -> None:
    row = next(b for b in rt.backends() if b["name"] == "microvm")
    if not row["available"]:
        pytest.skip("the microvm backend is unavailable here: " + row["reason"])


def status_fields(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def jail_pids(sb: sandlet.Sandbox) -> list:
    cg = sb.info()["backend_state"]["cgroup_v2"]
    with open(os.path.join(cg, "cgroup.procs")) as f:
        return [int(p) for p in f.read().split()]


def test_qemu_runs_jailed_and_the_guest_sees_only_itself(rt: sandlet.Runtime, rootfs: str) -> None:
    microvm_or_skip(rt)
    with rt.create(backend="microvm", layers=[rootfs], limits={"memory": 128 << 20, "pids": 64}) as sb:
        # From the host: the multiplexer and QEMU, both unprivileged, no_new_privs, in their own network
        # namespace; QEMU under its seccomp filter.
        pids = jail_pids(sb)
        assert len(pids) == 2, pids
        host_net = os.readlink("/proc/self/ns/net")
        comms = []
        for pid in pids:
            st = status_fields(pid)
            comms.append(open(f"/proc/{pid}/comm").read().strip())
            assert st["Uid"].split()[0] != "0" and st["Uid"].split()[0] == st["Uid"].split()[1], st["Uid"]
            assert st["NoNewPrivs"] == "1"
            assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0
            assert os.readlink(f"/proc/{pid}/ns/net") != host_net
        qemu = [p for p, c in zip(pids, comms) if c.startswith("qemu")]
        assert qemu and status_fields(qemu[0])["Seccomp"] == "2"
        # From inside: its own kernel, its own processes only, root that cannot see the host's.
        r = sb.exec(["/bin/sh", "-c", "uname -r; ls -d /proc/[0-9]* | wc -l; id -u"])
        kernel, nprocs, uid = r.stdout.decode().split()
        assert kernel != platform.release()
        assert int(nprocs) < 10, r.stdout
        assert uid == "0"
        # Limits bind inside: pids.max and memory.max of the guest's sandbox group.
        r = sb.exec(["/bin/sh", "-c", "cat /sys/fs/cgroup/sandbox/pids.max /sys/fs/cgroup/sandbox/memory.max"])
        assert r.stdout.decode().split() == ["64", str(128 << 20)]
    assert rt.list() == []


def test_store_layers_attach_as_disks_and_a_missing_workdir_is_made(rt: sandlet.Runtime, rootfs: str,
                                                                      tmp_path) -> None:
    microvm_or_skip(rt)
    extra = tmp_path / "extra"
    (extra / "opt").mkdir(parents=True)
    (extra / "opt" / "msg").write_text("from the store\n")
    rt.layer_import(rootfs, name="vm-base")
    rt.layer_import(str(extra), name="vm-extra")
    # The environment's workdir is not in its layers: the guest's agent makes it (root's, 0755, as a container's).
    rt.env_create("vm-env", ["vm-base", "vm-extra"], env={"FOO": "bar"}, workdir="/opt/work/deep")
    with rt.create(backend="microvm", environment="vm-env", user="1000:1000") as sb:
        r = sb.exec(["/bin/sh", "-c", "echo $FOO; cat /opt/msg; pwd; stat -c '%u:%g %a' /opt/work /opt/work/deep"])
        assert r.exit_code == 0 and r.stdout == b"bar\nfrom the store\n/opt/work/deep\n0:0 755\n0:0 755\n", r
    assert rt.list() == []


@pytest.mark.parametrize("fields,named", [
    ({"mounts": [{"source": "/tmp", "target": "/mnt"}]}, "mounts"),
])
def test_refusals_name_the_field_and_leave_nothing(rt: sandlet.Runtime, rootfs: str, fields: dict, named: str) -> None:
    microvm_or_skip(rt)
    with pytest.raises(sandlet.InvalidArgument, match=named):
        rt.create(backend="microvm", layers=[rootfs], **fields)
    assert rt.list() == []
    assert os.listdir(os.path.join(rt.root, "sandboxes")) == []


def test_file_rules_inside_the_guest(root_dir: str, rootfs: str) -> None:
    """policy.files in a microVM: the guest's init applies the rules as mounts of its own before anything
    of the sandbox runs, and root in the guest cannot lift them (the mount family is denied); a rule whose
    path is missing fails the create, naming the rule, and leaves nothing."""
    import time
    rules = [{"path": "/etc", "access": "read-only"}, {"path": "/home", "access": "hidden"},
             {"path": "/tmp", "access": "writable"}]
    with sandlet.Runtime(root_dir, warm_pool=False) as rt:  # no VM launched ahead: the root must end empty
        microvm_or_skip(rt)
        with rt.create(backend="microvm", layers=[rootfs], policy={"files": rules}) as sb:
            r = sb.exec("echo x > /etc/passwd")
            assert r.exit_code != 0 and b"Read-only file system" in r.stderr
            with pytest.raises(OSError):
                sb.write_file("/etc/new", "x")
            assert sb.exec("ls -A /home; touch /home/x").exit_code != 0
            assert sb.exec("echo ok > /tmp/f && cat /tmp/f").stdout == b"ok\n"
            r = sb.exec("id -u; mount -o remount,rw /etc || umount -l /etc || echo refused")
            assert r.stdout.split()[0] == b"0" and b"refused" in r.stdout
            assert sb.exec("echo x > /etc/passwd").exit_code != 0
            # Guest root cannot get around them through the guest kernel: no disk or memory node, no mknod,
            # /proc/sys and /sys read-only, no new namespaces.
            names = sb.exec("ls /dev").stdout.split()
            assert b"null" in names and not any(n.startswith(b"vd") or n in (b"mem", b"kmem", b"port") for n in names)
            disks = [d for d in sb.exec("ls /sys/block").stdout.split() if d.startswith(b"vd")]
            assert disks  # the layer disks are there, only unreachable
            for d in disks[:2]:
                n = sb.exec(f"cat /sys/block/{d.decode()}/dev").stdout.decode().strip()
                major, minor = n.split(":")
                r = sb.exec(f"mknod /tmp/{d.decode()} b {major} {minor} && head -c 64 /tmp/{d.decode()} && echo READ")
                assert r.exit_code != 0 and b"READ" not in r.stdout
            for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/sys/kernel/uevent_helper"):
                r = sb.exec(f"echo '|/tmp/x' > {path} && echo WROTE")
                assert b"WROTE" not in r.stdout, path
            assert sb.exec("unshare -m true || echo refused").stdout.strip().endswith(b"refused")
            assert sb.exec("echo ok > /dev/null && head -c 4 /dev/urandom | wc -c").stdout.strip() == b"4"
        with pytest.raises(sandlet.InvalidArgument, match=r"policy\.files\[0\]\.path /nonexistent"):
            rt.create(backend="microvm", layers=[rootfs],
                      policy={"files": [{"path": "/nonexistent", "access": "read-only"}]})
        assert rt.list() == []
        deadline = time.monotonic() + 30  # the first VM is reclaimed on the runtime's workers
        while os.listdir(os.path.join(rt.root, "sandboxes")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert os.listdir(os.path.join(rt.root, "sandboxes")) == []


def test_toolkit_as_a_disk(rt: sandlet.Runtime, rootfs: str, tmp_path) -> None:
    """A toolkit in a microVM: its own read-only disk, mounted by the guest's init at the toolkit's path;
    toolkit execs resolve there whatever the image's /bin became (a host directory, and a store layer)."""
    import shutil
    microvm_or_skip(rt)
    tk = tmp_path / "toolkit"
    (tk / "bin").mkdir(parents=True)
    shutil.copy(os.path.join(rootfs, "bin", "busybox"), tk / "bin" / "busybox")
    (tk / "bin" / "sh").symlink_to("busybox")
    digest = rt.layer_import(str(tk), name="vm-toolkit")["layers"][0]["digest"]
    for toolkit in (str(tk), "vm-toolkit"):
        with rt.create(backend="microvm", layers=[rootfs], toolkit=toolkit) as sb:
            assert sb.exec(["/bin/busybox", "sh", "-c", "busybox rm /bin/sh; busybox printf '#!/bin/busybox sh\\necho "
                            "pwned\\n' > /bin/sh; busybox chmod 755 /bin/sh"]).ok
            assert sb.exec("echo ok").stdout == b"pwned\n"
            assert sb.exec("echo ok", toolkit=True).stdout == b"ok\n"
            r = sb.exec(["/bin/busybox", "sh", "-c", "busybox touch /.sandlet/toolkit/x || busybox echo refused"])
            assert r.stdout.strip().endswith(b"refused")
    assert digest and rt.list() == []


def test_a_missing_kernel_is_named(root_dir: str, rootfs: str, monkeypatch) -> None:
    monkeypatch.setenv("SANDLET_MICROVM_KERNEL", "/nonexistent/kit")
    with sandlet.Runtime(root_dir) as rt:
        row = next(b for b in rt.backends() if b["name"] == "microvm")
        assert not row["available"] and "/nonexistent/kit" in row["reason"]
        with pytest.raises(sandlet.Error, match="/nonexistent/kit"):
            rt.create(backend="microvm", layers=[rootfs])
        assert rt.list() == []


def test_the_accelerator_setting(root_dir: str, rootfs: str, monkeypatch) -> None:
    """$SANDLET_MICROVM_ACCEL: a bad value is named; "kvm" (for a kernel built for the host's KVM) is
    refused where /dev/kvm cannot serve, and where KVM is PVM the stock kernel cannot boot under it: the
    create fails with the guest's or QEMU's last words and leaves nothing."""
    with sandlet.Runtime(root_dir) as rt:
        microvm_or_skip(rt)
        kvm = next(b for b in rt.backends() if b["name"] == "microvm")["details"]["kvm"]
    monkeypatch.setenv("SANDLET_MICROVM_ACCEL", "fast")
    with sandlet.Runtime(root_dir) as rt:
        row = next(b for b in rt.backends() if b["name"] == "microvm")
        assert not row["available"] and "SANDLET_MICROVM_ACCEL" in row["reason"]
        with pytest.raises(sandlet.Error, match="SANDLET_MICROVM_ACCEL"):
            rt.create(backend="microvm", layers=[rootfs])
        assert rt.list() == []
    monkeypatch.setenv("SANDLET_MICROVM_ACCEL", "kvm")
    monkeypatch.setenv("SANDLET_MICROVM_BOOT_TIMEOUT_MS", "20000")
    with sandlet.Runtime(root_dir) as rt:
        row = next(b for b in rt.backends() if b["name"] == "microvm")
        if kvm in ("absent", "unusable"):
            assert not row["available"] and "SANDLET_MICROVM_ACCEL" in row["reason"]
        elif kvm == "hardware":
            with rt.create(backend="microvm", layers=[rootfs]) as sb:
                assert sb.exec(["true"]).exit_code == 0
        else:  # pvm: a stock kernel hangs or QEMU stops at once
            assert row["details"]["accelerator"] == "kvm"
            with pytest.raises(sandlet.Error, match="microVM"):
                rt.create(backend="microvm", layers=[rootfs])
        assert rt.list() == []
        assert os.listdir(os.path.join(rt.root, "sandboxes")) == []


def test_qemu_killed_leaves_nothing(rt: sandlet.Runtime, rootfs: str) -> None:
    """kill -9 of QEMU from outside: the sandbox ends (its multiplexer sees the channel go), the runtime
    reclaims it, and nothing of it is left on the host."""
    import signal
    import time
    microvm_or_skip(rt)
    sb = rt.create(backend="microvm", layers=[rootfs])
    cg = sb.info()["backend_state"]["cgroup_v2"]
    qemu = [p for p in jail_pids(sb) if open(f"/proc/{p}/comm").read().startswith("qemu")]
    assert qemu
    os.kill(qemu[0], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and rt.list():
        time.sleep(0.1)
    assert rt.list() == []
    with pytest.raises(sandlet.Error):
        sb.exec(["true"])
    sb.close()
    rt.gc()
    assert not os.path.exists(cg)
    assert os.listdir(os.path.join(rt.root, "sandboxes")) == []


def test_warm_pool_boots_ahead_and_hands_out_fresh_vms(rt: sandlet.Runtime, rootfs: str, tmp_path) -> None:
    """From the second create of the same store layers on, the warm pool launches microVMs ahead (staged for
    those layers and the last shape); a create then only configures one. Each is a fresh VM; a spec of
    another shape does not take one (its RAM and vCPUs are fixed at launch), nor does a host directory
    (packed at launch, it would be a stale copy)."""
    import time
    microvm_or_skip(rt)
    digest = rt.layer_import(rootfs, name="vm-pool-base")["layers"][-1]["digest"]
    for i in range(2):
        with rt.create(backend="microvm", layers=[digest]) as sb:
            assert sb.exec(["sh", "-c", "test ! -e /tmp/mark && echo x > /tmp/mark"]).exit_code == 0
    pool = rt.stats()["warm_pool"]
    assert pool["staged"] and pool["backend"] == "microvm"
    deadline = time.monotonic() + 120
    while rt.stats()["warm_pool"]["ready"] < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rt.stats()["warm_pool"]["ready"] >= 1
    hits = rt.stats()["warm_pool"]["hits"]
    with rt.create(backend="microvm", layers=[digest]) as sb:
        assert rt.stats()["warm_pool"]["hits"] == hits + 1
        assert sb.exec(["sh", "-c", "test ! -e /tmp/mark && echo fresh"]).stdout == b"fresh\n"
        assert sb.info()["state"] == "running"
    with rt.create(backend="microvm", layers=[digest], limits={"memory": 96 << 20}) as sb:
        assert rt.stats()["warm_pool"]["hits"] == hits + 1  # another shape: launched for this create
        mem = sb.exec(["cat", "/sys/fs/cgroup/sandbox/memory.max"]).stdout
        assert mem == b"%d\n" % (96 << 20)
    # A host directory among the layers: what the create sees is the directory as it is then, never a copy
    # packed earlier for the pool.
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "msg").write_text("one\n")
    for _ in range(2):
        with rt.create(backend="microvm", layers=[digest, str(extra)]) as sb:
            assert sb.exec(["cat", "/msg"]).stdout == b"one\n"
    time.sleep(1)
    (extra / "msg").write_text("two\n")
    with rt.create(backend="microvm", layers=[digest, str(extra)]) as sb:
        assert sb.exec(["cat", "/msg"]).stdout == b"two\n"


def test_fncall_pool_of_microvms(root_dir: str, rootfs: str) -> None:
    """FnCall on the microvm backend: the pool keeps VMs booted ahead (min_idle); each call gets a fresh one
    (a VM has no host-side reuse check, so none goes back)."""
    import time
    with sandlet.Runtime(root_dir) as rt:
        microvm_or_skip(rt)
        assert "microvm" in next(b for b in rt.backends() if b["name"] == "fncall")["details"]["pools_on"]
        rt.set_call_pool(backend="microvm", layers=[rootfs], min_idle=1, max_size=2)
        r = rt.call(script="echo x > /tmp/leak; uname -r", backend="microvm", layers=[rootfs])
        assert r.exit_code == 0 and r.stdout.strip() not in (b"", platform.release().encode())  # the guest's kernel
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and rt.call_stats()["pools"][0]["idle"] < 1:
            time.sleep(0.2)
        r = rt.call(script="test -e /tmp/leak || echo clean", backend="microvm", layers=[rootfs])
        assert r.stdout == b"clean\n"
        (pool,) = rt.call_stats()["pools"]
        assert pool["handovers"] >= 1 and pool["reused"] == 0


def test_async_run_through_the_agent(root_dir: str, rootfs: str) -> None:
    """A microVM cannot start a one-shot command itself, so an asynchronous run is a create, one exec and
    a destroy on a thread of the library's: output reaches the caller's descriptor, the exit status comes
    back, cancelling the awaiting task kills the run, and nothing is left behind."""
    import asyncio

    async def scenario() -> None:
        async with sandlet.AsyncRuntime(root_dir, warm_pool=False) as art:
            if not next(b for b in art.sync.backends() if b["name"] == "microvm")["available"]:
                pytest.skip("the microvm backend is unavailable here")
            r_fd, w_fd = os.pipe()
            try:
                res = await art.run(["sh", "-c", "echo out-$((6*7)); exit 3"], backend="microvm",
                                    layers=[rootfs], stdout=w_fd)
                os.close(w_fd)
                w_fd = -1
                assert res.exit_code == 3
                assert os.read(r_fd, 100) == b"out-42\n"
            finally:
                os.close(r_fd)
                if w_fd >= 0:
                    os.close(w_fd)
            task = asyncio.ensure_future(art.run(["sleep", "600"], backend="microvm", layers=[rootfs]))
            await asyncio.sleep(1.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            deadline = asyncio.get_running_loop().time() + 60
            while art.sync.list() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.1)  # the cancelled run destroys its sandbox on the library's thread
            assert art.sync.list() == []

    asyncio.run(scenario())
    with sandlet.Runtime(root_dir) as rt:
        rt.gc()
        assert rt.list() == []
        assert os.listdir(os.path.join(rt.root, "sandboxes")) == []

