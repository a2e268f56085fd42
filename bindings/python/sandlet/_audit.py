"""Reading the root's audit log (docs/AUDIT.md): the records as dicts, optionally following the log."""
import json
import time
from typing import Any, Dict, Iterator, Mapping, Optional

from . import _sandlet


def audit_records(path: str, sandbox: Optional[str], labels: Optional[Mapping[str, str]], since: Any,
                  follow: bool, poll_interval: float, timeout: Optional[float]) -> Iterator[Dict[str, Any]]:
    if since is not None and hasattr(since, "timestamp"):
        since = since.timestamp()
    reader = _sandlet.AuditReader(path, sandbox or None, sorted((labels or {}).items()), float(since or 0))
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        line = reader.next()
        if line is not None:
            yield json.loads(line)
            continue
        if not follow or (deadline is not None and time.monotonic() >= deadline):
            return
        time.sleep(poll_interval if deadline is None else max(0.0, min(poll_interval, deadline - time.monotonic())))
