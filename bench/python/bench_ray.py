#!/usr/bin/env python3
"""sandlet.ray's costs on a local Ray cluster (Ray's cluster utilities, loopback, each node its own runtime root):

- exec: `sb.exec(["true"])` through the cluster (driver -> node actor -> sandbox) against the in-process API on
  a sandbox of the same node's kind (rounds alternate between the sides): the Ray hop's overhead per exec;
- create: throughput of `cluster.create` from 8 driver threads with 1, 2 and 4 simulated nodes (the machine's
  two cores are shared by every node: this shows the client's and the actors' overhead, not scale-out).

Prints one JSON object per line. Run: PYTHONPATH=<build>/python python3 bench/python/bench_ray.py --rootfs DIR
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Dict, List

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback only
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_python import host_info, percentile  # noqa: E402

import ray  # noqa: E402
from ray.cluster_utils import Cluster as RayCluster  # noqa: E402

import sandlet  # noqa: E402
import sandlet.ray as sray  # noqa: E402


def stats(ms: List[float]) -> Dict[str, float]:
    s = sorted(ms)
    return {"p50_ms": round(percentile(s, 50), 4), "p99_ms": round(percentile(s, 99), 4), "n": len(s)}


class LocalCluster:
    def __init__(self, nodes: int) -> None:
        self.base = tempfile.mkdtemp(prefix="sandlet-bray-")
        os.environ["RAY_TMPDIR"] = self.base
        common = {"node_ip_address": "127.0.0.1", "temp_dir": os.path.join(self.base, "ray")}
        system = {"kill_child_processes_on_worker_exit": False,
                  "kill_child_processes_on_worker_exit_with_raylet_subreaper": False}
        self.ray = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": system, **common})
        self.roots = [os.path.join(self.base, f"node{i}") for i in range(nodes)]
        for root in self.roots:
            self.ray.add_node(num_cpus=1, resources={"sandlet": 256}, env_vars={"SANDLET_ROOT": root}, **common)
        ray.init(address=self.ray.address, log_to_driver=False)

    def close(self) -> None:
        try:
            cluster = sray.Cluster()
            for sb in cluster.list():
                sb.destroy()
            cluster.shutdown_nodes()
        finally:
            ray.shutdown()
            self.ray.shutdown()
            for root in self.roots:
                if os.path.isdir(root):
                    with sandlet.Runtime(root, warm_pool=False) as rt:
                        rt.gc()
            shutil.rmtree(self.base, ignore_errors=True)


def bench_exec(rootfs: str, iterations: int, rounds: int) -> Dict[str, object]:
    c = LocalCluster(1)
    local_root = tempfile.mkdtemp(prefix="sandlet-bray-local-")
    try:
        cluster = sray.Cluster()
        remote = cluster.create(layers=[rootfs])
        with sandlet.Runtime(local_root) as rt, rt.create(layers=[rootfs]) as local:
            sides: Dict[str, List[float]] = {"ray": [], "in_process": []}
            calls = {"ray": lambda: remote.exec(["true"]), "in_process": lambda: local.exec(["true"])}
            for fn in calls.values():
                for _ in range(20):
                    fn()  # warm
            for _ in range(rounds):
                for name, fn in calls.items():
                    for _ in range(iterations // rounds):
                        t = time.perf_counter_ns()
                        fn()
                        sides[name].append((time.perf_counter_ns() - t) / 1e6)
        ray_s, local_s = stats(sides["ray"]), stats(sides["in_process"])
        return {"scenario": "ray-exec", "through_ray": ray_s, "in_process": local_s,
                "hop_overhead_p50_ms": round(ray_s["p50_ms"] - local_s["p50_ms"], 4),
                "ratio_p50": round(ray_s["p50_ms"] / local_s["p50_ms"], 3)}
    finally:
        c.close()
        shutil.rmtree(local_root, ignore_errors=True)


def bench_create(rootfs: str, nodes: int, creates: int) -> Dict[str, object]:
    c = LocalCluster(nodes)
    try:
        cluster = sray.Cluster()
        cluster.create(layers=[rootfs], limits={"memory": "64M"}).destroy()  # each node's layer mounted once before the clock starts
        latencies: List[float] = []

        def one(_: int) -> None:
            t = time.perf_counter_ns()
            cluster.create(layers=[rootfs], labels={"bench": "create"}, limits={"memory": "64M"})
            latencies.append((time.perf_counter_ns() - t) / 1e6)

        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(one, range(creates)))
        wall = time.perf_counter() - t0
        spread = sorted(n.count for n in cluster.nodes())
        cluster.destroy({"bench": "create"})
        return {"scenario": "ray-create", "nodes": nodes, "creates": creates, "threads": 8,
                "creates_per_s": round(creates / wall, 1), "latency": stats(latencies), "per_node": spread}
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--iterations", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--creates", type=int, default=64)
    ap.add_argument("--nodes", default="1,2,4")
    a = ap.parse_args()
    common = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "host": host_info(),
              "ray_version": ray.__version__}
    print(json.dumps({**bench_exec(a.rootfs, a.iterations, a.rounds), **common}), flush=True)
    for n in (int(x) for x in a.nodes.split(",")):
        print(json.dumps({**bench_create(a.rootfs, n, a.creates), **common}), flush=True)


if __name__ == "__main__":
    main()
