"""The audit log from Python: rt.audit_path and the rt.audit() iterator (filters, following)."""
from __future__ import annotations

import os
import threading
import time

import pytest

import sandlet


def test_audit_path_and_records(rt: sandlet.Runtime, rootfs: str) -> None:
    assert rt.audit_path == os.path.join(rt.root, "audit", "audit.jsonl")
    with rt.create(layers=[rootfs], labels={"task": "py-a"}) as a, rt.create(layers=[rootfs], labels={"task": "py-b"}) as b:
        r = a.exec("printf 1234; exit 2")
        assert r.exit_code == 2
        b.exec("true")
        mine = list(rt.audit(sandbox=a.id))
        assert [m["event"] for m in mine][:2] == ["create", "running"]
        execs = [m for m in mine if m["event"] == "exec"]
        assert len(execs) == 1
        assert execs[0]["exit_code"] == 2 and execs[0]["stdout_bytes"] == 4
        assert execs[0]["labels"] == {"task": "py-a"}
        by_label = list(rt.audit(labels={"task": "py-b"}))
        assert by_label and all(x["sandbox"] == b.id for x in by_label)
        assert list(rt.audit(since=time.time() + 3600)) == []
        a_id = a.id
    ends = [m for m in rt.audit(sandbox=a_id) if m["event"] == "destroy"]
    assert len(ends) == 1 and ends[0]["reason"] == "explicit"
    assert rt.stats()["audit"]["failed"] == 0


def test_audit_follow_sees_a_new_record_then_stops(rt: sandlet.Runtime, rootfs: str) -> None:
    with rt.create(layers=[rootfs], labels={"task": "py-follow"}) as sb:
        seen: list = []

        def follow() -> None:
            for rec in rt.audit(labels={"task": "py-follow"}, follow=True, timeout=5):
                seen.append(rec)
                if rec["event"] == "exec":
                    return

        t = threading.Thread(target=follow)
        t.start()
        time.sleep(0.3)
        sb.exec("echo followed")
        t.join(10)
        assert not t.is_alive()
        assert any(r["event"] == "exec" and r["argv"][-1] == "echo followed" for r in seen)


def test_audit_options_are_checked(root_dir: str) -> None:
    with pytest.raises(sandlet.InvalidArgument, match="audit_max_bytes"):
        sandlet.Runtime(root_dir, audit_max_bytes=10)
    with sandlet.Runtime(root_dir, audit_max_bytes=1 << 20, audit_keep=2) as rt:
        assert rt.audit_path.endswith("audit.jsonl")
