"""sandlet as a miniature agentic RL rollout, in Python with asyncio (the scenario of examples/rollout.cpp).

    PYTHONPATH=<build>/python python3 examples/python/rollout.py ROOT [LAYER] [--episodes N]

ROOT is the runtime's state directory (a throw-away one is best; it must hold no sandboxes yet). LAYER is a
root filesystem with busybox: a directory (the build's test-rootfs) or the name/digest of an EROFS layer
imported into ROOT's store (`sandlet layer import DIR --name busybox`); default $SANDLET_EXAMPLE_ROOTFS.
Needs root.

The toy task: a repository whose shell function add() subtracts; each episode's scripted "agent" rewrites
add() and runs the tests; the reward is the share of tests that pass. Every episode is a sandbox, and all of
them are created and driven concurrently from one asyncio thread (AsyncRuntime: the library's event loop does
the waiting). Then misbehaving agents, a preempted trainer, and the clean-up.

Exit status: 0 when everything behaved as expected, 1 otherwise, 2 on usage errors.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import sandlet

# ---- small helpers --------------------------------------------------------------------------------------


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def say(text: str = "") -> None:
    print(text, flush=True)  # flushed at once: the output interleaves correctly with a calling script's


def section(title: str) -> None:
    say(f"\n== {title}")


def verdict(episode: int, probe: str, text: str) -> None:
    say(f"  ep {episode}  {probe:<16} -> {text}")


class DemoFailure(Exception):
    """A broken expectation of the demo itself (a sandbox that escaped, something left behind, ...)."""


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise DemoFailure(what)


def first_line(s: str) -> str:
    return s.split("\n", 1)[0]


def value_of(out: str, key: str) -> str:
    """The value of the last "key=value" line of a command's output ("" when absent)."""
    found = re.findall(rf"^{re.escape(key)}=(.*)$", out, re.M)
    return found[-1] if found else ""


def entries_in(d: Path) -> int:
    """(A missing directory counts as empty: the runtime removes its tmpfs state when the last one closes.)"""
    try:
        return len(os.listdir(d))
    except FileNotFoundError:
        return 0


# ---- the toy task ---------------------------------------------------------------------------------------

BUGGY_CALC = "# add A B: prints A + B\nadd() {\n  echo $(( $1 - $2 ))  # bug\n}\n"

TESTS = """#!/bin/sh
. /work/repo/calc.sh
pass=0; total=0
check() {
  total=$((total + 1)); got=$(add "$1" "$2")
  if [ "$got" = "$3" ]; then pass=$((pass + 1)); echo "PASS add $1 $2 = $3";
  else echo "FAIL add $1 $2: got '$got', want $3"; fi
}
check 1 2 3; check 0 0 0; check -4 10 6; check 20 22 42
echo "passed $pass/$total"
"""

# A scripted policy stands in for the model: each episode "samples" one rewrite of add() (name, new body).
POLICY: List[Tuple[str, str]] = [
    ("fix: a + b", "echo $(( $1 + $2 ))"),
    ("wrong: a * b", "echo $(( $1 * $2 ))"),
    ("fix: a - -b", "echo $(( $1 - -$2 ))"),
    ("no-op (keep bug)", "echo $(( $1 - $2 ))"),
    ("wrong: a + b + 1", "echo $(( $1 + $2 + 1 ))"),
    ("fix: expr a + b", 'expr "$1" + "$2"'),
    ("wrong: concat", 'echo "$1$2"'),
    ("fix: a + b", "echo $(( $1 + $2 ))"),
]


def make_task_layer(layer: Path) -> None:
    """The "task layer": a tiny repository that goes on top of the base (busybox) layer."""
    repo = layer / "work" / "repo"
    repo.mkdir(parents=True)
    (repo / "calc.sh").write_text(BUGGY_CALC)
    (repo / "test.sh").write_text(TESTS)
    (repo / "test.sh").chmod(0o755)
    # The sandbox's root is not the host's root: every directory on the way must be world-readable.
    for d in (layer, layer / "work", repo):
        d.chmod(0o755)


