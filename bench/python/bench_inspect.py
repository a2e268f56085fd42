#!/usr/bin/env python3
"""The Inspect provider's cost per tool call: `await env.exec(["true"])` through sandlet's provider, against
Inspect's own `local` provider (a plain host subprocess, no isolation — the floor any provider is measured
from) and the sandlet API underneath (the provider's own overhead), plus a sample's sandbox set-up
(sample_init + sample_cleanup) against the local provider's. Rounds alternate between the sides.

Run: PYTHONPATH=<build>/python python3 bench/python/bench_inspect.py --rootfs DIR [--iterations N]
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Awaitable, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_python import host_info, percentile  # noqa: E402

from inspect_ai.util._sandbox.local import LocalSandboxEnvironment  # noqa: E402

from sandlet.inspect import SandletSandboxConfig, SandletSandboxEnvironment  # noqa: E402
from sandlet.inspect import _environment  # noqa: E402


async def timed(fn: Callable[[], Awaitable[object]], n: int) -> List[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        await fn()
        out.append((time.perf_counter_ns() - t) / 1e6)
    return out


def stats(ms: List[float]) -> Dict[str, float]:
    s = sorted(ms)
    return {"p50_ms": round(percentile(s, 50), 4), "p99_ms": round(percentile(s, 99), 4), "n": len(s)}


async def run(rootfs: str, iterations: int, rounds: int) -> List[Dict[str, object]]:
    root = tempfile.mkdtemp(prefix="sandlet-bench-inspect.")
    cfg = SandletSandboxConfig(layers=[rootfs], root=root)
    try:
        envs = await SandletSandboxEnvironment.sample_init("bench", cfg, {})
        local_envs = await LocalSandboxEnvironment.sample_init("bench", None, {})
        env, local = envs["default"], local_envs["default"]
        assert isinstance(env, SandletSandboxEnvironment)
        sides: Dict[str, List[float]] = {"sandlet_provider": [], "sandlet_api": [], "inspect_local": []}
        calls = {"sandlet_provider": lambda: env.exec(["true"]),
                 "sandlet_api": lambda: env.sandbox.exec(["true"], keep_background=True),
                 "inspect_local": lambda: local.exec(["true"])}
        for fn in calls.values():
            await timed(fn, 20)  # warm
        for _ in range(rounds):
            for name, fn in calls.items():
                sides[name] += await timed(fn, iterations)
        await SandletSandboxEnvironment.sample_cleanup("bench", cfg, envs, False)
        await LocalSandboxEnvironment.sample_cleanup("bench", None, local_envs, False)

        async def sandlet_sample() -> None:
            e = await SandletSandboxEnvironment.sample_init("bench", cfg, {})
            await SandletSandboxEnvironment.sample_cleanup("bench", cfg, e, False)

        async def local_sample() -> None:
            e = await LocalSandboxEnvironment.sample_init("bench", None, {})
            await LocalSandboxEnvironment.sample_cleanup("bench", None, e, False)

        setup = {"sandlet_provider": [], "inspect_local": []}  # type: Dict[str, List[float]]
        for _ in range(rounds):
            setup["sandlet_provider"] += await timed(sandlet_sample, max(10, iterations // 10))
            setup["inspect_local"] += await timed(local_sample, max(10, iterations // 10))
        now = datetime.datetime.now(datetime.timezone.utc).isoformat()
        exec_stats = {k: stats(v) for k, v in sides.items()}
        setup_stats = {k: stats(v) for k, v in setup.items()}
        return [
            {"scenario": "inspect-exec", **exec_stats,
             "provider_overhead_ms": round(exec_stats["sandlet_provider"]["p50_ms"] - exec_stats["sandlet_api"]["p50_ms"], 4),
             "ratio_to_local": round(exec_stats["sandlet_provider"]["p50_ms"] / exec_stats["inspect_local"]["p50_ms"], 2),
             "host": host_info(), "date": now},
            {"scenario": "inspect-sample-setup", **setup_stats, "host": host_info(), "date": now},
        ]
    finally:
        _environment.close_runtimes()
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for line in asyncio.run(run(args.rootfs, args.iterations, args.rounds)):
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
