"""The "python" base image the registry tests and benchmarks push (issue 35): what it adds to the Debian base —
pip (the test venv's own, a pure-Python package), and apt and pip pointed at the mirrors of mirror_world.py, as
a company's images point at its own mirrors."""
from __future__ import annotations

import glob
import os
from typing import Dict, Union

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pip is pure Python: the test venv's copy (any 3.x) runs on the image's python3.
PIP_SRC = next(iter(sorted(glob.glob(os.path.join(os.environ.get("SANDLET_VENV") or os.path.join(REPO, ".venv"),
                                                  "lib", "python3*", "site-packages", "pip")))), "")


def python_image_layer(world) -> Dict[str, Union[str, bytes]]:
    """What a "python" base image adds to Debian: pip, and apt / pip configured for the mirrors (as a company's
    images point at its own mirrors)."""
    files = {
        "etc/apt/sources.list": world.apt_source + "\n",
        "etc/pip.conf": f"[global]\nindex-url = {world.pip_index_url}\ntrusted-host = {world.address}\n"
                        "break-system-packages = true\n",
        "usr/local/bin/pip": "#!/bin/sh\nexec python3 -m pip \"$@\"\n",
    }
    for dirpath, _, names in os.walk(PIP_SRC):
        for n in names:
            if n.endswith(".pyc"):
                continue
            src = os.path.join(dirpath, n)
            rel = os.path.relpath(src, os.path.dirname(PIP_SRC))
            with open(src, "rb") as f:
                files[os.path.join("usr/lib/python3/dist-packages", rel)] = f.read()
    return files