def reward_of(out: str) -> Tuple[int, int]:
    """(passed, total) from the test script's last "passed X/Y" line; (0, 0) without one."""
    found = re.findall(r"passed (\d+)/(\d+)", out)
    return (int(found[-1][0]), int(found[-1][1])) if found else (0, 0)


def episode_spec(layers: Sequence[str], episode: str) -> Dict[str, Any]:
    return dict(
        layers=list(layers),  # lowest first: busybox, then the task repository
        labels={"task": "calc", "episode": episode},
        limits={"memory": 128 << 20, "pids": 64, "cpus": 0.5},
        max_lifetime_s=120,  # ~2x what the demo needs: a lost owner never leaves a zombie for long
        workdir="/work/repo",
    )


# ---- the steps ------------------------------------------------------------------------------------------


async def show_backends(rt: sandlet.AsyncRuntime, layers: Sequence[str]) -> None:
    for b in rt.backends():
        say(f"  {b['name']:<10} {'available' if b['available'] else 'not available: '}{b['reason']}")
    # Asking for a missing backend is an ordinary, typed error.
    try:
        sb = await rt.create(episode_spec(layers, "probe"), backend="fullvm")
        sb.close()
        raise DemoFailure("a fullvm sandbox was created although the backend is listed as unavailable")
    except sandlet.Unimplemented as e:
        say(f"  asking for fullvm anyway -> {e.code_name} (as expected)")


async def create_episodes(rt: sandlet.AsyncRuntime, layers: Sequence[str], n: int) -> List[sandlet.AsyncSandbox]:
    t0 = time.perf_counter()

    async def one(i: int) -> Tuple[sandlet.AsyncSandbox, float]:
        sb = await rt.create(episode_spec(layers, str(i)))
        return sb, ms_since(t0)

    created = await asyncio.gather(*(one(i) for i in range(n)))  # all n creates in flight at once
    all_ms = ms_since(t0)
    ready = [t for _, t in created]
    say(f"  {n} sandboxes (128 MiB, 64 pids, 0.5 CPU, max lifetime 120 s each) ready in {all_ms:.1f} ms")
    say(f"  first ready after {min(ready):.1f} ms, last after {max(ready):.1f} ms; "
        f"e.g. episode 0 = {created[0][0].id}")
    return [sb for sb, _ in created]


async def run_turn(episodes: List[sandlet.AsyncSandbox]) -> List[float]:
    """One agent turn per episode: write the edited file, then run the tests (all episodes in flight)."""
    write_ms = []
    for i, sb in enumerate(episodes):
        t0 = time.perf_counter()
        await sb.write_file("/work/repo/calc.sh", f"add() {{\n  {POLICY[i % len(POLICY)][1]}\n}}\n")
        write_ms.append(ms_since(t0))

    t0 = time.perf_counter()
    results = await asyncio.gather(*(sb.exec("./test.sh", timeout=10) for sb in episodes))
    all_ms = ms_since(t0)

    say("  episode  action              reward  tests  write     run tests")
    rewards = []
    for i, r in enumerate(results):
        passed, total = reward_of(r.stdout_text)
        expect(total > 0, f"episode {i}: no test verdict in: {r.stdout_text!r}")
        rewards.append(passed / total)
        say(f"  {i:<7}  {POLICY[i % len(POLICY)][0]:<18}  {passed / total:4.2f}    {passed}/{total}    "
            f"{write_ms[i]:5.1f} ms  {r.duration_ns / 1e6:5.1f} ms")
    say(f"  all {len(episodes)} test runs in flight at once from one thread: {all_ms:.1f} ms wall")
    return rewards


