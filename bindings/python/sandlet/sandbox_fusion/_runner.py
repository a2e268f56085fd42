"""Runs one SandboxFusion ``/run_code`` request in sandlet sandboxes and answers in SandboxFusion's shapes.

Interpreted code with no files goes to a FnCall pool of its language (a pooled, already running container;
the code travels in argv, stdin is the program's own). Compiled languages, requests with files or
fetch_files, and code too long for one argument get a sandbox of their own for the request: compiling
writes files, and a FnCall container that was written to is discarded after the call anyway, so a pool
would give nothing there.
"""
from __future__ import annotations

import base64
import binascii
import posixpath
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import sandlet

WORKDIR = "/tmp/sandbox-fusion"
MAX_ARGV_CODE = 96 * 1024  # one argv string may hold 128 KiB (MAX_ARG_STRLEN); beyond, the code goes in a file
OUTPUT_LIMIT = 16 << 20


@dataclass(frozen=True)
class Language:
    """How one language runs: ``source`` is the file the code goes to; ``compile`` (if any) and ``run`` are
    argv run in WORKDIR; ``inline`` runs code given in argv (FnCall) when no file is needed."""
    source: str
    run: Sequence[str]
    compile: Optional[Sequence[str]] = None
    inline: Optional[Sequence[str]] = None  # with "{code}" replaced by the code


LANGUAGES: Dict[str, Language] = {
    "python": Language("main.py", ["python3", "main.py"], inline=["python3", "-c", "{code}"]),
    "bash": Language("main.sh", ["bash", "main.sh"], inline=["bash", "-c", "{code}"]),
    "cpp": Language("main.cpp", ["./main"], compile=["g++", "-std=c++17", "-O2", "-o", "main", "main.cpp"]),
}


class RequestError(ValueError):
    """The request is malformed: HTTP 400 with this message (naming the field)."""


async def put_request_files(sb: "sandlet.AsyncSandbox", files: Mapping[str, Optional[str]]) -> None:
    """Makes WORKDIR and writes the request's files (base64) there; a path may also be absolute."""
    await sb.exec(["mkdir", "-p", WORKDIR], check=True)
    for path, content in files.items():
        try:
            data = base64.b64decode(content or "", validate=True)
        except (binascii.Error, ValueError):
            raise RequestError(f"files[{path!r}]: not base64") from None
        await sb.write_file(posixpath.join(WORKDIR, path), data)


async def fetch_request_files(sb: "sandlet.AsyncSandbox", paths: Sequence[str]) -> Dict[str, str]:
    """The request's fetch_files (relative to WORKDIR), base64; a file the code did not make is left out, as
    SandboxFusion does."""
    fetched: Dict[str, str] = {}
    for path in paths:
        try:
            fetched[path] = base64.b64encode(await sb.read_file(posixpath.join(WORKDIR, path))).decode()
        except OSError:
            continue
    return fetched


@dataclass
class Request:
    code: str
    language: str
    stdin: Optional[str] = None
    compile_timeout: float = 10.0
    run_timeout: float = 10.0
    memory_limit_mb: int = -1
    files: Dict[str, Optional[str]] = field(default_factory=dict)
    fetch_files: List[str] = field(default_factory=list)

    @classmethod
    def parse(cls, doc: Any) -> "Request":
        if not isinstance(doc, Mapping):
            raise RequestError("the body must be a JSON object")

        def get(name: str, kind: Any, default: Any) -> Any:
            value = doc.get(name, default)
            if value is None:
                return default
            if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
                raise RequestError(f"field '{name}': expected {getattr(kind, '__name__', kind)}")
            return value

        code, language = doc.get("code"), doc.get("language")
        if not isinstance(code, str):
            raise RequestError("field 'code': required, a string")
        if not isinstance(language, str):
            raise RequestError("field 'language': required, a string")
        req = cls(code=code, language=language, stdin=get("stdin", str, None),
                  compile_timeout=float(get("compile_timeout", (int, float), 10.0)),
                  run_timeout=float(get("run_timeout", (int, float), 10.0)),
                  memory_limit_mb=int(get("memory_limit_MB", (int, float), -1)))
        if req.memory_limit_mb > 1 << 20:
            raise RequestError("field 'memory_limit_MB': at most 1048576 (1 TiB)")
        for name in ("compile_timeout", "run_timeout"):
            if not 0 < getattr(req, name) <= 3600:
                raise RequestError(f"field '{name}': must be in (0, 3600] seconds")
        req.files, req.fetch_files = parse_request_files(doc)
        return req


