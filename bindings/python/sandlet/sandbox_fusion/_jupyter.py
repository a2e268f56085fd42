"""SandboxFusion's ``/run_jupyter``: notebook cells run in one python3 process of a sandbox of their own
(the "python" language's sandboxes), by jupyter_driver.py (which ``sandlet serve`` embeds too)."""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping

import sandlet

from ._runner import (OUTPUT_LIMIT, WORKDIR, RequestError, Runner, command_result, fetch_request_files,
                      parse_request_files, put_request_files)

DRIVER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jupyter_driver.py")
DRIVER_IN_SANDBOX = "/tmp/.sandlet-jupyter-driver.py"


@functools.lru_cache(maxsize=1)
def driver_source() -> bytes:
    with open(DRIVER_PATH, "rb") as f:
        return f.read()


@dataclass
class JupyterRequest:
    cells: List[str]
    cell_timeout: float = 0.0
    total_timeout: float = 45.0
    files: Dict[str, str] = field(default_factory=dict)
    fetch_files: List[str] = field(default_factory=list)

    @classmethod
    def parse(cls, doc: Any) -> "JupyterRequest":
        if not isinstance(doc, Mapping):
            raise RequestError("the body must be a JSON object")
        cells = doc.get("cells")
        if not isinstance(cells, list) or not all(isinstance(c, str) for c in cells):
            raise RequestError("field 'cells': required, a list of strings")
        kernel = doc.get("kernel", "python3")
        if kernel != "python3":
            raise RequestError(f"field 'kernel': only 'python3' is served, not {kernel!r}")
        req = cls(cells=list(cells))
        for name in ("cell_timeout", "total_timeout"):
            value = doc.get(name)
            if value is None:
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise RequestError(f"field '{name}': expected a number of seconds")
            setattr(req, name, float(value))
        if not 0 <= req.cell_timeout <= 3600:
            raise RequestError("field 'cell_timeout': must be in [0, 3600] seconds (0: none)")
        if not 0 < req.total_timeout <= 3600:
            raise RequestError("field 'total_timeout': must be in (0, 3600] seconds")
        req.files, req.fetch_files = parse_request_files(doc)
        return req


async def run_jupyter(runner: Runner, req: JupyterRequest) -> Dict[str, Any]:
    base = runner.specs.get("python")
    if base is None:
        raise RequestError("/run_jupyter runs python3 in the 'python' language's sandboxes, which are not served here")
    try:
        async with await runner.rt.create({**base, "network": "none"}) as sb:
            await put_request_files(sb, req.files)
            await sb.write_file(DRIVER_IN_SANDBOX, driver_source())
            stdin = json.dumps({"cells": req.cells, "cell_timeout": req.cell_timeout}).encode()
            r = await sb.exec(["python3", DRIVER_IN_SANDBOX], cwd=WORKDIR, stdin=stdin, timeout=req.total_timeout,
                              output_limit=OUTPUT_LIMIT)
            fetched = await fetch_request_files(sb, req.fetch_files)
    except sandlet.Error as e:
        return {"status": "SandboxError", "message": str(e), "driver": None, "cells": [], "files": {}}
    return answer_jupyter(command_result(r), r.stdout, fetched)


def checked_cell(cell: Any) -> Dict[str, Any]:
    """One cell of the driver's output with the fields and types the driver writes (TypeError otherwise)."""
    out = {"stdout": cell["stdout"], "stderr": cell["stderr"], "display": cell["display"], "error": cell["error"]}
    if not (isinstance(out["stdout"], str) and isinstance(out["stderr"], str) and isinstance(out["display"], list)
            and isinstance(out["error"], list)):
        raise TypeError("not a cell the driver writes")
    return out


def answer_jupyter(driver: Dict[str, Any], stdout: bytes, files: Dict[str, str]) -> Dict[str, Any]:
    """RunJupyterResponse from the driver's run: its cells when it finished (its stdout is their JSON; what the
    sandbox printed is hostile input, so anything else is a failed run)."""
    cells: List[Dict[str, Any]] = []
    finished = driver["status"] == "Finished" and driver["return_code"] == 0
    if finished:
        try:
            cells = [checked_cell(c) for c in json.loads(stdout)["cells"]]
        except (ValueError, KeyError, TypeError):
            finished = False
    message = "" if finished else ("the notebook ran past total_timeout" if driver["status"] == "TimeLimitExceeded"
                                   else "the notebook's driver did not finish (the cells ended its process?)")
    ok = finished and not any(c["error"] for c in cells)
    return {"status": "Success" if ok else "Failed", "message": message, "driver": {**driver, "stdout": ""},
            "cells": cells, "files": files, "executor_pod_name": None}