async def show_safety(episodes: List[sandlet.AsyncSandbox], host_secret: Path) -> None:
    """Misbehaving agents, one per episode sandbox (4..7); every probe must be contained."""
    escape = (
        "echo seccomp=$(awk '/^Seccomp:/ {print $2}' /proc/self/status)\n"
        "m=$(mount -t tmpfs none /mnt 2>&1) && echo mount=ALLOWED || echo \"mount=$m\"\n"
        "m=$(unshare -U true 2>&1) && echo unshare=ALLOWED || echo \"unshare=$m\"\n"
        f"m=$(cat '{host_secret}' 2>&1) && echo hostfile=VISIBLE || echo \"hostfile=$m\"\n"
        "echo procs=$(ls -d /proc/[0-9]* | wc -l)\n"
    )
    flood_limit = 1 << 20
    t0 = time.perf_counter()
    # The command's own shell forks once, then becomes `sleep` (exec, no fork): a shell that forked again
    # after the bomb exhausted the pid limit would fail ("can't fork"), exit early and dodge the timeout.
    bomb, flood, hang, esc = await asyncio.gather(
        episodes[4].exec("bomb() { bomb | bomb & }; (bomb) & exec sleep 600", timeout=2, output_limit=64 << 10),
        episodes[5].exec(["yes", "reward=1.0"], timeout=10, output_limit=flood_limit, kill_on_output_limit=True),
        episodes[6].exec("sleep 600 & sleep 600 & sleep 600", timeout=1),
        episodes[7].exec(escape, timeout=10),
    )
    say(f"  4 probes ran concurrently in {ms_since(t0):.1f} ms")

    expect(bomb.timed_out, "the fork bomb was not stopped by its timeout")
    refused = bomb.stderr_text.count("can't fork")
    verdict(4, "fork bomb", f"contained: {refused} forks refused at the 64-pid limit, all killed at the 2 s timeout")

    expect(flood.stdout_truncated and len(flood.stdout) <= flood_limit, "`yes` output was not capped")
    verdict(5, "`yes` flood", f"contained: stdout cut at {len(flood.stdout) >> 10} KiB (flagged truncated), "
                              f"killed after {flood.duration_ns / 1e6:.0f} ms")

    left = first_line((await episodes[6].exec("ps | grep -c '[s]leep 600'", timeout=5)).stdout_text)
    expect(hang.timed_out and left == "0", "the hanging command or its children survived")
    verdict(6, "hang + children", f"contained: killed at the 1.0 s timeout, {left} of its 3 sleeps left")

    e = esc.stdout_text
    expect("ALLOWED" not in e, "mount or unshare was allowed:\n" + e)
    expect("VISIBLE" not in e, "a host file was readable:\n" + e)
    verdict(7, "mount tmpfs", f"denied (seccomp mode {value_of(e, 'seccomp')}): {value_of(e, 'mount')}")
    verdict(7, "unshare -U", f"denied: {value_of(e, 'unshare')}")
    read = value_of(e, "hostfile")  # "cat: can't open '...': No such file or directory"
    verdict(7, "read answer key", f"not visible: {read.rsplit(': ', 1)[-1]}")
    host_procs = sum(1 for d in os.listdir("/proc") if d.isdigit())
    verdict(7, "list processes", f"only its own: {value_of(e, 'procs')} visible (the host has {host_procs})")

    # The neighbours, and the misbehaving sandboxes themselves, still answer.
    t1 = time.perf_counter()
    pings = await asyncio.gather(*(sb.exec("echo ok", timeout=5) for sb in episodes), return_exceptions=True)
    ok = sum(1 for p in pings if not isinstance(p, BaseException) and p.stdout == b"ok\n")
    expect(ok == len(episodes), "an episode stopped answering after the probes")
    say(f"  afterwards all {ok} episodes still answer ({ms_since(t1):.1f} ms for one round)")


