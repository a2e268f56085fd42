"""A SandboxFusion-compatible code-execution service over sandlet (verl, SkyRL and ROLL code rewards).

    python -m sandlet.sandbox_fusion --listen 127.0.0.1:8080 --language python=ENV --language cpp=ENV

then point the framework at it (``SANDBOX_FUSION_URL=http://127.0.0.1:8080/run_code`` for verl,
``SANDBOX_FUSION_ENDPOINT=http://127.0.0.1:8080`` for the ``sandbox-fusion`` client). ENV is a sandlet
environment, a store layer or a directory with the language's toolchain (python3; g++ for cpp; bash).

Endpoints: ``POST /run_code`` (SandboxFusion's RunCodeRequest: code, language, stdin, compile_timeout,
run_timeout, memory_limit_MB, files, fetch_files; answered with its RunCodeResponse), ``POST /run_jupyter``
(cells run in one python3 process of the "python" language's sandboxes: RunJupyterRequest / Response),
``GET /v1/ping``.
See docs/INTEGRATIONS.md.
"""
from __future__ import annotations

import asyncio
from typing import Any, Dict, Mapping, Optional, Tuple

import sandlet

from ._http import HttpError, serve_connection
from ._jupyter import JupyterRequest, run_jupyter
from ._runner import LANGUAGES, Request, RequestError, Runner

__all__ = ["Service", "LANGUAGES"]


class Service:
    """The service: ``languages`` maps a language to the spec fields of its sandboxes (e.g.
    ``{"python": {"environment": "py"}, "cpp": {"layers": ["/srv/toolchain"]}}``)."""

    def __init__(self, rt: sandlet.AsyncRuntime, languages: Mapping[str, Dict[str, Any]],
                 pool_size: int = 8, pooled: bool = True) -> None:
        unknown = set(languages) - set(LANGUAGES)
        if unknown:
            raise ValueError(f"languages {', '.join(sorted(unknown))}: not supported (supported: "
                             f"{', '.join(sorted(LANGUAGES))})")
        self.runner = Runner(rt, languages, pooled)
        for name, spec in languages.items():
            if pooled and LANGUAGES[name].inline:
                rt.set_call_pool({**spec, "network": "none"}, max_size=pool_size)
        self._server: Optional[asyncio.AbstractServer] = None

    async def handle(self, method: str, path: str, doc: Any) -> Tuple[int, Any]:
        if path in ("/v1/ping", "/ping"):
            return 200, "pong"
        if path not in ("/run_code", "/run_jupyter"):
            raise HttpError(404, f"no endpoint {path} (served: POST /run_code, POST /run_jupyter, GET /v1/ping; "
                                 "SandboxFusion's dataset endpoints are not: sandlet serves code execution only)")
        if method != "POST":
            raise HttpError(405, f"{path} takes POST")
        try:
            if path == "/run_jupyter":
                return 200, await run_jupyter(self.runner, JupyterRequest.parse(doc))
            return 200, await self.runner.run(Request.parse(doc))
        except RequestError as e:
            raise HttpError(400, str(e)) from None

    async def start(self, host: str, port: int) -> Tuple[str, int]:
        """Listens; returns the address bound (port 0 picks a free one)."""
        self._server = await asyncio.start_server(lambda r, w: serve_connection(self.handle, r, w), host, port)
        sock = self._server.sockets[0].getsockname()
        return sock[0], sock[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
