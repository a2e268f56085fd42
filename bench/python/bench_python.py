#!/usr/bin/env python3
"""Python binding overhead, measured against the C ABI in the same process and the same sandboxes.

Scenarios (one JSON object per line, the shape sandlet-bench prints):
  python-exec   synchronous `Sandbox.exec(["true"])` from Python vs `sandlet_sandbox_exec` called from C++
                in this process (sandlet._sandlet._bench): the difference of the medians is what Python adds
                per exec. Rounds alternate between the sides so that machine noise hits both alike.
  python-async  N concurrent `await sandbox.exec(["true"])` on one asyncio loop vs N concurrent
                `sandlet_sandbox_exec_async` with a C callback, over the same sandboxes: throughput.

Run: make bench-python   (or PYTHONPATH=<build>/python python3 bench/python/bench_python.py --rootfs DIR)
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Sequence

import sandlet
from sandlet import _sandlet


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (as bench/stats.cpp)."""
    if not sorted_values:
        return 0.0
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summary_ms(samples_ns: Sequence[int]) -> Dict[str, object]:
    ms = sorted(s / 1e6 for s in samples_ns)
    return {
        "p50_ms": round(percentile(ms, 50), 4), "p90_ms": round(percentile(ms, 90), 4),
        "p99_ms": round(percentile(ms, 99), 4), "mean_ms": round(statistics.fmean(ms), 4),
        "min_ms": round(ms[0], 4), "max_ms": round(ms[-1], 4),
        "cdf_ms": [round(percentile(ms, q), 4) for q in range(101)],
    }


def host_info() -> Dict[str, object]:
    return {"nproc": os.cpu_count(), "kernel": platform.release(), "machine": platform.machine(),
            "python": platform.python_version(), "sandlet_version": sandlet.__version__}


def bench_sync(sb: sandlet.Sandbox, iterations: int, rounds: int) -> Dict[str, object]:
    argv = ["true"]
    for _ in range(50):  # warm both paths
        sb.exec(argv)
    _sandlet._bench.exec_sync_c(sb._h, argv, 50)
    py: List[int] = []
    raw: List[int] = []
    c: List[int] = []
    per_round = max(1, iterations // rounds)
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for _ in range(per_round):
            t0 = clock()
            sb.exec(argv)
            py.append(clock() - t0)
        for _ in range(per_round):  # the extension without the Python wrapper: where the overhead lives
            t0 = clock()
            sb._h.exec(argv)
            raw.append(clock() - t0)
        c.extend(_sandlet._bench.exec_sync_c(sb._h, argv, per_round))
    ours, peer, ext = summary_ms(py), summary_ms(c), summary_ms(raw)
    overhead_us = (float(ours["p50_ms"]) - float(peer["p50_ms"])) * 1000
    return {
        "scenario": "python-exec", "iterations": len(py), "concurrency": 1, "rounds": rounds, **ours,
        "throughput_per_s": round(len(py) / (sum(py) / 1e9), 1),
        "peer": {"name": "c-api", "command": "sandlet_sandbox_exec(argv={true}) from C++ in the same process",
                 **peer, "throughput_per_s": round(len(c) / (sum(c) / 1e9), 1)},
        "extension_only": ext,
        "ratio_vs_peer": round(float(ours["p50_ms"]) / float(peer["p50_ms"]), 4),
        "overhead_us_p50": round(overhead_us, 2),
        "extension_overhead_us_p50": round((float(ext["p50_ms"]) - float(peer["p50_ms"])) * 1000, 2),
        "target_overhead_us": 20,
    }


async def gather_execs(sandboxes: Sequence[sandlet.AsyncSandbox], total: int) -> float:
    t0 = time.perf_counter()
    results = await asyncio.gather(*[sandboxes[i % len(sandboxes)].exec(["true"]) for i in range(total)])
    elapsed = time.perf_counter() - t0
    assert all(r.ok for r in results)
    return elapsed


def bench_async(rt: sandlet.AsyncRuntime, layers: List[str], sandboxes: int, total: int,
                rounds: int) -> Dict[str, object]:
    async def main() -> Dict[str, object]:
        boxes = await asyncio.gather(*[rt.create(layers=layers) for _ in range(sandboxes)])
        handles = [b._h for b in boxes]
        await gather_execs(boxes, min(total, 200))  # warm
        py_s: List[float] = []
        c_s: List[float] = []
        for _ in range(rounds):
            py_s.append(await gather_execs(boxes, total))
            c_s.append(await asyncio.to_thread(_sandlet._bench.exec_async_c, handles, ["true"], total, total))
        for b in boxes:
            b.close()
        py_rate = total / statistics.median(py_s)
        c_rate = total / statistics.median(c_s)
        return {
            "scenario": "python-async", "iterations": total, "concurrency": total, "sandboxes": sandboxes,
            "rounds": rounds,
            "p50_ms": round(statistics.median(py_s) * 1000, 3), "min_ms": round(min(py_s) * 1000, 3),
            "max_ms": round(max(py_s) * 1000, 3), "throughput_per_s": round(py_rate, 1),
            "peer": {"name": "c-api-async",
                     "command": f"{total} x sandlet_sandbox_exec_async(argv={{true}}) in flight, C callbacks",
                     "p50_ms": round(statistics.median(c_s) * 1000, 3), "min_ms": round(min(c_s) * 1000, 3),
                     "max_ms": round(max(c_s) * 1000, 3), "throughput_per_s": round(c_rate, 1)},
            "ratio_vs_peer": round(statistics.median(py_s) / statistics.median(c_s), 4),
            "throughput_ratio_vs_peer": round(py_rate / c_rate, 4),
            "note": "p50/min/max_ms: wall time for all the execs of one round to complete",
        }

    return asyncio.run(main())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rootfs", required=True, help="a root filesystem directory for the sandboxes")
    ap.add_argument("--iterations", type=int, default=5000, help="synchronous execs per side (default 5000)")
    ap.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    ap.add_argument("--async-total", type=int, default=1000, help="concurrent execs per async round (1000)")
    ap.add_argument("--async-rounds", type=int, default=7, help="async rounds per side (default 7)")
    ap.add_argument("--sandboxes", type=int, default=16, help="sandboxes the async execs spread over (16)")
    ap.add_argument("--scenario", choices=["all", "python-exec", "python-async"], default="all")
    args = ap.parse_args()
    if not os.path.isdir(args.rootfs):
        print(f"bench_python: --rootfs {args.rootfs}: not a directory", file=sys.stderr)
        return 2

    root = tempfile.mkdtemp(prefix="sandlet-bench-py.")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        if args.scenario in ("all", "python-exec"):
            with sandlet.Runtime(root) as rt, rt.create(layers=[args.rootfs]) as sb:
                out = bench_sync(sb, args.iterations, args.rounds)
            print(json.dumps({**out, "date": date, "host": host_info()}), flush=True)
        if args.scenario in ("all", "python-async"):
            rt = sandlet.AsyncRuntime(root)
            try:
                out = bench_async(rt, [args.rootfs], args.sandboxes, args.async_total, args.async_rounds)
            finally:
                rt.close()
            print(json.dumps({**out, "date": date, "host": host_info()}), flush=True)
    finally:
        with sandlet.Runtime(root) as rt:
            rt.gc()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
