#!/usr/bin/env python3
"""Interleaved A/B timing of whole commands, for attributing a change (sandlet-bench compares with the peer).

    bench/ab.py ROUNDS 'CMD A' 'CMD B' ['ENV=V,ENV2=W|CMD C' ...]

Each round runs every command once, in a fresh random order: a command run right after another pays for
the kernel's asynchronous clean-up of its predecessor (network namespace teardown, RCU callbacks), so a
fixed order biases the later positions (seen here: +5-10%). Prints per command the median and p90 wall
time and the median of its per-round ratios to the first command. Five untimed warm-up rounds first.
"""
import os
import random
import statistics
import subprocess
import sys
import time


def parse(spec):
    env = dict(os.environ)
    if "|" in spec:
        assignments, spec = spec.split("|", 1)
        for kv in assignments.split(","):
            key, value = kv.split("=", 1)
            env[key] = value
    return spec.split(), env


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    specs = sys.argv[2:]
    cmds = [parse(s) for s in specs]
    times = [[] for _ in cmds]
    for _ in range(5):
        for argv, env in cmds:
            subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    for _ in range(rounds):
        order = list(range(len(cmds)))
        random.shuffle(order)
        for i in order:
            argv, env = cmds[i]
            t = time.perf_counter()
            subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
            times[i].append((time.perf_counter() - t) * 1000)
    for i, spec in enumerate(specs):
        ratios = [b / a for a, b in zip(times[0], times[i])]
        print(f"{statistics.median(times[i]):7.3f} ms  p90 {sorted(times[i])[int(rounds * 0.9)]:7.3f}  "
              f"ratio to first {statistics.median(ratios):.3f}  {spec}")


if __name__ == "__main__":
    main()
