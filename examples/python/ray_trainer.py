#!/usr/bin/env python3
"""A policy-gradient loop whose rollouts run across a Ray cluster, one sandlet sandbox per episode.

Each iteration the driver (the "trainer") samples one action per episode from a softmax policy over candidate
fixes of a buggy task, and a Ray task per episode applies the chosen fix in its sandbox and runs the task's
test there; the test's verdict is the reward, and a REINFORCE step moves the policy towards the fix that passes.
Sandboxes are placed by sandlet.ray on the nodes with room and labelled with the job, so a restarted driver
could find them (`Cluster().list({"job": ...})`); the job's sandboxes are paused while the trainer "updates"
(a stand-in for a GPU step the rollouts must not compete with) and resumed after.

Run against a cluster whose nodes advertise the "sandlet" resource (docs/RAY.md):
    python examples/python/ray_trainer.py --address HEAD:6379 --layer /path/to/rootfs [--iterations 5]
"""
from __future__ import annotations

import argparse
import collections
import math
import random
from typing import Dict, List

import ray

import sandlet.ray as sray

# The task: `add` is broken; exactly one candidate fix makes the test pass.
BUGGY = 'add() { echo $(( $1 - $2 )); }\n'
FIXES = ['add() { echo $(( $1 * $2 )); }\n', 'add() { echo $(( $1 + $2 )); }\n', 'add() { echo $(( $2 - $1 )); }\n']
TEST = '. /task/lib.sh; [ "$(add 2 3)" = 5 ] && [ "$(add 10 -4)" = 6 ]'


@ray.remote(num_cpus=0)
def episode(sb: sray.ClusterSandbox, action: int) -> float:
    """One rollout step in its sandbox: apply the chosen fix, run the test, reward 1 when it passes."""
    sb.write_file("/task/lib.sh", FIXES[action])
    return 1.0 if sb.exec(["sh", "-c", TEST], timeout=30).exit_code == 0 else 0.0


def softmax(logits: List[float]) -> List[float]:
    m = max(logits)
    e = [math.exp(x - m) for x in logits]
    return [x / sum(e) for x in e]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", default="auto")
    ap.add_argument("--layer", required=True, help="a layer (or rootfs directory) with a POSIX shell")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--job", default="ray-trainer")
    a = ap.parse_args()
    ray.init(address=a.address, log_to_driver=False)
    cluster = sray.Cluster()
    rng = random.Random(7)
    logits = [0.0] * len(FIXES)
    sandboxes = [cluster.create(layers=[a.layer], labels={"job": a.job}, limits={"memory": "128M"})
                 for _ in range(a.episodes)]
    try:
        for sb in sandboxes:
            sb.write_file("/task/lib.sh", BUGGY)
        print("sandboxes per node:", dict(collections.Counter(sb.node[-8:] for sb in sandboxes)))
        for it in range(a.iterations):
            probs = softmax(logits)
            actions = [rng.choices(range(len(FIXES)), probs)[0] for _ in sandboxes]
            rewards = ray.get([episode.remote(sb, act) for sb, act in zip(sandboxes, actions)])
            cluster.pause({"job": a.job})  # the update runs alone, the job's sandboxes frozen on every node
            baseline = sum(rewards) / len(rewards)
            grads: Dict[int, float] = collections.defaultdict(float)
            for act, r in zip(actions, rewards):
                for k in range(len(FIXES)):
                    grads[k] += (r - baseline) * ((1.0 if k == act else 0.0) - probs[k])
            logits = [l + 2.0 * grads[k] / len(rewards) for k, l in enumerate(logits)]
            cluster.resume({"job": a.job})
            print(f"iteration {it}: mean reward {baseline:.2f}, p(correct fix) {softmax(logits)[1]:.2f}")
    finally:
        cluster.destroy({"job": a.job})
        ray.shutdown()


if __name__ == "__main__":
    main()
