"""``python -m sandlet.sandbox_fusion`` (also the ``sandlet-sandbox-fusion`` command): serves the SandboxFusion
API until SIGINT/SIGTERM; prints ``listening on HOST:PORT`` once it accepts connections."""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import Dict, List, Optional

import sandlet

from . import LANGUAGES, Service


def spec_of(source: str, memory: Optional[str]) -> Dict[str, object]:
    """A language's sandboxes: a directory is a layer, anything else an environment name, unless it names a
    store layer (``layer:NAME``)."""
    spec: Dict[str, object]
    if source.startswith("layer:"):
        spec = {"layers": [source[len("layer:"):]]}
    elif source.startswith("/"):
        spec = {"layers": [source]}
    else:
        spec = {"environment": source}
    if memory:
        spec["limits"] = {"memory": memory}
    return spec


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="sandlet-sandbox-fusion", description=__doc__)
    ap.add_argument("--listen", default="127.0.0.1:8080", help="HOST:PORT (default 127.0.0.1:8080; port 0 = any)")
    ap.add_argument("--root", default=os.environ.get("SANDLET_ROOT"), help="runtime root (default $SANDLET_ROOT)")
    ap.add_argument("--language", action="append", default=[], metavar="LANG=ENV",
                    help=f"serve LANG ({', '.join(sorted(LANGUAGES))}) from ENV: an environment name, "
                         "layer:NAME (a store layer) or /a/directory; repeatable")
    ap.add_argument("--memory", default="1G", help="default memory limit of a sandbox (default 1G)")
    ap.add_argument("--pool-size", type=int, default=8, help="FnCall containers per language at most (default 8)")
    ap.add_argument("--no-pool", action="store_true",
                    help="a fresh sandbox for every request, also for interpreted code (the benchmark's peer)")
    args = ap.parse_args(argv)
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        ap.error(f"--listen {args.listen!r}: expected HOST:PORT")
    languages = {}
    for item in args.language:
        lang, sep, source = item.partition("=")
        if not sep or not source:
            ap.error(f"--language {item!r}: expected LANG=ENV")
        languages[lang] = spec_of(source, args.memory)
    if not languages:
        ap.error("give at least one --language LANG=ENV")
    if args.pool_size < 1:
        ap.error("--pool-size must be at least 1")
    return asyncio.run(_serve(args.root, languages, host, int(port), args.pool_size, not args.no_pool))


async def _serve(root: Optional[str], languages: Dict[str, Dict[str, object]], host: str, port: int,
                 pool_size: int, pooled: bool) -> int:
    async with await sandlet.AsyncRuntime.open(root) as rt:
        try:
            service = Service(rt, languages, pool_size=pool_size, pooled=pooled)
        except ValueError as e:
            print(f"sandlet-sandbox-fusion: {e}", file=sys.stderr)
            return 2
        bound = await service.start(host, port)
        print(f"listening on {bound[0]}:{bound[1]}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await service.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
