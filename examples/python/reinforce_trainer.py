"""REINFORCE on sandboxed bug-fixing tasks, with layered environments and a trainer that survives preemption.

    PYTHONPATH=<build>/python python3 examples/python/reinforce_trainer.py \\
        [--root DIR] [--job-dir DIR] [--iterations 30] [--batch 16] [--seed 0] [--preempt-at ITER] [--base DIR]

What it shows:
- Layered environments: six toy tasks (a Python function with one bug + its unittest file), each an
  environment of three store layers: the Debian base (python3), the task's workspace, and one toolkit layer
  with the agent harness (/opt/agent/apply_patch.py, run_tests.py). See bugfix_tasks.py.
- Training: a small torch policy (bag of tokens of the file it reads in the sandbox -> linear -> one of 8
  candidate patches) is trained with REINFORCE. Every episode runs in a fresh sandbox: create it, read the
  buggy file (the observation), apply the sampled patch (the action), run the tests (reward = fraction of
  tests passing), destroy it. A batch of episodes runs concurrently from one asyncio thread (AsyncRuntime).
  The mean reward rises from ~0.2 (random patches) to ~1.0 within a few dozen iterations.
- Preemption: sandboxes are `detached` (they outlive this process) with a maximum lifetime and labels
  job=<id>, iteration=<n>. After every step of every episode, the job directory's checkpoint is rewritten
  (atomically): policy, optimizer, iteration, and each in-flight episode's sandbox id, step and data.
  `--preempt-at ITER` kills this process with SIGKILL in the middle of iteration ITER's rollout (sandboxes
  created, a quarter of the patches applied, another quarter being applied, no test run yet). Running the
  same command again (without --preempt-at, or with it: it does not apply to the iteration being resumed)
  resumes: it reattaches to the interrupted iteration's sandboxes by id, asks each sandbox whether its patch
  is already applied (the checkpoint may lag behind what happened inside), continues every episode from its
  step without redoing finished steps, and finishes training. With a seed the run is deterministic: an
  interrupted and resumed run learns exactly what an uninterrupted one learns. At the end no sandbox of the
  job is left.

Needs root. --root defaults to $SANDLET_ROOT, else /var/lib/sandlet; --base to the cached Debian base of
scripts/debian-base.sh (built on first use, ~1 min).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import secrets
import signal
import sys
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

import sandlet

import bugfix_tasks as tasks

N_FEATURES = 64  # hashed bag-of-tokens buckets
CHECKPOINT = "checkpoint.pt"

# The steps of an episode, in order; the checkpoint records the last one completed.
NEW, CREATED, OBSERVED, ACTED, TESTED, DONE = "new", "created", "observed", "acted", "tested", "done"


class TrainerError(Exception):
    """Something the user has to fix (bad arguments, a job dir from another run, a harness failure)."""


# ---- the policy -----------------------------------------------------------------------------------------


def featurize(text: str) -> torch.Tensor:
    """Bag of tokens of a source file: log(1 + count) per hashed token bucket."""
    x = torch.zeros(N_FEATURES)
    for tok in tasks.tokens(text):
        x[zlib.crc32(tok.encode()) % N_FEATURES] += 1
    return torch.log1p(x)


class Policy(torch.nn.Module):
    """Observation (the buggy file's bag of tokens) -> logits over the candidate patches.

    Features are centred by a running mean of the observations seen in earlier iterations: tokens every file
    has ("def", "return", ...) then carry no weight, so credit for one task's fix does not spill over onto the
    others (without it, some seeds collapse onto a wrong patch). The mean is a buffer: checkpointed with the
    weights, updated only between iterations, so a resumed rollout sees the same policy.
    """

    def __init__(self, n_features: int, n_actions: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(n_features, n_actions)
        torch.nn.init.zeros_(self.linear.weight)  # start uniform: every patch equally likely
        torch.nn.init.zeros_(self.linear.bias)
        self.register_buffer("obs_mean", torch.zeros(n_features))
        self.register_buffer("obs_count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x - self.obs_mean)

    @torch.no_grad()
    def observe(self, x: torch.Tensor) -> None:
        for row in x:
            self.obs_count += 1
            self.obs_mean += (row - self.obs_mean) / self.obs_count


def generator(seed: int, iteration: int, stream: int) -> torch.Generator:
    """A separate RNG per (iteration, purpose): a resumed iteration draws exactly what it drew before."""
    return torch.Generator().manual_seed(seed * 1_000_003 + iteration * 7 + stream)


def sample_actions(policy: Policy, observations: List[str], seed: int, iteration: int) -> List[int]:
    with torch.no_grad():
        probs = torch.softmax(policy(torch.stack([featurize(o) for o in observations])), dim=1)
    return torch.multinomial(probs, 1, generator=generator(seed, iteration, 1)).squeeze(1).tolist()


def reinforce_update(policy: Policy, opt: torch.optim.Optimizer, episodes: List["Episode"],
                     entropy_coef: float) -> None:
    """One REINFORCE step: advantage = reward - batch mean; a small entropy bonus keeps exploring."""
    x = torch.stack([featurize(e.obs) for e in episodes])
    actions = torch.tensor([e.action for e in episodes])
    rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
    logp_all = torch.log_softmax(policy(x), dim=1)
    logp = logp_all.gather(1, actions[:, None]).squeeze(1)
    entropy = -(logp_all.exp() * logp_all).sum(1).mean()
    loss = -((rewards - rewards.mean()) * logp).mean() - entropy_coef * entropy
    opt.zero_grad()
    loss.backward()
    opt.step()
    policy.observe(x)  # after the step: this iteration's actions were sampled with the old mean


# ---- the job's checkpoint -------------------------------------------------------------------------------


@dataclass
class Episode:
    index: int
    task: str
    step: str = NEW
    sandbox: str = ""
    obs: str = ""
    action: int = -1
    reward: float = 0.0
    tests: str = ""  # "passed/total"


class Checkpoint:
    """Everything needed to resume, in one file rewritten atomically (write + rename) after every step.

    A kill loses at most the step in flight, and the sandbox tells what that step did. (No fsync per step:
    SIGKILL keeps the page cache, and a crash of the machine takes the sandboxes with it anyway.)
    """

    def __init__(self, job_dir: Path, state: Dict[str, Any]) -> None:
        self.path = job_dir / CHECKPOINT
        self.state = state
        self.episodes: List[Episode] = [Episode(**e) for e in (state["rollout"] or {}).get("episodes", [])]

    @classmethod
    def open(cls, job_dir: Path, args: argparse.Namespace) -> Tuple["Checkpoint", bool]:
        """The job's checkpoint, or a new job's; True when it existed. Refuses a job with other settings."""
        path = job_dir / CHECKPOINT
        config = {"seed": args.seed, "batch": args.batch, "root": os.path.abspath(args.root or
                  os.environ.get("SANDLET_ROOT") or "/var/lib/sandlet"), "lr": args.lr}
        if not path.exists():
            job_dir.mkdir(parents=True, exist_ok=True)
            state = {"format": 1, "job": f"reinforce-{secrets.token_hex(4)}", "config": config, "iteration": 0,
                     "history": [], "policy": None, "optimizer": None, "rollout": None}
            return cls(job_dir, state), False
        try:
            state = torch.load(path, weights_only=False)
        except Exception as e:  # noqa: BLE001 - any unreadable file means the same to the user
            raise TrainerError(f"{path}: not a readable checkpoint ({e}); use another --job-dir")
        for key, value in config.items():
            if state["config"][key] != value:
                raise TrainerError(f"{path}: this job was started with {key}={state['config'][key]!r}, "
                                   f"not {value!r}; pass the same settings or a new --job-dir")
        return cls(job_dir, state), True

    @property
    def job(self) -> str:
        return self.state["job"]

    @property
    def iteration(self) -> int:
        return self.state["iteration"]

    @property
    def history(self) -> List[float]:
        return self.state["history"]

    @property
    def rollout_iteration(self) -> Optional[int]:
        return self.state["rollout"]["iteration"] if self.state["rollout"] else None

    def restore(self, policy: Policy, opt: torch.optim.Optimizer) -> None:
        if self.state["policy"] is not None:
            policy.load_state_dict(self.state["policy"])
            opt.load_state_dict(self.state["optimizer"])

    def begin_rollout(self, iteration: int, episodes: List[Episode]) -> None:
        self.episodes = episodes
        self.state["rollout"] = {"iteration": iteration}
        self.save()

    def end_iteration(self, policy: Policy, opt: torch.optim.Optimizer, mean_reward: float) -> None:
        """The update and the end of the rollout land in one atomic write: a kill never applies it twice."""
        self.state["policy"] = policy.state_dict()
        self.state["optimizer"] = opt.state_dict()
        self.state["history"].append(mean_reward)
        self.state["iteration"] += 1
        self.state["rollout"] = None
        self.episodes = []
        self.save()

    def save(self) -> None:
        if self.state["rollout"] is not None:
            self.state["rollout"]["episodes"] = [asdict(e) for e in self.episodes]
        tmp = self.path.with_suffix(".tmp")
        torch.save(self.state, tmp)
        os.replace(tmp, self.path)


# ---- one iteration's rollout ----------------------------------------------------------------------------


class Rollout:
    """Drives every episode of one iteration through its steps; each phase runs all episodes concurrently,
    and each episode's step is checkpointed as soon as it completes."""

    def __init__(self, rt: sandlet.AsyncRuntime, ckpt: Checkpoint, policy: Policy, envs: Dict[str, str],
                 args: argparse.Namespace, iteration: int, handles: Dict[int, sandlet.AsyncSandbox],
                 preempt: bool) -> None:
        self.rt, self.ckpt, self.policy, self.envs, self.args = rt, ckpt, policy, envs, args
        self.iteration = iteration
        self.episodes = ckpt.episodes
        self.handles = handles  # episode index -> sandbox handle (made here or reattached)
        self.preempt = preempt
        self.applied = 0

    async def run(self) -> None:
        await self._phase(NEW, self._create)
        await self._phase(CREATED, self._observe)
        self._choose_actions()
        if self.preempt:
            await self._act_then_die()
        await self._phase(OBSERVED, self._act)
        await self._phase(ACTED, self._test)
        await self._phase(TESTED, self._destroy)

    async def _phase(self, step: str, fn: Any) -> None:
        await asyncio.gather(*(fn(e) for e in self.episodes if e.step == step))

    def _advance(self, e: Episode, step: str) -> None:
        e.step = step
        self.ckpt.save()

    async def _create(self, e: Episode) -> None:
        sb = await self.rt.create(
            environment=self.envs[e.task], lifetime="detached", max_lifetime_s=self.args.sandbox_lifetime,
            limits={"memory": 256 << 20, "pids": 64},
            labels={"job": self.ckpt.job, "iteration": str(self.iteration), "episode": str(e.index),
                    "task": e.task})
        self.handles[e.index] = sb
        e.sandbox = sb.id
        self._advance(e, CREATED)

    async def _observe(self, e: Episode) -> None:
        e.obs = (await self.handles[e.index].read_file(f"{tasks.REPO_DIR}/{tasks.SOURCE_FILE}")).decode()
        self._advance(e, OBSERVED)

    def _choose_actions(self) -> None:
        """One batched forward pass (as an LLM policy would batch its episodes); a resumed rollout has its
        actions already."""
        todo = [e for e in self.episodes if e.action < 0]
        if todo:
            for e, a in zip(todo, sample_actions(self.policy, [e.obs for e in todo], self.args.seed, self.iteration)):
                e.action = a
            self.ckpt.save()

    async def _act(self, e: Episode) -> None:
        r = await self.handles[e.index].exec(tasks.APPLY_PATCH + ["-"], stdin=tasks.patch_json(e.action), timeout=30)
        if not r.ok:
            raise TrainerError(f"episode {e.index}: apply_patch failed in sandbox {e.sandbox}: "
                               f"{r.stderr_text.strip() or r}")
        self._advance(e, ACTED)
        self.applied += 1

    async def _act_then_die(self) -> None:
        """--preempt-at: starts the patches of the first half of the batch (the second half's actions are
        "still being generated") and SIGKILLs this process once a quarter of the batch is patched, while the
        rest of the first half is in flight; no test has run. The sandboxes and the checkpoint stay."""
        first_half = [e for e in self.episodes if e.step == OBSERVED][: math.ceil(len(self.episodes) / 2)]
        quarter = math.ceil(len(first_half) / 2)

        async def act_and_maybe_die(e: Episode) -> None:
            await self._act(e)
            if self.applied == quarter:
                say(f"iter {self.iteration:3d}  PREEMPTED: SIGKILL with {self.applied}/{len(self.episodes)} patches "
                    f"applied, {len(first_half) - self.applied} in flight, no test run (the checkpoint and the "
                    "detached sandboxes stay)")
                os.kill(os.getpid(), signal.SIGKILL)

        await asyncio.gather(*(act_and_maybe_die(e) for e in first_half))

    async def _test(self, e: Episode) -> None:
        r = await self.handles[e.index].exec(tasks.RUN_TESTS, timeout=30)
        passed, total = tasks.parse_verdict(r.stdout_text) or (0, 0)  # no verdict (e.g. a timeout): reward 0
        e.reward = passed / total if total else 0.0
        e.tests = f"{passed}/{total}"
        self._advance(e, TESTED)

    async def _destroy(self, e: Episode) -> None:
        sb = self.handles.pop(e.index, None)
        if sb is not None:
            try:
                await sb.destroy()
            except (sandlet.NotFound, sandlet.FailedPrecondition):  # gone already (e.g. its max lifetime passed)
                pass
            sb.close()
        self._advance(e, DONE)


# ---- resuming an interrupted rollout --------------------------------------------------------------------


async def patch_status(sb: sandlet.AsyncSandbox) -> Tuple[bool, Optional[int]]:
    """Asks the harness inside whether a patch is applied (the checkpoint may be one step behind)."""
    r = await sb.exec(tasks.APPLY_PATCH + ["--status"], timeout=30)
    if not r.ok:
        raise TrainerError(f"apply_patch --status failed in sandbox {sb.id}: {r.stderr_text.strip() or r}")
    st = json.loads(r.stdout_text)
    return bool(st["applied"]), st["id"]


async def reattach(rt: sandlet.AsyncRuntime, ckpt: Checkpoint) -> Tuple[Dict[int, sandlet.AsyncSandbox], str]:
    """Handles on the interrupted iteration's sandboxes, each episode's step checked against its sandbox.
    Returns the handles and a one-line report."""
    it, episodes = ckpt.rollout_iteration, ckpt.episodes
    listed = {s["id"]: s for s in await rt.list(f"job={ckpt.job}")}
    handles: Dict[int, sandlet.AsyncSandbox] = {}
    adopted = orphans = lost = 0

    # A sandbox the checkpoint never heard of was created just before the kill: adopt it if its episode
    # still waits for one, else destroy it (no leak from an interrupted create).
    known = {e.sandbox for e in episodes if e.sandbox}
    for sid, s in listed.items():
        if sid in known:
            continue
        labels = s.get("spec", {}).get("labels", {})
        e = episodes[int(labels["episode"])] if labels.get("iteration") == str(it) else None
        if e is not None and e.step == NEW:
            e.sandbox, e.step = sid, CREATED
            adopted += 1
        else:
            await (await rt.attach(sid)).destroy()
            orphans += 1

    for e in episodes:
        if e.step in (NEW, DONE):
            continue
        if e.sandbox not in listed:
            lost += 1  # expired or removed: redo the episode (same task and action), or just finish it
            e.sandbox, e.step = "", (DONE if e.step == TESTED else NEW)
            continue
        handles[e.index] = await rt.attach(e.sandbox)

    applied = late = 0
    checks = [e for e in episodes if e.index in handles and e.step in (CREATED, OBSERVED, ACTED)]
    for e, (is_applied, pid) in zip(checks, await asyncio.gather(*(patch_status(handles[e.index]) for e in checks))):
        if is_applied and pid != e.action:
            raise TrainerError(f"sandbox {e.sandbox} has patch {pid} applied, the checkpoint says {e.action}")
        if is_applied:
            applied += 1
            if e.step != ACTED:
                late += 1
                e.step = ACTED
        elif e.step == ACTED:  # recorded but not there: apply it (again); the harness is idempotent
            e.step = OBSERVED
    ckpt.save()

    report = (f"resumed at iteration {it}: reattached {len(handles)} sandboxes, {applied} already had their "
              f"patch applied")
    details = []
    if late:
        details.append(f"{late} of them applied inside but not yet in the checkpoint")
    if adopted:
        details.append(f"{adopted} created but not yet in the checkpoint, adopted")
    if orphans:
        details.append(f"{orphans} stray sandbox(es) destroyed")
    if lost:
        details.append(f"{lost} lost (expired?), redone")
    done = sum(1 for e in episodes if e.step in (TESTED, DONE))
    details.append(f"{done} episode(s) had their reward already")
    return handles, report + " (" + "; ".join(details) + ")"


# ---- training -------------------------------------------------------------------------------------------


def say(text: str) -> None:
    print(text, flush=True)  # flushed: a SIGKILL must not swallow what was printed


def new_episodes(seed: int, iteration: int, batch: int) -> List[Episode]:
    picks = torch.randint(len(tasks.TASKS), (batch,), generator=generator(seed, iteration, 0)).tolist()
    return [Episode(index=i, task=tasks.TASKS[k].name) for i, k in enumerate(picks)]


def bar(value: float, width: int = 20) -> str:
    n = round(value * width)
    return "|" + "#" * n + " " * (width - n) + "|"


def report_iteration(it: int, total: int, episodes: List[Episode], seconds: float, resumed: bool) -> float:
    mean = sum(e.reward for e in episodes) / len(episodes)
    solved = sum(1 for e in episodes if e.reward == 1.0)
    say(f"iter {it:3d}/{total}  mean reward {mean:.3f}  solved {solved:2d}/{len(episodes)}  {bar(mean)}  "
        f"{seconds:5.2f} s{'  (resumed)' if resumed else ''}")
    return mean


def describe_policy(policy: Policy) -> None:
    with torch.no_grad():
        for t in tasks.TASKS:
            p = torch.softmax(policy(featurize(t.source)[None]), dim=1)[0]
            a = int(p.argmax())
            say(f"  {t.name:<8} -> patch {a} {tasks.PATCHES[a].name:<24} p={float(p[a]):.2f}")


async def clean_up(rt: sandlet.AsyncRuntime, job: str) -> None:
    """Whatever of the job still exists goes (normally nothing: each episode destroys its sandbox)."""
    left = await rt.list(f"job={job}")
    for s in left:
        sb = await rt.attach(s["id"])
        await sb.destroy()
        sb.close()
    remaining = await rt.list(f"job={job}")
    if remaining:
        raise TrainerError(f"{len(remaining)} sandbox(es) of job {job} still listed after clean-up")
    say(f"clean-up: {len(left)} stray sandbox(es) destroyed; list(label='job={job}') -> [] (nothing of the job left)")


async def train(args: argparse.Namespace, base: str) -> int:
    job_dir = Path(args.job_dir).resolve()
    ckpt, existed = Checkpoint.open(job_dir, args)
    if existed and ckpt.iteration >= args.iterations and ckpt.rollout_iteration is None:
        say(f"job {ckpt.job} in {job_dir} finished already ({ckpt.iteration} iterations); reward curve: "
            + " ".join(f"{r:.2f}" for r in ckpt.history))
        return 0
    say(f"job {ckpt.job} ({'resuming' if existed else 'new'}) in {job_dir}: {args.iterations} iterations x "
        f"{args.batch} episodes, seed {args.seed}, {len(tasks.TASKS)} tasks, {len(tasks.PATCHES)} candidate patches")

    torch.manual_seed(args.seed)
    policy = Policy(N_FEATURES, len(tasks.PATCHES))
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    ckpt.restore(policy, opt)

    rt = sandlet.AsyncRuntime(args.root)
    try:
        say(f"runtime at {rt.root}; layers and environments:")
        with tempfile.TemporaryDirectory(prefix="sandlet-reinforce.") as scratch:
            envs = tasks.prepare_environments(rt.sync, base, Path(scratch), log=say,
                                              toolkit_version=args.toolkit_version)
        if ckpt.history:
            say("reward so far: " + " ".join(f"{r:.2f}" for r in ckpt.history))

        for it in range(ckpt.iteration, args.iterations):
            t0 = time.perf_counter()
            resumed = ckpt.rollout_iteration == it
            if resumed:
                handles, report = await reattach(rt, ckpt)
                say(report)
            else:
                ckpt.begin_rollout(it, new_episodes(args.seed, it, args.batch))
                handles = {}
            preempt = args.preempt_at == it and not resumed
            await Rollout(rt, ckpt, policy, envs, args, it, handles, preempt).run()
            episodes = ckpt.episodes
            reinforce_update(policy, opt, episodes, args.entropy)
            mean = report_iteration(it, args.iterations, episodes, time.perf_counter() - t0, resumed)
            ckpt.end_iteration(policy, opt, mean)

        await clean_up(rt, ckpt.job)
    finally:
        await rt.aclose()
    say("reward curve: " + " ".join(f"{r:.2f}" for r in ckpt.history))
    say("learned policy (most likely patch per task):")
    describe_policy(policy)
    return 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", help="runtime state directory (default: $SANDLET_ROOT, else /var/lib/sandlet)")
    p.add_argument("--job-dir", default=os.path.join(tempfile.gettempdir(), "sandlet-reinforce-job"),
                   help="where the checkpoint lives; run again with the same one to resume (default: %(default)s)")
    p.add_argument("--iterations", type=int, default=30, help="training iterations (default: %(default)s)")
    p.add_argument("--batch", type=int, default=16, help="episodes (sandboxes) per iteration (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed: same seed, same run (default: %(default)s)")
    p.add_argument("--lr", type=float, default=0.05, help="Adam learning rate (default: %(default)s)")
    p.add_argument("--entropy", type=float, default=0.01, help="entropy bonus (default: %(default)s)")
    p.add_argument("--preempt-at", type=int, metavar="ITER",
                   help="SIGKILL this process in the middle of iteration ITER's rollout (a preemption)")
    p.add_argument("--sandbox-lifetime", type=float, default=900,
                   help="max lifetime of each sandbox in s: bounds what a job that never resumes leaves "
                        "behind (default: %(default)s)")
    p.add_argument("--base", help="base root filesystem with python3 (default: scripts/debian-base.sh --print-path)")
    p.add_argument("--toolkit-version", default=tasks.TOOLKIT_VERSION,
                   help="version stamp of the toolkit layer: a new one re-imports that layer only and gives each "
                        "environment a new version (default: %(default)s)")
    args = p.parse_args()
    if args.iterations < 1 or args.batch < 2:
        p.error("--iterations must be >= 1 and --batch >= 2 (the baseline is the batch mean)")
    if args.preempt_at is not None and not 0 <= args.preempt_at < args.iterations:
        p.error(f"--preempt-at must be an iteration in [0, {args.iterations})")
    return args


def main() -> int:
    args = parse_args()
    torch.set_num_threads(1)  # determinism, and the sandboxes need the cores more than this tiny model
    base = tasks.check_base(args.base or tasks.default_base())
    # Whatever stops the run, the checkpoint is current and the sandboxes are detached: the same command resumes.
    resume_hint = (f"the job in {args.job_dir} resumes when this command is run again (its sandboxes live "
                   f"for at most {args.sandbox_lifetime:.0f} s)")
    try:
        return asyncio.run(train(args, base))
    except TrainerError as e:
        print(f"reinforce_trainer: {e}", file=sys.stderr)
    except sandlet.Error as e:
        print(f"reinforce_trainer: sandlet: {e}; {resume_hint}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"reinforce_trainer: interrupted; {resume_hint}", file=sys.stderr)
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
