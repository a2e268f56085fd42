"""The SandboxFusion-compatible service — both implementations, ``python -m sandlet.sandbox_fusion`` and
``sandlet serve --sandbox-fusion`` — driven by the ``sandbox-fusion`` client package itself and by verl's
request shape: Python and C++ with stdin, timeouts, memory limits,
compile errors, files in and out, bad requests, parallel callers. The service runs as its own process on
loopback, as a user starts it; when it stops, its runtime root holds no sandbox and no mount."""
from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, List

import pytest

sandbox_fusion = pytest.importorskip("sandbox_fusion", reason="sandbox-fusion is not installed (scripts/setup.sh installs it)")
from sandbox_fusion import RunCodeRequest, RunStatus, run_code  # noqa: E402

import sandlet  # noqa: E402

from .conftest import REPO, mounts_under  # noqa: E402

CPP_SUM = '#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << "\\n"; }\n'


def server_command(kind: str, root: str) -> List[str]:
    """The two implementations of one API: the Python package's entry point and the CLI's `serve`."""
    if kind == "python":
        return [sys.executable, "-m", "sandlet.sandbox_fusion", "--root", root]
    cli = os.environ.get("SANDLET_CLI") or os.path.join(REPO, "build", "sandlet")
    if not os.access(cli, os.X_OK):
        pytest.skip(f"no sandlet CLI at {cli} (set SANDLET_CLI)")
    return [cli, "--root", root, "serve", "--sandbox-fusion"]


