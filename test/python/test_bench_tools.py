"""The Python benchmark and the plot script keep working (a smoke run each; no timing is asserted)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO, python_env


def test_bench_python_smoke(rootfs: str) -> None:
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "bench", "python", "bench_python.py"), "--rootfs", rootfs,
         "--iterations", "100", "--rounds", "2", "--async-total", "50", "--async-rounds", "1", "--sandboxes", "2"],
        env=python_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    results = {r["scenario"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert set(results) == {"python-exec", "python-async"}
    sync = results["python-exec"]
    assert sync["iterations"] == 100 and len(sync["cdf_ms"]) == 101 and sync["peer"]["name"] == "c-api"
    assert "overhead_us_p50" in sync and sync["p50_ms"] > 0
    assert results["python-async"]["throughput_per_s"] > 0 and results["python-async"]["peer"]["throughput_per_s"] > 0


def test_plot_renders_recorded_results(tmp_path) -> None:
    results = os.path.join(REPO, "bench", "results")
    inputs = [os.path.join(results, d, f) for d in ("2026-11-29-cdf", "2026-11-29-py")
              for f in sorted(os.listdir(os.path.join(results, d)))]
    inputs += [os.path.join(results, "2026-11-29-oneshot", f)
               for f in ("lifecycle-cli-idle200.json", "lifecycle-cold-idle200.json")]
    out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "plot.py"), "--out", str(tmp_path), *inputs],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    written = set(os.listdir(tmp_path))
    assert {"summary.png", "lifecycle.png", "exec.png", "python-exec.png", "lifecycle-cli-idle-200ms.png",
            "lifecycle-no-warm-pool-idle-200ms.png"} <= written, written
    assert all(os.path.getsize(tmp_path / name) > 10_000 for name in written)
    bad = tmp_path / "garbled.json"
    bad.write_text("{not json")
    out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "plot.py"), "--out", str(tmp_path), str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "garbled.json" in out.stderr
