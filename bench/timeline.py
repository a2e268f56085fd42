#!/usr/bin/env python3
"""Where one `sandlet run --layer ROOTFS -- /bin/true` spends its time, from kernel tracepoints.

    bench/timeline.py SANDLET_CLI ROOTFS [RUNS]      (root; needs perf)

Records scheduler and system-call tracepoints system-wide (`perf record -a`) over RUNS runs (default 60),
splits each run at the milestones below (first thread, network namespace, the init's exec, pivot_root,
its "staged" and "ready" reports, the command's fork/exec/exit, the init's exit, the reaping, the
process exit) and prints the median of each segment. Tracing adds ~10% to the total.
"""
import re
import statistics
import subprocess
import sys
import tempfile

EVENTS = ["sched:sched_process_exec", "sched:sched_process_exit", "sched:sched_process_fork",
          "syscalls:sys_enter_unshare", "syscalls:sys_exit_unshare", "syscalls:sys_enter_clone3",
          "syscalls:sys_enter_execveat", "syscalls:sys_enter_pivot_root", "syscalls:sys_enter_sendto",
          "syscalls:sys_enter_exit_group", "syscalls:sys_exit_waitid"]
LINE = re.compile(r"\s*(\S+)\s+\d+\s+([\d.]+):\s+(\S+):\s*(.*)")


def record(cli, rootfs, runs):
    with tempfile.TemporaryDirectory() as tmp:
        data = f"{tmp}/perf.data"
        loop = f"for i in $(seq {runs}); do {cli} run --layer {rootfs} -- /bin/true; done"
        cmd = ["perf", "record", "-q", "-o", data, "-a"]
        for e in EVENTS:
            cmd += ["-e", e]
        subprocess.run(cmd + ["--", "sh", "-c", loop], check=True, stderr=subprocess.DEVNULL)
        out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,time,event,trace"],
                             check=True, capture_output=True, text=True).stdout
    runs_seen, cur = [], None
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        comm, t, ev, tr = m.groups()
        t = float(t) * 1000
        if ev == "sched:sched_process_exec" and tr.startswith("filename=" + cli):
            cur = {"start": t, "ev": []}
            runs_seen.append(cur)
        elif cur is not None:
            cur["ev"].append((t, comm, ev, tr))
    return runs_seen


def milestones(run):
    ev = run["ev"]

    def first(pred, after=0.0):
        return next((t for t, c, e, tr in ev if t > after and pred(c, e, tr)), None)

    init = lambda c: c.startswith("init-")
    staged = first(lambda c, e, tr: init(c) and e.endswith("sys_enter_sendto"))
    last_exit = [t for t, c, e, tr in ev if e == "sched:sched_process_exit" and "group_dead=true" in tr
                 and not init(c) and c != "true"]
    return [
        ("process start to first thread", first(lambda c, e, tr: e.endswith("enter_clone3") and not init(c))),
        ("to the network namespace's start", first(lambda c, e, tr: e.endswith("enter_unshare") and "0x40000000" in tr)),
        ("network namespace", first(lambda c, e, tr: e.endswith("exit_unshare"))),
        ("init clone, id mapping, exec", first(lambda c, e, tr: e.endswith("enter_execveat"))),
        ("init to pivot_root", first(lambda c, e, tr: e.endswith("enter_pivot_root"))),
        ("to staged", staged),
        ("to ready", first(lambda c, e, tr: init(c) and e.endswith("sys_enter_sendto"), staged or 0)),
        ("command fork", first(lambda c, e, tr: init(c) and e == "sched:sched_process_fork")),
        ("command exec", first(lambda c, e, tr: e == "sched:sched_process_exec" and "/bin/true" in tr)),
        ("command runs", first(lambda c, e, tr: c == "true" and e == "sched:sched_process_exit")),
        ("report, init exit_group", first(lambda c, e, tr: init(c) and e.endswith("enter_exit_group"))),
        ("init exit and reaping", first(lambda c, e, tr: e.endswith("exit_waitid"))),
        ("clean-up and process exit", last_exit[-1] if last_exit else None),
    ]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cli, rootfs = sys.argv[1], sys.argv[2]
    runs = record(cli, rootfs, int(sys.argv[3]) if len(sys.argv) > 3 else 60)
    segments, totals = {}, []
    for run in runs:
        prev = run["start"]
        for name, t in milestones(run):
            if t is None:
                continue
            segments.setdefault(name, []).append(t - prev)
            prev = t
        totals.append(prev - run["start"])
    print(f"{len(runs)} runs, total median {statistics.median(totals):.3f} ms")
    for name, _ in milestones(runs[0]):
        if name in segments:
            print(f"  {name:<34} {statistics.median(segments[name]):.3f} ms")


if __name__ == "__main__":
    main()
