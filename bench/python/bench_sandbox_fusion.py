#!/usr/bin/env python3
"""The SandboxFusion-compatible service's throughput: calls/s and latency of `POST /run_code` (Python code,
`print(sum(range(1000)))`) through the service's FnCall pool, against the same service giving every call a
fresh sandbox (`--no-pool`: create, exec, destroy — what a container per call costs), side by side.

Both services run as their own processes on loopback, on the same root filesystem; clients are threads
with one keep-alive connection each. Rounds alternate between the sides so that machine noise hits both.
One JSON object per line (the shape sandlet-bench prints).

Run: PYTHONPATH=<build>/python python3 bench/python/bench_sandbox_fusion.py --rootfs DIR [--calls N]
     [--concurrency 1,8] [--rounds 3] [--server python|PATH-OF-SANDLET-CLI]
"""
from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_python import host_info, percentile  # noqa: E402

import sandlet  # noqa: E402

BODY = json.dumps({"code": "print(sum(range(1000)))", "language": "python", "run_timeout": 10}).encode()


def start(root: str, rootfs: str, pooled: bool, server: str) -> Tuple[subprocess.Popen, int]:
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(sandlet.__file__))))
    if server == "python":
        cmd = [sys.executable, "-m", "sandlet.sandbox_fusion", "--root", root]
    else:  # the CLI's `sandlet serve --sandbox-fusion`, given as the path of the sandlet binary
        cmd = [server, "--root", root, "serve", "--sandbox-fusion"]
    cmd += ["--listen", "127.0.0.1:0", "--language", f"python={rootfs}"] + ([] if pooled else ["--no-pool"])
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    if not line.startswith("listening on "):
        p.kill()
        raise SystemExit(f"the service did not start: {line!r}")
    return p, int(line.rsplit(":", 1)[1])


def load(port: int, calls: int, concurrency: int) -> Tuple[List[float], float]:
    """`calls` requests from `concurrency` threads; the latencies (ms) and the wall time (s)."""
    latencies: List[float] = []
    lock = threading.Lock()
    left = [calls]

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                if left[0] == 0:
                    break
                left[0] -= 1
            t = time.perf_counter_ns()
            conn.request("POST", "/run_code", BODY, {"Content-Type": "application/json"})
            r = json.loads(conn.getresponse().read())
            ms = (time.perf_counter_ns() - t) / 1e6
            if r.get("status") != "Success" or r["run_result"]["stdout"] != "499500\n":
                raise SystemExit(f"a call failed: {r}")
            with lock:
                latencies.append(ms)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, time.perf_counter() - t0


def summary(latencies: Sequence[float], wall: float) -> Dict[str, float]:
    ms = sorted(latencies)
    return {"calls_per_s": round(len(ms) / wall, 2), "p50_ms": round(percentile(ms, 50), 3),
            "p99_ms": round(percentile(ms, 99), 3), "max_ms": round(ms[-1], 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rootfs", required=True, help="a root filesystem with python3 (scripts/debian-base.sh)")
    ap.add_argument("--calls", type=int, default=200, help="calls per side per round")
    ap.add_argument("--concurrency", default="1,8", help="comma-separated client counts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server", default="python",
                    help="'python' (python -m sandlet.sandbox_fusion) or the path of a sandlet CLI (sandlet serve)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="sandlet-bench-fusion.")
    procs = []
    try:
        pooled, pooled_port = start(os.path.join(root, "pooled"), args.rootfs, True, args.server)
        fresh, fresh_port = start(os.path.join(root, "fresh"), args.rootfs, False, args.server)
        procs = [pooled, fresh]
        for port in (pooled_port, fresh_port):
            load(port, 16, 4)  # warm: pools filled, page cache hot
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            sides: Dict[str, Tuple[List[float], float]] = {"pool": ([], 0.0), "fresh": ([], 0.0)}
            for _ in range(args.rounds):
                for name, port in (("pool", pooled_port), ("fresh", fresh_port)):
                    lat, wall = load(port, args.calls, concurrency)
                    sides[name] = (sides[name][0] + lat, sides[name][1] + wall)
            pool, peer = summary(*sides["pool"]), summary(*sides["fresh"])
            print(json.dumps({
                "scenario": "sandbox-fusion", "server": "python" if args.server == "python" else "cli",
                "concurrency": concurrency, "calls": args.calls * args.rounds,
                "sandlet_fncall_pool": pool, "peer_fresh_sandbox_per_call": peer,
                "throughput_ratio": round(pool["calls_per_s"] / peer["calls_per_s"], 2),
                "p50_ratio": round(peer["p50_ms"] / pool["p50_ms"], 2),
                "host": host_info(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            }), flush=True)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
