"""Runs notebook cells for /run_jupyter, inside the sandbox (python3, standard library only). Shared by the
Python service and `sandlet serve` (which embeds this file).

Reads {"cells": [...], "cell_timeout": seconds (0 = none)} as JSON on stdin; runs the cells one after the other
in one namespace, as a python3 kernel would: each cell's stdout and stderr (the process's file descriptors, so
a subprocess's output counts too), the value of a final expression as display data {"text/plain": repr}, and
an exception as an error {"ename", "evalue", "traceback"}; execution stops at the first error, as "run all"
does. Writes {"cells": [...]} as JSON to its own stdout once all ran."""
import ast
import json
import os
import signal
import sys
import tempfile
import traceback


class CellTimeout(BaseException):
    pass


def on_alarm(signum, frame):
    raise CellTimeout()


def run_cell(code, namespace, timeout):
    display, error = [], []
    if timeout > 0:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        tree = ast.parse(code, "<cell>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<cell>", "exec"), namespace)
        if last is not None:
            value = eval(compile(last, "<cell>", "eval"), namespace)
            if value is not None:
                display.append({"text/plain": repr(value)})
    except CellTimeout:
        error.append({"ename": "TimeoutError", "evalue": "the cell ran past its timeout of %g s" % timeout,
                      "traceback": []})
    except BaseException as e:  # SystemExit and KeyboardInterrupt included: a kernel reports them too
        error.append({"ename": type(e).__name__, "evalue": str(e),
                      "traceback": traceback.format_exception(type(e), e, e.__traceback__)})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return display, error


def main():
    request = json.load(sys.stdin)
    timeout = float(request.get("cell_timeout") or 0)
    signal.signal(signal.SIGALRM, on_alarm)
    result_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # cells read no stdin (the request came on it)
    os.close(devnull)
    namespace = {"__name__": "__main__"}
    cells = []
    for code in request["cells"]:
        captured = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
        saved = [os.dup(1), os.dup(2)]
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(captured[0].fileno(), 1)
        os.dup2(captured[1].fileno(), 2)
        try:
            display, error = run_cell(code, namespace, timeout)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        out = []
        for f in captured:
            f.seek(0)
            out.append(f.read().decode("utf-8", "replace"))
            f.close()
        cells.append({"stdout": out[0], "stderr": out[1], "display": display, "error": error})
        if error:
            break
    with os.fdopen(result_fd, "w") as f:
        json.dump({"cells": cells}, f)


if __name__ == "__main__":
    main()
