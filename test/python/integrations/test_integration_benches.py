"""The integration benchmarks keep working (bench/python/bench_inspect.py, bench_sandbox_fusion.py): a smoke run
each on the Debian base; no timing is asserted."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import sandlet

from .conftest import REPO


def run_bench(script: str, *args: str) -> list:
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(sandlet.__file__))))
    out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "python", script), *args], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_bench_inspect_smoke(debian_base: str) -> None:
    pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (scripts/setup.sh installs it)")
    rows = {r["scenario"]: r for r in run_bench("bench_inspect.py", "--rootfs", debian_base, "--iterations", "20",
                                                  "--rounds", "1")}
    assert set(rows) == {"inspect-exec", "inspect-sample-setup"}
    assert rows["inspect-exec"]["sandlet_provider"]["n"] == 20 and rows["inspect-exec"]["inspect_local"]["p50_ms"] > 0


def test_bench_sandbox_fusion_smoke(debian_base: str) -> None:
    rows = run_bench("bench_sandbox_fusion.py", "--rootfs", debian_base, "--calls", "10", "--rounds", "1",
                     "--concurrency", "2")
    assert len(rows) == 1 and rows[0]["calls"] == 10
    assert rows[0]["sandlet_fncall_pool"]["calls_per_s"] > 0 and rows[0]["peer_fresh_sandbox_per_call"]["calls_per_s"] > 0
