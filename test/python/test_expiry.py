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
