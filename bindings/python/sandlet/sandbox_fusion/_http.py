"""A small HTTP/1.1 server on asyncio (standard library only) for the SandboxFusion API: JSON bodies, keep-alive,
bounded request size, one task per connection. Requests are answered concurrently; the sandboxes bound
the real work."""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Awaitable, Callable, Dict, Optional, Tuple

log = logging.getLogger(__name__)

MAX_BODY = 64 << 20
MAX_HEADER_LINES = 100
Handler = Callable[[str, str, Any], Awaitable[Tuple[int, Any]]]  # (method, path, json) -> (status, json)

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 411: "Length Required",
            413: "Payload Too Large", 500: "Internal Server Error"}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _read_request(reader: asyncio.StreamReader) -> Optional[Tuple[str, str, Dict[str, str], bytes]]:
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, "malformed request line")
    method, target, _ = parts
    headers: Dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        name, sep, value = h.decode("latin-1").partition(":")
        if not sep:
            raise HttpError(400, "malformed header line")
        headers[name.strip().lower()] = value.strip()
    else:
        raise HttpError(400, "too many header lines")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise HttpError(411, "chunked bodies are not supported: send Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise HttpError(400, "bad Content-Length") from None
    if length < 0 or length > MAX_BODY:
        raise HttpError(413, f"a body is at most {MAX_BODY} bytes")
    body = await reader.readexactly(length) if length else b""
    return method, target.split("?", 1)[0], headers, body


def _response(status: int, payload: Any, keep_alive: bool) -> bytes:
    body = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
    kind = "text/plain; charset=utf-8" if isinstance(payload, str) else "application/json"
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n")
    return head.encode() + body


async def serve_connection(handler: Handler, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                request = await _read_request(reader)
            except HttpError as e:
                writer.write(_response(e.status, {"error": str(e)}, False))
                await writer.drain()
                return
            if request is None:
                return
            method, path, headers, body = request
            keep_alive = headers.get("connection", "").lower() != "close"
            try:
                doc = json.loads(body) if body else None
            except (ValueError, UnicodeDecodeError) as e:
                status, payload = 400, {"error": f"the body is not JSON: {e}"}
            else:
                try:
                    status, payload = await handler(method, path, doc)
                except HttpError as e:
                    status, payload = e.status, {"error": str(e)}
                except Exception as e:  # answered, logged: one bad request must not stop the server
                    log.exception("sandbox-fusion: %s %s failed", method, path)
                    status, payload = 500, {"error": f"{type(e).__name__}: {e}"}
            writer.write(_response(status, payload, keep_alive))
            await writer.drain()
            if not keep_alive:
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()