async def show_preemption(rt: sandlet.AsyncRuntime, episodes: List[sandlet.AsyncSandbox],
                          layers: Sequence[str], root: Path) -> sandlet.AsyncRuntime:
    """The trainer is preempted: its runtime goes away. Detached sandboxes live on; a new runtime (here the
    same process; it could be a new one) finds them by label and continues. Returns the new runtime."""
    # Detached: it outlives this runtime; its max lifetime bounds it if the demo dies before destroying it.
    t0 = time.perf_counter()
    sb = await rt.create(episode_spec(layers, "long-horizon"), lifetime="detached", max_lifetime_s=300)
    await sb.write_file("/work/agent/state.json", '{"turn": 3, "plan": "fix add(), then run the tests"}\n')
    await sb.exec("printf 'turn 1\\nturn 2\\nturn 3\\n' > /work/agent/log", timeout=5)
    sid = sb.id  # what the trainer's checkpoint would keep
    say(f"  detached sandbox {sid} created, 3 turns of state written ({ms_since(t0):.1f} ms)")
    # While the trainer is away the sandbox waits frozen: its processes keep their memory and files but use
    # no CPU. (The next request resumes it.)
    await sb.exec("(while :; do date +%s > /work/agent/heartbeat; sleep 0.05; done) >/dev/null 2>&1 &",
                  timeout=5, keep_background=True)
    t0 = time.perf_counter()
    await sb.pause()
    say(f"  paused it (every process frozen, memory kept) in {ms_since(t0):.1f} ms")

    t0 = time.perf_counter()
    sb.close()
    await rt.aclose()  # owned sandboxes die with their runtime, detached ones do not
    for e in episodes:  # those handles are unusable now; releasing them is all that is left
        e.close()
    episodes.clear()
    left = entries_in(root / "sandboxes")
    say(f"  trainer preempted: runtime closed in {ms_since(t0):.1f} ms; sandboxes left on disk: {left} "
        "(the owned episodes went with it)")
    expect(left == 1, "expected only the detached sandbox to survive the runtime")

    t0 = time.perf_counter()
    rt = sandlet.AsyncRuntime(root)
    say(f"  new runtime opened on the same root in {ms_since(t0):.1f} ms")
    found = await rt.list("task=calc")
    for s in found:
        say(f'  list("task=calc"): {s["id"]}  {s["state"]}{"  (the id the checkpoint kept)" if s["id"] == sid else ""}')
    expect(len(found) == 1 and found[0]["id"] == sid and found[0]["state"] == "paused",
           "the paused sandbox was not found")

    t0 = time.perf_counter()
    again = await rt.attach(sid)
    state = (await again.read_file("/work/agent/state.json")).decode()  # resumes it first
    turn = await again.exec("echo 'turn 4 (after resume)' >> /work/agent/log; wc -l < /work/agent/log", timeout=5)
    now = (await again.info())["state"]
    again.close()
    say(f"  attached by id; the first call resumed it ({now} now); state: {first_line(state)}")
    say(f"  continued: turn 4 done, the log now has {first_line(turn.stdout_text).strip()} lines "
        f"(attach + read + exec: {ms_since(t0):.1f} ms)")
    return rt


async def clean_up(rt: sandlet.AsyncRuntime, root: Path) -> None:
    t0 = time.perf_counter()
    batch = await rt.list("task=calc")
    for s in batch:  # detached sandboxes are destroyed explicitly; closing a handle only releases it
        sb = await rt.attach(s["id"])
        await sb.destroy()
        sb.close()
    say(f'  list("task=calc") -> {len(batch)} sandbox(es), destroyed in {ms_since(t0):.1f} ms')
    if batch:
        last = batch[-1]["id"]
        try:
            (await rt.attach(last)).close()
            raise DemoFailure("attach succeeded on a destroyed sandbox")
        except (sandlet.NotFound, sandlet.FailedPrecondition) as e:
            say(f"  attach({last}) now -> {e.code_name} (as expected)")
    listed = len(await rt.list())
    expect(listed == 0, f"{listed} sandbox(es) still listed under {root}")
    # destroy() kills at once and reclaims cgroups and files on a worker; closing the runtime waits for that.
    await rt.aclose()
    on_disk = entries_in(root / "sandboxes")
    expect(on_disk == 0, f"{on_disk} entries left in {root}/sandboxes after close")
    say(f"  runtime closed; nothing left: list() was empty, {root}/sandboxes is empty")


# ---- main -----------------------------------------------------------------------------------------------


