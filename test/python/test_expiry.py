"""What a max lifetime or idle timeout does (spec on_expiry / keep_s): kept for debugging, then ended."""
from __future__ import annotations

import time

import pytest

import sandlet


def test_keep_on_expiry_stops_processes_and_keeps_calls(rt: sandlet.Runtime, rootfs: str) -> None:
    sb = rt.create(layers=[rootfs], max_lifetime_s=1, on_expiry="keep", keep_s=600)
    assert sb.info()["spec"]["on_expiry"] == "keep" and sb.info()["spec"]["keep_s"] == 600
    sb.exec("(while :; do date +%s%N > /tmp/n; sleep 0.02; done) >/dev/null 2>&1 &", keep_background=True)
    time.sleep(1.4)
    first = sb.read_file("/tmp/n")
    time.sleep(0.2)
    assert sb.read_file("/tmp/n") == first  # the writer is stopped
    assert sb.exec("echo still here").stdout_text == "still here\n"
    sb.destroy()


def test_on_expiry_is_checked(rt: sandlet.Runtime, rootfs: str) -> None:
    with pytest.raises(sandlet.InvalidArgument, match="on_expiry"):
        rt.create(layers=[rootfs], on_expiry="archive")
    spec = sandlet.Spec()
    with pytest.raises(sandlet.InvalidArgument, match="keep_s"):
        spec.set_on_expiry("keep", 0)


def test_keep_logs_on_expiry_keeps_last_output_and_audit(rt: sandlet.Runtime, rootfs: str) -> None:
    sb = rt.create(layers=[rootfs], max_lifetime_s=1.5, on_expiry="keep_logs", keep_s=600, labels={"job": "py"})
    assert sb.info()["spec"]["on_expiry"] == "keep_logs"
    assert sb.exec("echo hello-from-agent; echo warn >&2; exit 4").exit_code == 4
    assert [r["stdout"] for r in rt.logs(sb.id)["last_output"]] == ["hello-from-agent\n"]
    deadline = time.monotonic() + 10
    while any(s["id"] == sb.id for s in rt.list()) and time.monotonic() < deadline:
        time.sleep(0.05)
    kept = rt.logs(sb.id)
    assert kept["state"] == "expired" and kept["reason"] == "max_lifetime"
    assert kept["last_output"][-1]["stderr"] == "warn\n" and kept["last_output"][-1]["exit_code"] == 4
    assert kept["audit"][-1]["event"] == "destroy"
    assert [e["id"] for e in rt.expired()] == [sb.id]
    rt.forget_expired(sb.id)
    with pytest.raises(sandlet.NotFound):
        rt.logs(sb.id)
    assert rt.expired() == []
