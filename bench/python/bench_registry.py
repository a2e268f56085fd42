#!/usr/bin/env python3
"""Registry pulls and builds that install packages (issue 35), against what a user would otherwise run, in one run.

Scenarios (one JSON object per line, the shape sandlet-bench prints):
  registry-pull   an image of --image-mb MB (several layers of incompressible data on the test rootfs, gzip) in a
                  local registry (Debian's docker-registry on loopback, test/support/registry_world.py):
                  sandlet's pull (`rt.image_pull`) into an empty store (cold), against `skopeo copy docker://...
                  oci:DIR` followed by today's import of that layout (`rt.layer_import`) into an empty store;
                  then a second pull into the warm store (nothing fetched), against skopeo copying again to
                  the same layout (it skips blobs it has) plus the import (every layer already in the store).
  build-installs  `sandlet build` of a recipe FROM a registry image whose RUN steps apt-get install and pip
                  install from mirrors behind a fake uplink (test/support/mirror_world.py), cold (no cache),
                  against the same build with a warm cache.

Run: PYTHONPATH=<build>/python python3 bench/python/bench_registry.py --rootfs DIR [--debian DIR]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List

import sandlet

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "test", "support"))
sys.path.insert(0, HERE)
from bench_python import host_info, percentile  # noqa: E402
from registry_world import Registry, run_skopeo, write_oci_layout  # noqa: E402


def summary(samples: List[float]) -> Dict[str, float]:
    s = sorted(samples)
    return {"median_s": round(percentile(s, 50), 3), "p99_s": round(percentile(s, 99), 3),
            "min_s": round(s[0], 3), "samples": len(s)}


def timed(fn: Callable[[], object]) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def big_layers(dir: str, image_mb: int, layers: int) -> List[str]:
    """Layer directories of incompressible files (gzip cannot shrink them: the bytes moved are the image's)."""
    out = []
    per = image_mb * (1 << 20) // layers
    for i in range(layers):
        d = os.path.join(dir, f"layer{i}", "data", f"l{i}")
        os.makedirs(d)
        left, n = per, 0
        while left > 0:
            size = min(left, 8 << 20)
            with open(os.path.join(d, f"f{n:04d}.bin"), "wb") as f:
                f.write(os.urandom(size))
            left -= size
            n += 1
        out.append(os.path.join(dir, f"layer{i}"))
    return out


def bench_pull(args: argparse.Namespace, work: str) -> Dict[str, object]:
    layouts = os.path.join(work, "layout")
    image = write_oci_layout(layouts, [args.rootfs] + big_layers(os.path.join(work, "src"), args.image_mb, 4))
    with Registry.mode("http", max_lifetime=3600) as reg:
        reg.push(image, "bench/big", "1")
        ref = reg.ref("bench/big", "1")
        cfg = json.dumps({"insecure": [reg.host]})
        cold, warm, peer_cold, peer_warm, fetched_warm = [], [], [], [], []
        for i in range(args.iterations):
            root = os.path.join(work, f"root-{i}")
            with sandlet.Runtime(root, registries=cfg, warm_pool=False) as rt:
                cold.append(timed(lambda: rt.image_pull(f"docker://{ref}")))
                t0 = time.monotonic()
                r = rt.image_pull(f"docker://{ref}")
                warm.append(time.monotonic() - t0)
                fetched_warm.append(r["bytes_fetched"])
            shutil.rmtree(root)
            peer_root, oci = os.path.join(work, f"peer-{i}"), os.path.join(work, f"oci-{i}")

            def skopeo_then_import() -> None:
                run_skopeo(f"docker://{ref}", f"oci:{oci}:1", ["--src-tls-verify=false"], timeout=1800)
                with sandlet.Runtime(peer_root, warm_pool=False) as prt:
                    prt.layer_import(oci, name="big")
            peer_cold.append(timed(skopeo_then_import))
            peer_warm.append(timed(skopeo_then_import))
            shutil.rmtree(peer_root)
            shutil.rmtree(oci)
    c, pc, w, pw = summary(cold), summary(peer_cold), summary(warm), summary(peer_warm)
    return {"scenario": "registry-pull", "image_mb": args.image_mb, "iterations": args.iterations,
            "cold": c, "peer_cold_skopeo_plus_import": pc, "ratio_cold": round(c["median_s"] / pc["median_s"], 3),
            "warm": w, "peer_warm_skopeo_plus_import": pw, "ratio_warm": round(w["median_s"] / pw["median_s"], 3),
            "warm_bytes_fetched": max(fetched_warm)}


def bench_build(args: argparse.Namespace, work: str) -> Dict[str, object]:
    import mirror_world
    from python_image import python_image_layer  # the same "python" image the Harbor test makes
    layouts = os.path.join(work, "py-layout")
    cold, warm = [], []
    with mirror_world.MirrorWorld(max_lifetime=3600) as mirrors, Registry.mode("http", max_lifetime=3600) as reg:
        reg.push(write_oci_layout(layouts, [args.debian, python_image_layer(mirrors)]), "bench/python", "1")
        ctx = os.path.join(work, "ctx")
        os.makedirs(ctx)
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write(f"FROM {reg.ref('bench/python', '1')}\n"
                    "RUN apt-get update && apt-get install -y --no-install-recommends sandlet-hello-extra\n"
                    "RUN pip install sandlet-hello==1.0\n")
        os.environ["SANDLET_NET_UPLINK_NETNS"] = mirrors.uplink_netns
        net = {"allow": [{"cidr": f"{mirrors.address}/32", "ports": 80, "protocol": "tcp"}]}
        try:
            for i in range(args.iterations):
                root = os.path.join(work, f"build-root-{i}")
                with sandlet.Runtime(root, registries=json.dumps({"insecure": [reg.host]})) as rt:
                    rt.image_pull(reg.ref("bench/python", "1"))  # the pull is the other scenario's
                    cold.append(timed(lambda: rt.build(os.path.join(ctx, "Dockerfile"), ctx, tag="app", network=net)))
                    warm.append(timed(lambda: rt.build(os.path.join(ctx, "Dockerfile"), ctx, tag="app", network=net)))
                    rt.gc()
                shutil.rmtree(root)
        finally:
            os.environ.pop("SANDLET_NET_UPLINK_NETNS", None)
    c, w = summary(cold), summary(warm)
    return {"scenario": "build-installs", "iterations": args.iterations, "cold": c, "warm_cache": w,
            "ratio_warm_to_cold": round(w["median_s"] / c["median_s"], 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--debian", default="", help="a Debian rootfs with apt and python3 (scripts/debian-base.sh)")
    ap.add_argument("--image-mb", type=int, default=512)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--scenario", choices=["all", "registry-pull", "build-installs"], default="all")
    args = ap.parse_args()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    work = tempfile.mkdtemp(prefix="sandlet-bench-registry.", dir="/var/tmp")
    try:
        if args.scenario in ("all", "registry-pull"):
            print(json.dumps({**bench_pull(args, work), "date": date, "host": host_info()}), flush=True)
        if args.scenario in ("all", "build-installs") and args.debian:
            print(json.dumps({**bench_build(args, work), "date": date, "host": host_info()}), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