async def rollout(root: Path, base_layer: str, from_store: bool, n: int) -> int:
    start = time.perf_counter()
    section("1. runtime")
    t0 = time.perf_counter()
    rt = sandlet.AsyncRuntime(root)
    try:
        say(f"  sandlet {sandlet.__version__} opened at {rt.root} in {ms_since(t0):.1f} ms "
            "(no daemon: a library in this process)")
        # The demo lists, destroys and counts everything under ROOT: it must not meet anyone else's sandboxes.
        others = len(await rt.list())
        if others:
            print(f"rollout: {root} already holds {others} sandbox(es); use an empty runtime root", file=sys.stderr)
            return 2

        section("2. environment = base layer + task layer")
        with tempfile.TemporaryDirectory(prefix="sandlet-rollout.") as host:
            task_layer = Path(host) / "task-layer"
            make_task_layer(task_layer)
            secret = Path(host) / "answers.txt"  # "leftover answers" an agent must not see
            secret.write_text("add() { echo $(( $1 + $2 )); }\n")
            layers = [base_layer, str(task_layer)]
            shared = ": a content-addressed EROFS layer, mounted once and shared by every episode"
            say(f"  base layer  {base_layer} (busybox{shared if from_store else ''})")
            say(f"  task layer  {task_layer} (/work/repo: buggy calc.sh, test.sh)")
            say(f"  answer key  {secret} (host only: no agent may see it)")
            await show_backends(rt, layers)

            section(f"3. burst: {n} episodes created concurrently (await rt.create under asyncio.gather)")
            episodes = await create_episodes(rt, layers, n)

            section("4. one agent turn per episode (write_file + exec, rewards from test output)")
            rewards = await run_turn(episodes)

            section("5. misbehaving agents (episodes 4-7, after their turn)")
            await show_safety(episodes, secret)

            section("6. the trainer is preempted: its sandbox waits paused; the rollout continues")
            rt = await show_preemption(rt, episodes, layers, root)

            section("7. clean-up by label")
            await clean_up(rt, root)

        section("summary")
        solved = sum(1 for r in rewards if r == 1.0)
        say(f"  {n} episodes, {solved} solved, mean reward {sum(rewards) / n:.3f}, "
            f"total {(time.perf_counter() - start):.2f} s")
        say("  not yet available in this build: the fullvm backend")
        return 0
    except sandlet.Error as e:
        say(f"\nrollout: FAILED [{e.code_name}] {e.message}")
    except DemoFailure as e:
        say(f"\nrollout: FAILED (unexpected behaviour) {e}")
    finally:
        await rt.aclose()  # idempotent; on failure it destroys what is left (owned sandboxes)
    return 1


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", metavar="ROOT", help="runtime state directory (throw-away; must hold no sandboxes)")
    p.add_argument("layer", nargs="?", default=os.environ.get("SANDLET_EXAMPLE_ROOTFS"), metavar="LAYER",
                   help="busybox root filesystem directory, or a layer name/digest in ROOT's store "
                        "(default: $SANDLET_EXAMPLE_ROOTFS)")
    p.add_argument("--episodes", type=int, default=8, help="concurrent episodes, at least 8 (default: 8)")
    args = p.parse_args()
    if not args.layer:
        p.error("no LAYER given and $SANDLET_EXAMPLE_ROOTFS is not set")
    if args.episodes < 8:
        p.error("--episodes: at least 8 (episodes 4-7 run the misbehaving-agent probes)")
    return args


def main() -> int:
    args = parse_args()
    root = Path(os.path.abspath(args.root))
    # A path (has a '/') is a host directory; anything else names an EROFS layer of the runtime's store.
    from_store = "/" not in args.layer
    layer = args.layer if from_store else os.path.abspath(args.layer)
    if not from_store and not os.path.exists(os.path.join(layer, "bin/sh")):
        print(f"rollout: {layer} has no bin/sh: LAYER must be a root filesystem (busybox will do)", file=sys.stderr)
        return 2
    return asyncio.run(rollout(root, layer, from_store, args.episodes))


if __name__ == "__main__":
    sys.exit(main())