def parse_request_files(doc: Mapping[str, Any]) -> Tuple[Dict[str, Optional[str]], List[str]]:
    """The request's ``files`` (path -> base64, decoded when written) and ``fetch_files``, paths checked."""
    files, fetch = doc.get("files") or {}, doc.get("fetch_files") or []
    if not isinstance(files, dict):
        raise RequestError("field 'files': expected an object of path -> base64")
    if not isinstance(fetch, list):
        raise RequestError("field 'fetch_files': expected an array of paths")
    for path in [*files, *fetch]:
        if not isinstance(path, str) or not path or "\0" in path:
            raise RequestError(f"files/fetch_files: bad path {path!r}")
    return dict(files), list(fetch)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def command_result(r: sandlet.ExecResult) -> Dict[str, Any]:
    """SandboxFusion's CommandRunResult. A command killed by signal N has return_code -N, as Python's
    subprocess (which SandboxFusion runs commands with) reports it."""
    return {"status": "TimeLimitExceeded" if r.timed_out else "Finished",
            "execution_time": r.run_ns / 1e9, "return_code": -r.signal if r.signal else r.exit_code,
            "stdout": _text(r.stdout), "stderr": _text(r.stderr)}


def _succeeded(result: Optional[Dict[str, Any]]) -> bool:
    return result is not None and result["status"] == "Finished" and result["return_code"] == 0


class Runner:
    """Answers requests with sandboxes of ``rt``: ``specs`` maps a language to the spec fields of its
    sandboxes (an environment or layers, limits, ...)."""

    def __init__(self, rt: sandlet.AsyncRuntime, specs: Mapping[str, Dict[str, Any]], pooled: bool = True) -> None:
        self.rt = rt
        self.specs = dict(specs)
        self.pooled = pooled  # False: every request gets a fresh sandbox (the benchmark's peer)

    def spec_for(self, req: Request) -> Dict[str, Any]:
        base = self.specs.get(req.language)
        if base is None or req.language not in LANGUAGES:
            known = sorted(set(self.specs) & set(LANGUAGES))
            raise RequestError(f"field 'language': {req.language!r} is not served here (served: {', '.join(known)})")
        spec = {**base, "network": "none"}
        if req.memory_limit_mb > 0:
            spec["limits"] = {**spec.get("limits", {}), "memory": req.memory_limit_mb << 20}
        return spec

    async def run(self, req: Request) -> Dict[str, Any]:
        spec = self.spec_for(req)
        lang = LANGUAGES[req.language]
        stdin = (req.stdin or "").encode()
        try:
            inline = (self.pooled and lang.inline and not req.files and not req.fetch_files
                      and len(req.code.encode()) <= MAX_ARGV_CODE and "\0" not in req.code)
            if inline:
                argv = [a.replace("{code}", req.code) for a in lang.inline or ()]
                r = await self.rt.call(argv, spec, stdin=stdin, timeout=req.run_timeout)
                return self._answer(None, command_result(r), {})
            return await self._in_own_sandbox(req, lang, spec, stdin)
        except sandlet.Error as e:
            return {"status": "SandboxError", "message": str(e), "compile_result": None, "run_result": None,
                    "files": {}}

    async def _in_own_sandbox(self, req: Request, lang: Language, spec: Dict[str, Any],
                              stdin: bytes) -> Dict[str, Any]:
        async with await self.rt.create(spec) as sb:
            await put_request_files(sb, req.files)
            await sb.write_file(posixpath.join(WORKDIR, lang.source), req.code)
            compiled = None
            if lang.compile:
                c = await sb.exec(list(lang.compile), cwd=WORKDIR, timeout=req.compile_timeout,
                                  output_limit=OUTPUT_LIMIT)
                compiled = command_result(c)
                if not _succeeded(compiled):
                    return self._answer(compiled, None, {})
            r = await sb.exec(list(lang.run), cwd=WORKDIR, stdin=stdin, timeout=req.run_timeout,
                              output_limit=OUTPUT_LIMIT)
            return self._answer(compiled, command_result(r), await fetch_request_files(sb, req.fetch_files))

    @staticmethod
    def _answer(compiled: Optional[Dict[str, Any]], ran: Optional[Dict[str, Any]],
                files: Dict[str, str]) -> Dict[str, Any]:
        ok = (compiled is None or _succeeded(compiled)) and _succeeded(ran)
        return {"status": "Success" if ok else "Failed", "message": "", "compile_result": compiled,
                "run_result": ran, "files": files, "executor_pod_name": None}
