"""sandlet quickstart, in Python (the synchronous API; the same steps as examples/quickstart.c): create a
sandbox from one layer directory, put a script in it, run it, read a file it wrote, destroy the sandbox.

    PYTHONPATH=<build>/python python3 examples/python/quickstart.py [STATE_ROOT [LAYER_DIR]]

STATE_ROOT defaults to $SANDLET_ROOT, else /var/lib/sandlet ("" or "-" also mean the default).
LAYER_DIR defaults to $SANDLET_EXAMPLE_ROOTFS: a root filesystem directory with /bin/sh (busybox will do),
or the name/digest of a layer in the runtime's store. Needs root.
"""
from __future__ import annotations

import argparse
import os
import sys

import sandlet

SCRIPT = (
    'echo "hello from $(hostname), running as uid $(id -u)"\n'
    "echo 'written inside the sandbox' > /work/answer.txt\n"
    "exit 0\n"
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", nargs="?", default=None, metavar="STATE_ROOT",
                   help="runtime state directory (default: $SANDLET_ROOT, else /var/lib/sandlet)")
    p.add_argument("layer", nargs="?", default=os.environ.get("SANDLET_EXAMPLE_ROOTFS"), metavar="LAYER_DIR",
                   help="root filesystem with /bin/sh (default: $SANDLET_EXAMPLE_ROOTFS)")
    args = p.parse_args()
    if args.root in ("", "-"):
        args.root = None
    if not args.layer:
        p.error("no LAYER_DIR given and $SANDLET_EXAMPLE_ROOTFS is not set")
    if args.layer.startswith(("/", ".")):  # a host directory (else a store layer's name or digest)
        args.layer = os.path.abspath(args.layer)
    return args


def run(root: str | None, layer: str) -> int:
    # 1. The runtime: one per process; it owns the state directory and an event-loop thread.
    with sandlet.Runtime(root) as rt:
        print(f"runtime at {rt.root}, sandlet {sandlet.__version__}")

        # 2+3. The spec (one read-only layer, a label, a memory limit) and the sandbox; owned by default:
        # it dies with this runtime or this process. Every field is validated; errors name the field.
        sb = rt.create(layers=[layer], labels={"example": "quickstart"}, limits={"memory": 256 << 20})
        with sb:
            print(f"created sandbox {sb.id}")

            # 4. Put a script in it; missing parent directories are created.
            sb.write_file("/work/hello.sh", SCRIPT, mode=0o755)

            # 5. Run it and wait; output is collected in the result (up to 16 MiB per stream by default).
            result = sb.exec(["sh", "/work/hello.sh"], timeout=30)
            out = result.stdout_text
            print(f"stdout: {out}", end="" if out.endswith("\n") else "\n")
            print(f"exit code: {result.exit_code} (signal {result.signal}, timed out: {int(result.timed_out)})")

            # 6. Read back the file the script wrote.
            answer = sb.read_file("/work/answer.txt").decode()
            print(f"/work/answer.txt: {answer}", end="")

            # 7. Destroy it explicitly (closing the last handle of an owned sandbox would too).
            sb.destroy()
            print("destroyed")
    return 0 if result.ok else 1


def main() -> int:
    args = parse_args()
    try:
        return run(args.root, args.layer)
    except sandlet.Error as e:  # e.g. NOT_FOUND: the layer directory does not exist
        print(f"quickstart: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
