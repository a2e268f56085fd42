"""Platform metrics from Python: rt.metrics() (Prometheus text), rt.metrics_json(), and the
prometheus_client collector (sandlet.prometheus) in a CollectorRegistry."""
from __future__ import annotations

import pytest

import sandlet


def test_metrics_text_and_json_count_labels_and_paused(rt: sandlet.Runtime, rootfs: str) -> None:
    a = rt.create(layers=[rootfs], labels={"job": "py"})
    b = rt.create(layers=[rootfs], labels={"job": "py"})
    try:
        assert a.exec("true").exit_code == 0
        b.pause()
        text = rt.metrics()
        assert "# TYPE sandlet_sandboxes gauge\n" in text
        assert 'sandlet_sandboxes_by_label{key="job",value="py",state="running"} 1\n' in text
        assert 'sandlet_sandboxes_by_label{key="job",value="py",state="paused"} 1\n' in text
        assert "\nsandlet_paused_sandboxes 1\n" in text
        fams = {f["name"]: f for f in rt.metrics_json()["families"]}
        assert fams["sandlet_scheduling_latency_seconds"]["type"] == "histogram"
        count = [s for s in fams["sandlet_scheduling_latency_seconds"]["samples"]
                 if s["name"] == "sandlet_scheduling_latency_seconds_count"]
        assert count[0]["value"] == 2
        assert fams["sandlet_execs_total"]["samples"][0]["value"] == 1
    finally:
        b.resume()
        a.close()
        b.close()


def test_prometheus_collector_in_a_registry(rt: sandlet.Runtime, rootfs: str) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from sandlet.prometheus import SandletCollector

    registry = prometheus_client.CollectorRegistry()
    registry.register(SandletCollector(rt))
    with rt.create(layers=[rootfs], labels={"job": "prom"}) as sb:
        assert sb.exec("true").exit_code == 0
        out = prometheus_client.generate_latest(registry).decode()
    assert "# TYPE sandlet_creates_total counter\n" in out
    assert 'sandlet_creates_total{result="ok"} 1.0\n' in out
    assert "# TYPE sandlet_scheduling_latency_seconds histogram\n" in out
    assert 'sandlet_scheduling_latency_seconds_bucket{le="+Inf"} 1.0\n' in out
    assert 'sandlet_sandboxes_by_label{key="job",state="running",value="prom"} 1.0\n' in out \
        or 'sandlet_sandboxes_by_label{key="job",value="prom",state="running"} 1.0\n' in out
    assert "sandlet_execs_total 1.0\n" in out


def test_admission_cpu_share_budget(rt: sandlet.Runtime, rootfs: str) -> None:
    rt.set_admission(max_cpus=1.0, timeout_s=0.3)
    try:
        a = rt.create(layers=[rootfs], limits={"cpus": 0.6})
        with pytest.raises(sandlet.Unavailable, match="cpu share"):
            rt.create(layers=[rootfs], limits={"cpus": 0.6})
        with pytest.raises(sandlet.InvalidArgument, match="'cpus'"):
            rt.create(layers=[rootfs], limits={"cpus": 2})
        small = rt.create(layers=[rootfs], limits={"cpus": 0.4})  # what is left fits
        in_use = [s for f in rt.metrics_json()["families"] if f["name"] == "sandlet_admission_in_use"
                  for s in f["samples"] if s["labels"]["resource"] == "cpu_millis"]
        assert in_use[0]["value"] == 1000
        small.destroy()
        a.destroy()
        rt.create(layers=[rootfs], limits={"cpus": 0.6}).destroy()  # room again after the destroys
        with pytest.raises(sandlet.InvalidArgument, match="max_cpus"):
            rt.set_admission(max_cpus=-1)
    finally:
        rt.set_admission()
