#!/usr/bin/env python3
"""Where one `sandlet run --layer ROOTFS -- /bin/true` spends its time, from kernel tracepoints.

    bench/timeline.py SANDLET_CLI ROOTFS [RUNS [IDLE_S]]      (root; needs perf)

Records scheduler and system-call tracepoints system-wide (`perf record -a`) over RUNS runs (default 60),
splits each run at the milestones below (first thread, network namespace, the init's exec, pivot_root,
its "staged" and "ready" reports, the command's fork/exec/exit, the init's exit, the reaping, the
process exit) and prints the median of each segment, then how long the CLI's main thread was runnable
but not running before the init's exec (threads it started took its CPU). (Session 8's "first thread,
creation to first run" is gone: a thread picked up at once by an idle CPU often had no switch event
recorded, so it read a later run.) IDLE_S (default 0): seconds of sleep before each run (the machine idle,
as in sandlet-bench --idle-ms). The runs use a throw-away runtime root, gc'd and removed at the end.
Tracing adds ~10% to the total.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

EVENTS = ["sched:sched_process_exec", "sched:sched_process_exit", "sched:sched_process_fork",
          "syscalls:sys_enter_unshare", "syscalls:sys_exit_unshare", "syscalls:sys_enter_clone3",
          "syscalls:sys_enter_execveat", "syscalls:sys_enter_pivot_root", "syscalls:sys_enter_sendto",
          "syscalls:sys_enter_exit_group", "syscalls:sys_exit_waitid", "sched:sched_switch"]
LINE = re.compile(r"\s*(\S+)\s+\d+\s+([\d.]+):\s+(\S+):\s*(.*)")


def record(cli, rootfs, runs, idle_s):
    with tempfile.TemporaryDirectory() as tmp:
        data, root = f"{tmp}/perf.data", f"{tmp}/root"  # a throw-away runtime root, gc'd below
        pause = f"sleep {idle_s}; " if idle_s > 0 else ""
        loop = f"for i in $(seq {runs}); do {pause}{cli} --root {root} run --layer {rootfs} -- /bin/true; done"
        cmd = ["perf", "record", "-q", "-o", data, "-a"]
        for e in EVENTS:
            cmd += ["-e", e]
        subprocess.run(cmd + ["--", "sh", "-c", loop], check=True, stderr=subprocess.DEVNULL)
        subprocess.run([cli, "--root", root, "gc"], check=True, stdout=subprocess.DEVNULL)
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
            cur = {"start": t, "pid": re.search(r" pid=(\d+)", tr).group(1), "ev": []}
            runs_seen.append(cur)
        elif cur is not None:
            cur["ev"].append((t, comm, ev, tr))
    return runs_seen


def milestones(run, cli_comm):
    ev = run["ev"]

    def first(pred, after=0.0):
        return next((t for t, c, e, tr in ev if t > after and pred(c, e, tr)), None)

    init = lambda c: c.startswith("init-")
    staged = first(lambda c, e, tr: init(c) and e.endswith("sys_enter_sendto"))
    last_exit = [t for t, c, e, tr in ev if e == "sched:sched_process_exit" and "group_dead=true" in tr
                 and c == cli_comm]
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


def main_thread_preempted(run):
    """How long the CLI's main thread was runnable but not running (preempted, waiting for a CPU) between
    its exec and the init's exec: what the opener lost to threads placed on its own CPU."""
    pid, lost, since = run["pid"], 0.0, None
    for t, c, e, tr in run["ev"]:
        if e.endswith("sys_enter_execveat"):
            return lost
        if e != "sched:sched_switch":
            continue
        m = re.search(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)", tr)
        if m.group(1) == pid and m.group(2).startswith("R"):
            since = t
        elif m.group(3) == pid and since is not None:
            lost, since = lost + t - since, None
    return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cli, rootfs = sys.argv[1], sys.argv[2]
    cli_comm = os.path.basename(cli)[:15]  # the kernel's comm: the file name, cut to 15 characters
    runs = record(cli, rootfs, int(sys.argv[3]) if len(sys.argv) > 3 else 60,
                  float(sys.argv[4]) if len(sys.argv) > 4 else 0.0)
    segments, totals = {}, []
    for run in runs:
        prev = run["start"]
        for name, t in milestones(run, cli_comm):
            if t is None:
                continue
            segments.setdefault(name, []).append(t - prev)
            prev = t
        totals.append(prev - run["start"])
    print(f"{len(runs)} runs, total median {statistics.median(totals):.3f} ms")
    for name, _ in milestones(runs[0], cli_comm):
        if name in segments:
            print(f"  {name:<34} {statistics.median(segments[name]):.3f} ms")
    lost = [x for x in (main_thread_preempted(r) for r in runs) if x is not None]
    if lost:
        print(f"main thread runnable but not running, before the init's exec: median {statistics.median(lost):.3f} ms")


if __name__ == "__main__":
    main()