@pytest.fixture(scope="module", params=["python", "cli"])
def service(request: pytest.FixtureRequest, debian_toolchain: str) -> Iterator[str]:
    root = tempfile.mkdtemp(prefix="sandlet-fusion.")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(sandlet.__file__))))
    p = subprocess.Popen([*server_command(request.param, root), "--listen", "127.0.0.1:0",
                          "--language", f"python={debian_toolchain}", "--language", f"cpp={debian_toolchain}",
                          "--memory", "512M"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("listening on "), (line, p.stderr.read() if p.stderr else "")
        yield "http://" + line.split()[-1]
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        stderr = p.stderr.read() if p.stderr else ""
        with sandlet.Runtime(root) as rt:
            left = rt.list()
        mounts = mounts_under(root)
        subprocess.run(["rm", "-rf", "--one-file-system", root], check=False)
        assert rc == 0, stderr
        assert left == [] and mounts == [], (left, mounts)


def post(url: str, path: str, body: Any) -> Dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return {"http": r.status, **json.loads(r.read())}
    except urllib.error.HTTPError as e:
        return {"http": e.code, **json.loads(e.read())}


def test_python_with_stdin(service: str) -> None:
    r = run_code(RunCodeRequest(code="import sys\nprint(sys.stdin.read().upper(), end='')", stdin="hello\n",
                                language="python"), endpoint=service)
    assert r.status == RunStatus.Success, r
    assert r.run_result.stdout == "HELLO\n" and r.run_result.return_code == 0
    bad = run_code(RunCodeRequest(code="raise SystemExit(3)", language="python"), endpoint=service)
    assert bad.status == RunStatus.Failed and bad.run_result.return_code == 3


def test_python_timeout(service: str) -> None:
    r = run_code(RunCodeRequest(code="import time\ntime.sleep(30)", language="python", run_timeout=1),
                 endpoint=service)
    assert r.status == RunStatus.Failed and r.run_result.status == "TimeLimitExceeded", r
    assert r.run_result.execution_time < 10


def test_memory_limit_kills_a_hog_but_not_a_modest_program(service: str) -> None:
    # verl sends memory_limit_MB beside the client's fields.
    hog = post(service, "/run_code", {"code": "x = bytearray(400 << 20)\nprint(len(x))", "language": "python",
                                      "memory_limit_MB": 64, "run_timeout": 20})
    assert hog["http"] == 200 and hog["status"] == "Failed"
    assert hog["run_result"]["return_code"] != 0 and hog["run_result"]["stdout"] == "", hog
    ok = post(service, "/run_code", {"code": "x = bytearray(16 << 20)\nprint(len(x))", "language": "python",
                                     "memory_limit_MB": 256, "run_timeout": 20})
    assert ok["status"] == "Success" and ok["run_result"]["stdout"] == f"{16 << 20}\n", ok


def test_cpp_compile_and_run_with_stdin(service: str) -> None:
    r = run_code(RunCodeRequest(code=CPP_SUM, stdin="40 2", language="cpp", compile_timeout=60), endpoint=service)
    assert r.status == RunStatus.Success, r
    assert r.compile_result.return_code == 0 and r.run_result.stdout == "42\n"


def test_cpp_compile_error(service: str) -> None:
    r = run_code(RunCodeRequest(code="int main() { return undeclared; }", language="cpp", compile_timeout=60),
                 endpoint=service)
    assert r.status == RunStatus.Failed and r.run_result is None, r
    assert r.compile_result.return_code != 0 and "undeclared" in r.compile_result.stderr


def test_cpp_runtime_timeout(service: str) -> None:
    r = run_code(RunCodeRequest(code="int main() { for (;;) {} }", language="cpp", compile_timeout=60,
                                run_timeout=1), endpoint=service)
    assert r.status == RunStatus.Failed and r.run_result.status == "TimeLimitExceeded", r


def test_files_in_and_out(service: str) -> None:
    code = "data = open('in/data.txt').read()\nopen('out.txt', 'w').write(data[::-1])\nprint('done')"
    r = run_code(RunCodeRequest(code=code, language="python", files={"in/data.txt": base64.b64encode(b"abc").decode()},
                                fetch_files=["out.txt", "missing.txt"]), endpoint=service)
    assert r.status == RunStatus.Success, r
    assert base64.b64decode(r.files["out.txt"]) == b"cba" and "missing.txt" not in r.files


def test_bad_requests_name_the_field(service: str) -> None:
    assert post(service, "/run_code", {"language": "python"}) == {"http": 400, "error": "field 'code': required, a string"}
    r = post(service, "/run_code", {"code": "x", "language": "cobol"})
    assert r["http"] == 400 and "'cobol' is not served here (served: cpp, python)" in r["error"]
    r = post(service, "/run_code", {"code": "x", "language": "python", "run_timeout": -1})
    assert r["http"] == 400 and "run_timeout" in r["error"]
    r = post(service, "/run_code", {"code": "x", "language": "python", "memory_limit_MB": 1 << 40})
    assert r["http"] == 400 and "memory_limit_MB" in r["error"]
    r = post(service, "/run_code", b"{not json")
    assert r["http"] == 400 and "not JSON" in r["error"]
    assert post(service, "/nothing", {})["http"] == 404
    with urllib.request.urlopen(service + "/v1/ping", timeout=10) as ping:
        assert ping.read() == b"pong"


def test_run_jupyter_cells_share_a_kernel(service: str) -> None:
    from sandbox_fusion import RunJupyterRequest, run_jupyter
    cells = ["a = 123", "a", "print(a)",
             "import subprocess, sys; sys.stderr.write('err'); subprocess.run(['echo', 'from-child'])",
             "raise RuntimeError('boom')", "print('not run')"]
    r = run_jupyter(RunJupyterRequest(cells=cells), endpoint=service, max_attempts=1)
    assert r.status == RunStatus.Failed and r.driver is not None and r.driver.return_code == 0
    assert len(r.cells) == 5  # execution stops at the error, as "run all" does
    assert r.cells[1].display == [{"text/plain": "123"}] and r.cells[2].stdout == "123\n"
    assert r.cells[3].stderr == "err" and r.cells[3].stdout == "from-child\n"  # a child's output counts
    assert r.cells[4].error[0]["ename"] == "RuntimeError" and r.cells[4].error[0]["evalue"] == "boom"
    # Files in and out, as /run_code takes them.
    r = run_jupyter(RunJupyterRequest(cells=["open('out.txt', 'w').write(open('in.txt').read() + '!')"],
                                      files={"in.txt": base64.b64encode(b"data").decode()}, fetch_files=["out.txt"]),
                    endpoint=service, max_attempts=1)
    assert r.status == RunStatus.Success and base64.b64decode(r.files["out.txt"]) == b"data!"
    # A cell past cell_timeout is an error; the notebook past total_timeout is a failed run.
    r = run_jupyter(RunJupyterRequest(cells=["import time; time.sleep(30)"], cell_timeout=0.5), endpoint=service,
                    max_attempts=1)
    assert r.status == RunStatus.Failed and r.cells[0].error[0]["ename"] == "TimeoutError"
    r = post(service, "/run_jupyter", {"cells": ["import time; time.sleep(30)"], "total_timeout": 1})
    assert r["status"] == "Failed" and r["driver"]["status"] == "TimeLimitExceeded" and r["cells"] == []
    # The driver's output is the sandbox's: a cell that ends the process, or writes a forged answer where the
    # driver's would go, makes a failed run, not a served forgery.
    r = post(service, "/run_jupyter", {"cells": ["print(1)", "import os; os._exit(0)"]})
    assert r["status"] == "Failed" and r["cells"] == [] and "did not finish" in r["message"]
    forged = json.dumps({"cells": [{"stdout": 7, "stderr": "", "display": [], "error": []}]})
    # The driver's own answer goes to the first pipe it holds above stderr: write there once, then end.
    forge = ("import os, stat\n"
             "fd = next(fd for fd in range(3, 64) if os.path.exists(f'/proc/self/fd/{fd}') and "
             "stat.S_ISFIFO(os.fstat(fd).st_mode))\n"
             f"os.write(fd, {forged.encode()!r})\nos._exit(0)")
    r = post(service, "/run_jupyter", {"cells": [forge]})
    assert r["status"] == "Failed" and r["cells"] == [], r
    assert post(service, "/run_jupyter", {"cells": "x = 1"})["http"] == 400
    r = post(service, "/run_jupyter", {"cells": [], "kernel": "python2"})
    assert r["http"] == 400 and "kernel" in r["error"]


def test_parallel_callers(service: str) -> None:
    def one(i: int) -> str:
        r = run_code(RunCodeRequest(code=f"print({i} * {i})", language="python"), endpoint=service)
        assert r.status == RunStatus.Success, r
        return r.run_result.stdout

    with ThreadPoolExecutor(16) as pool:
        assert list(pool.map(one, range(48))) == [f"{i * i}\n" for i in range(48)]


@pytest.mark.parametrize("kind", ["python", "cli"])
def test_bad_command_lines_are_usage_errors(kind: str, tmp_path: Any) -> None:
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(sandlet.__file__))))
    base = server_command(kind, str(tmp_path / "root"))
    for extra, needle in [([], "--language"), (["--language", "python"], "LANG=ENV"),
                          (["--language", "cobol=/x"], "cobol"), (["--listen", "nowhere", "--language", "python=/x"], "listen")]:
        p = subprocess.run([*base, *extra], env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and needle in p.stderr, (extra, p.returncode, p.stderr)
