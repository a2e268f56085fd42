#!/usr/bin/env bash
# The sandlet demo: a miniature agentic rollout through the C++ API (examples/rollout.cpp), a trajectory
# forked at step k into children that diverge (examples/fork.cpp), then the same runtime from the shell with
# the `sandlet` CLI (layered environments, a build from a recipe, a registry image, snapshot and fork, layer export), then from
# Python: a PyTorch REINFORCE trainer whose episodes run in layered-environment sandboxes, killed mid-rollout
# and resumed (examples/python/reinforce_trainer.py).
# Expects a finished build (`make demo` builds first).
#
# Environment: BUILD_DIR    the CMake build directory (default: <repo>/build)
#              PYTHON       the interpreter with torch (default: <repo>/.venv/bin/python, made by setup.sh)
#              SANDLET_ROOT runtime root to use and keep; it must hold no sandboxes yet (default: a
#                           throw-away one, removed on exit)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath -m "${BUILD_DIR:-$repo/build}")
rollout=$build/example-rollout-cpp
fork=$build/example-fork-cpp
cli=$build/sandlet
layer=$build/test-rootfs

die() { echo "demo.sh: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "must run as root (the runtime needs it); try: sudo $0"
for f in "$rollout" "$fork" "$cli" "$layer/bin/sh"; do
  [[ -e $f ]] || die "missing $f: build first (make build, or set BUILD_DIR)"
done

# Everything the demo creates on the host lives under one scratch directory (the example's task layer too,
# through TMPDIR), so that the trap can remove it even after a crash or Ctrl-C.
scratch=$(mktemp -d /tmp/sandlet-demo.XXXXXX)
root=${SANDLET_ROOT:-$scratch/root}
cleanup() {
  # A throw-away root holds only the demo's sandboxes: destroy what may still run there. In any root,
  # sweep what the demo's process left behind (gc never touches a live sandbox of a live process).
  if [[ $root == "$scratch/root" ]]; then
    "$cli" --root "$root" ps -q 2>/dev/null | xargs -r "$cli" --root "$root" rm >/dev/null 2>&1 || true
  fi
  "$cli" --root "$root" gc >/dev/null 2>&1 || true
  [[ -d $scratch/node-lazy ]] && "$cli" --root "$scratch/node-lazy" gc >/dev/null 2>&1
  stop_nginx
  rm -rf --one-file-system -- "$scratch"
}
stop_nginx() {
  [[ -f $scratch/nginx/nginx.pid ]] && kill "$(cat "$scratch/nginx/nginx.pid")" 2>/dev/null
  [[ -f $scratch/registry.pid ]] && kill "$(cat "$scratch/registry.pid")" 2>/dev/null
  true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export TMPDIR=$scratch
export SANDLET_ROOT=$root  # the CLI calls below use it too

echo "demo: runtime root $root"
start_us=${EPOCHREALTIME/./}
# The episodes' base layer: busybox, imported once as a content-addressed EROFS layer.
"$cli" --root "$root" layer import "$layer" --role base --name busybox >/dev/null
"$rollout" "$root" busybox
echo
echo "== 8. fork at step k: one trajectory, one snapshot, children that diverge (Sandbox::fork)"
"$fork" "$root" busybox

# ---- the same runtime from the shell ------------------------------------------------------------------
# Prints each command before running it, like a terminal session (the CLI is found on PATH).
PATH=$build:$PATH
show() {
  local shown=() a
  for a in "$@"; do  # quote what a shell would need quoted (our arguments hold no single quotes)
    if [[ $a =~ ^[[:alnum:]_./:=@%+,-]+$ ]]; then shown+=("$a"); else shown+=("'$a'"); fi
  done
  echo "  \$ ${shown[*]}"
  "$@" 2>&1 | sed 's/^/    /'
}

echo
echo "== 9. the CLI (same library, same root)"
echo "  -- layered environments: a cached Debian bookworm minbase (python3, git, adduser, procps) as the base layer,"
echo "     a task repository as the workspace layer, composed by name"
debian=$("$repo/scripts/debian-base.sh" --print-path)
ws=$scratch/workspace
mkdir -p "$ws/work/task" && printf 'def add(a, b):\n    return a + b\n' >"$ws/work/task/calc.py"
mkdir -p "$ws/work/task/tests" && printf 'assert add(2, 3) == 5\n' >"$ws/work/task/tests/answers.py"
show sandlet layer import "$debian" --role base --name debian-bookworm
show sandlet layer import "$ws" --role workspace --name task-42
show sandlet env create swe-task --layer debian-bookworm --layer task-42 --workdir /work/task --env PYTHONDONTWRITEBYTECODE=1
show sandlet layer ls
show sandlet run --env swe-task -- sh -c 'python3 -c "import calc; print(\"add(2, 3) =\", calc.add(2, 3))"; git --version'

echo "  -- a one-shot run (sandlet_run): the sandbox's init starts the command with the CLI's own stdio"
show sandlet run --layer "$layer" --hostname cli-demo --memory 64M -- sh -c 'echo hello from $(hostname)'
echo "  -- the same environment in a microVM (--backend microvm): a kernel of its own (the layers become disks)"
if sandlet doctor 2>/dev/null | grep -q '^  microvm: available'; then
  show sandlet run --backend microvm --env swe-task -- sh -c 'echo "guest kernel $(uname -r), host kernel '"$(uname -r)"'"; python3 --version'
else
  echo "    (skipped: $(sandlet doctor 2>/dev/null | grep '^  microvm:' | sed 's/^  microvm: //'))"
fi

echo "  -- a call (FnCall): a short stateless command in a pooled container, stdin in, output and exit status out"
echo '  $ echo "print(sum(range(10)))" | sandlet call --env swe-task -- python3 -'
echo "print(sum(range(10)))" | sandlet call --env swe-task -- python3 - 2>&1 | sed 's/^/    /'
echo "  -- platform metrics as Prometheus text (sandlet metrics --listen 127.0.0.1:PORT serves the same)"
echo '  $ sandlet metrics | grep -E "^sandlet_(sandboxes|creates_total)" | head -4'
sandlet metrics | grep -E '^sandlet_(sandboxes|creates_total)' | head -4 | sed 's/^/    /'

echo "  -- an environment built from a recipe (a Dockerfile subset): each step a cached layer"
cd "$scratch"  # the commands shown use short relative paths
mkdir -p greeter
printf '#!/bin/sh\necho "hello from $APP in $PWD, $(cat built)"\n' >greeter/hello.sh
printf '%s\n' 'FROM busybox' 'ENV APP=greeter' 'WORKDIR /app' 'COPY hello.sh .' \
  "RUN chmod 755 hello.sh && date -u '+built %F %T UTC' > built" >greeter.recipe
show cat greeter.recipe
show sandlet build -f greeter.recipe -t greeter greeter
show sandlet run --environment greeter -- ./hello.sh
echo "  # the same build again: every layer step comes from the cache (no sandbox is made, the RUN does not"
echo "  # run again: same time), and the environment gets a new version"
show sandlet build -f greeter.recipe -t greeter greeter
show sandlet run --environment greeter@2 -- ./hello.sh

echo "  -- a task image from a registry (docs/REGISTRIES.md): a local OCI registry (Debian's docker-registry)"
echo "     holding a task image; the spec names it, and the first use pulls it (layers checked by digest)"
registry_demo() {
  local port=$(( 20000 + RANDOM % 20000 ))
  printf 'version: 0.1\nstorage: {filesystem: {rootdirectory: %s/registry}}\nhttp: {addr: "127.0.0.1:%s"}\n' \
    "$scratch" "$port" >"$scratch/registry.yml"
  timeout 300 docker-registry serve "$scratch/registry.yml" >"$scratch/registry.log" 2>&1 &
  echo $! >"$scratch/registry.pid"
  "${PYTHON:-$repo/.venv/bin/python}" - "$scratch/task-image" "$layer" <<'PY' || return 1
import sys; sys.path.insert(0, "test/support")
from oci_layout import write_oci_layout
write_oci_layout(sys.argv[1], [sys.argv[2], {"task/README": "fix the failing test in /task\n"}],
                 config={"WorkingDir": "/task", "Env": ["TASK=demo-1"]})
PY
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.1; done
  # skopeo keeps a blob-info cache under /var/lib/containers as root: a private tmpfs there, so nothing stays.
  unshare -m --propagation private sh -c 'mount -t tmpfs demo /var/lib &&
    skopeo copy -q --dest-tls-verify=false "$0" "$1"' "oci:$scratch/task-image:latest" \
    "docker://127.0.0.1:$port/tasks/demo:1" || return 1
  export SANDLET_REGISTRIES="{\"insecure\": [\"127.0.0.1:$port\"]}"
  show sandlet run --environment "127.0.0.1:$port/tasks/demo:1" -- sh -c 'echo "$TASK in $PWD: $(cat README)"'
  show sandlet layer pull "docker://127.0.0.1:$port/tasks/demo:1"
  unset SANDLET_REGISTRIES
}
if command -v docker-registry >/dev/null && command -v skopeo >/dev/null; then
  (cd "$repo" && registry_demo) || echo "    (the registry step failed; see $scratch/registry.log)"
  kill "$(cat "$scratch/registry.pid")" 2>/dev/null || true
else
  echo "    (skipped: docker-registry or skopeo is missing; scripts/setup.sh installs them)"
fi

echo "  -- snapshot and fork from the shell: a sandbox's state at step k, then 3 children carry on from it"
echo '  $ id=$(sandlet create --environment greeter --hostname cli --label task=cli --max-lifetime 60)'
id=$(sandlet create --environment greeter --hostname cli --label task=cli --max-lifetime 60)
show sandlet exec --timeout 5 "$id" -- sh -c 'echo k=3 > state; ps'
show sandlet snapshot "$id"
echo "  \$ children=\$(sandlet fork -n 3 $id)"
children=$(sandlet fork -n 3 "$id")
for c in $children; do
  show sandlet exec "$c" -- sh -c 'echo "$(hostname) seed=$SANDLET_SEED $(cat state)"'
done
show sandlet ps --label task=cli
show sandlet rm "$id" $children
for c in "$id" $children; do
  ! sandlet ps -q | grep -qx "$c" || die "sandbox $c is still listed after rm"
done

echo "  -- whole directories in and out, as docker cp moves them (docs/COPY.md): a task directory in, the"
echo "     trial's outputs back out (modes, times, links kept; nothing written outside the destination)"
mkdir -p trial/tests && printf '#!/bin/sh\nmkdir -p /work/out && echo "score: 1.0" > /work/out/result.txt\n' >trial/run.sh
chmod 755 trial/run.sh && printf 'check\n' >trial/tests/spec.txt && ln -sf run.sh trial/entrypoint
echo '  $ id=$(sandlet create --environment greeter --label task=copy --max-lifetime 60)'
id=$(sandlet create --environment greeter --label task=copy --max-lifetime 60)
show sandlet cp trial "$id:/work"
show sandlet exec "$id" -- sh -c '/work/entrypoint && ls -l /work | tail -n +2'
show sandlet cp "$id:/work/out" results
show sh -c 'cat results/result.txt; sandlet cp '"$id"':/work - | tar -tf - | sort | head -4'
show sandlet rm "$id"

echo "  -- interactive shells (docs/SHELLS.md): a terminal in the sandbox (sandlet exec -t / -it, as docker exec),"
echo "     and a shell session that keeps cd, variables and jobs across an agent's tool calls, with each"
echo "     command's own stdout, stderr and exit code (no prompt, no echo to strip)"
echo '  $ id=$(sandlet create --environment greeter --label task=shell --max-lifetime 60)'
id=$(sandlet create --environment greeter --label task=shell --max-lifetime 60)
show sandlet exec -t "$id" -- sh -c 'echo "on $(tty), $(stty size) rows x columns"'
py=${PYTHON:-$repo/.venv/bin/python}
if [[ -x $py && -d $build/python/sandlet ]]; then
  echo "  \$ python: with sb.session() as shell: shell.run(...)"
  PYTHONPATH=$build/python "$py" - "$root" "$id" <<'PY' | sed 's/^/    /'
import sys, sandlet
with sandlet.Runtime(sys.argv[1]) as rt, rt.attach(sys.argv[2]) as sb, sb.session() as shell:
    for cmd in ["cd /tmp && export STEP=1", "echo step $STEP in $(pwd); ls /missing", "exit 3"]:
        r = shell.run(cmd, timeout=10)
        print(f"{cmd!r:40} -> exit {r.exit_code}, stdout {r.stdout_text!r}, stderr {r.stderr_text!r}")
    print("session alive after exit:", shell.alive)
PY
fi
show sandlet rm "$id"

echo "  -- the security boundary (docs/POLICY.md, NETWORK.md, AUDIT.md): file rules that bind root inside, the"
echo "     seccomp profile with a named relaxation, a protected toolkit for the harness's own commands, an"
echo "     egress allowlist enforced in the kernel (the host, link-local and metadata addresses only by exact"
echo "     rules; socket families by list: no vsock), and the audit log kept outside the sandbox"
cat >policy.json <<JSON
{"policy": {"files": [{"path": "/work/task/tests", "access": "hidden"}, {"path": "/etc", "access": "read-only"}],
            "seccomp": {"allow": ["ptrace"]}},
 "toolkit": "$layer"}
JSON
show cat policy.json
echo '  $ id=$(sandlet create --env swe-task --spec policy.json --allow tcp:10.0.0.0/8:443 --allow tcp:pypi-mirror.internal:443 --dns 10.0.0.53 --label task=secure --max-lifetime 60)'
id=$(sandlet create --env swe-task --spec policy.json --allow tcp:10.0.0.0/8:443 --allow tcp:pypi-mirror.internal:443 \
       --dns 10.0.0.53 --label task=secure --max-lifetime 60)
show sandlet exec "$id" -- sh -c 'echo "hidden answers: $(ls -A /work/task/tests | wc -l) files"; touch /etc/x || true
  printf "#!/bin/dash\necho injected\n" > /bin/sh.new && chmod 755 /bin/sh.new && mv /bin/sh.new /bin/sh && echo overwrote /bin/sh'
show sandlet exec "$id" -- sh -c 'echo harness'
show sandlet exec --toolkit "$id" -- sh -c 'echo "harness, from the read-only toolkit"'
show sandlet exec "$id" -- python3 -c 'import socket
for addr in [("10.1.2.3", 80), ("192.0.2.1", 443), ("169.254.169.254", 80)]:
    try: socket.create_connection(addr, 1)
    except OSError as e: print(addr, "->", e.strerror)
try: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
except OSError as e: print("an AF_VSOCK socket ->", e.strerror)'
echo "  (names resolve through the sandbox's own resolver, which answers only the names of its rules:"
echo "   a name in no rule is refused at once, and no resolver outside is reachable directly)"
show sandlet exec "$id" -- python3 -c 'import socket
print(open("/etc/resolv.conf").read().splitlines()[-1])
try: socket.getaddrinfo("exfil.example.com", 443)
except OSError as e: print("exfil.example.com ->", e.strerror)
try: socket.create_connection(("10.0.0.53", 53), 1)
except OSError as e: print("10.0.0.53:53 ->", e.strerror)'
show sandlet net stats "$id"
show sandlet exec "$id" -- sh -c 'mount -t tmpfs none /mnt 2>&1 || true'
echo "  \$ sandlet policy stats $id   # what the seccomp profile refused, by system call"
sandlet policy stats "$id" | python3 -c 'import json, sys
s = json.load(sys.stdin)["seccomp"]
print("    denied:", s["denied"], "by system call:", s["by_syscall"])'
echo "  \$ sandlet audit $id | cut -c1-150"
sandlet audit "$id" | cut -c1-150 | sed 's/^/    /'
show sandlet rm "$id"

echo "  -- a layer as one file, imported into another store (here a second root stands for another node)"
show sandlet layer export task-42 -o task-42.tar
show sandlet --root "$scratch/node2" layer import task-42.tar
cd "$repo"

# ---- lazy layers: a fresh node runs the rollout on a layer it never downloaded --------------------------
# A local HTTP store (Debian's nginx on loopback) serves a directory the Debian base is pushed to; a fresh
# root pulls it lazily (metadata only) and runs episodes on it: the node's loader fetches each chunk on
# first read, checked against its digest.
if [[ -n ${debian:-} && -x /usr/sbin/nginx ]]; then
  echo
  echo "== 10. lazy layers: push the Debian base to an HTTP store, pull it lazily into a fresh node, run on it"
  store=$scratch/store
  mkdir -p "$store" "$scratch/nginx"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat >"$scratch/nginx/nginx.conf" <<NGINX
user root;
worker_processes 1;
error_log $scratch/nginx/error.log;
pid $scratch/nginx/nginx.pid;
events { worker_connections 256; }
http {
  access_log off;
  server { listen 127.0.0.1:$port; root $store; }
}
NGINX
  /usr/sbin/nginx -p "$scratch/nginx" -c "$scratch/nginx/nginx.conf" -g 'daemon on;'
  node=$scratch/node-lazy
  "$cli" --root "$root" layer import "$debian" --role base --name debian-base >/dev/null 2>&1
  show sandlet layer push debian-base --store "$store"
  show sandlet --root "$node" layer pull debian-base --store "http://127.0.0.1:$port" --lazy
  for episode in 1 2 3; do
    show sandlet --root "$node" run --layer debian-base -- python3 -c \
      "import random; random.seed($episode); print(\"episode\", $episode, \"reward\", round(random.random(), 3))"
  done
  show sandlet --root "$node" loader status
  "$cli" --root "$node" loader status --json | python3 -c '
import json, sys
for l in json.load(sys.stdin)["layers"]:
    got, size = l["fetched_bytes"], max(1, l["image_bytes"])
    print(f"  the rollout read {got / 1e6:.1f} MB of a {size / 1e6:.1f} MB image: {100 * got / size:.1f}% of its bytes fetched")'
  "$cli" --root "$node" gc >/dev/null  # stops the node's loader: nothing uses it any more
  stop_nginx
  rm -f "$scratch/nginx/nginx.pid"
else
  echo
  echo "== 10. lazy layers skipped: no Debian base (scripts/debian-base.sh) or no nginx (scripts/setup.sh)"
fi

# ---- the same runtime from Python: a trainer that survives preemption ---------------------------------
python=${PYTHON:-$repo/.venv/bin/python}
if [[ -x $python && -d $build/python/sandlet ]]; then
  echo
  echo "== 11. Python: REINFORCE with torch; every episode is a sandbox of a layered environment (Debian base +"
  echo "       task workspace + agent toolkit); the trainer is SIGKILLed mid-rollout, restarted, and reattaches"
  trainer=("$python" "$repo/examples/python/reinforce_trainer.py" --root "$root" --job-dir "$scratch/job"
           --base "$debian" --iterations 20 --batch 12 --seed 1)
  echo "  \$ python3 examples/python/reinforce_trainer.py --iterations 20 --preempt-at 4 ...   # killed"
  # In a subshell whose stderr is discarded: bash's own "Killed" notice is not part of the demo.
  set +e
  (PYTHONPATH=$build/python "${trainer[@]}" --preempt-at 4 >"$scratch/preempted.log" 2>&1; exit $?) 2>/dev/null
  status=$?
  set -e
  sed 's/^/    /' "$scratch/preempted.log"
  [[ $status -eq 137 ]] || die "the trainer was to be killed by SIGKILL (exit 137), it exited with $status"
  echo "  \$ python3 examples/python/reinforce_trainer.py --iterations 20 ...   # the same command again: resumes"
  PYTHONPATH=$build/python "${trainer[@]}" 2>&1 | sed 's/^/    /'
  [[ ${PIPESTATUS[0]} -eq 0 ]] || die "the resumed trainer failed"
else
  echo
  echo "== 11. Python part skipped: no $python or no Python module in $build/python (run scripts/setup.sh)"
fi

# ---- the frameworks people already run: Inspect and the SandboxFusion API ------------------------------
if [[ -x $python && -d $build/python/sandlet && -n ${debian:-} ]] && "$python" -c 'import inspect_ai' 2>/dev/null; then
  echo
  echo "== 12. frameworks: an Inspect eval whose (mock) model calls bash, text_editor and bash_session in a"
  echo "       sandlet sandbox (provider found by its entry point), then verl-style code rewards over HTTP"
  evaldir=$scratch/inspect
  mkdir -p "$evaldir"
  cp "$repo/examples/python/inspect_task.py" "$evaldir/"
  printf 'layers: [%s]\nworkdir: /root\nroot: %s\nmemory: 1G\n' "$debian" "$root" >"$evaldir/sandlet.yaml"
  show cat "$evaldir/sandlet.yaml"
  echo "  \$ inspect eval inspect_task.py@sandlet_tools --sandbox sandlet:sandlet.yaml"
  # Inspect's caches and traces go to the scratch directory, not the user's home.
  export XDG_CACHE_HOME=$evaldir/cache XDG_DATA_HOME=$evaldir/data XDG_CONFIG_HOME=$evaldir/config
  (cd "$evaldir" && PYTHONPATH=$build/python INSPECT_LOG_DIR=$evaldir/logs INSPECT_DISPLAY=none \
     "$python" -m inspect_ai eval inspect_task.py@sandlet_tools --sandbox sandlet:sandlet.yaml) >"$evaldir/eval.out" 2>&1 ||
    { cat "$evaldir/eval.out"; die "inspect eval failed"; }
  PYTHONPATH=$build/python "$python" - "$evaldir/logs" <<'PY'
import glob, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sorted(glob.glob(sys.argv[1] + "/*.eval"))[-1])
for m in log.samples[0].messages:
    if m.role == "assistant" and m.tool_calls:
        c = m.tool_calls[0]
        print(f"    model -> {c.function}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})")
    elif m.role == "tool":
        print(f"    tool  <- {m.text.strip()[:90]!r}")
score = next(iter(log.samples[0].scores.values()))
print(f"    scored in the sandbox: answer {score.answer!r}, {score.value}; accuracy "
      f"{log.results.scores[0].metrics['accuracy'].value}; eval status {log.status}")
PY
  echo "  \$ python -m sandlet.sandbox_fusion --listen 127.0.0.1:0 --language python=\$debian &   # the SandboxFusion API"
  PYTHONPATH=$build/python "$python" -m sandlet.sandbox_fusion --listen 127.0.0.1:0 --root "$root" \
    --language "python=$debian" >"$scratch/fusion.out" 2>&1 &
  fusion_pid=$!
  for _ in $(seq 100); do grep -q '^listening on' "$scratch/fusion.out" && break; sleep 0.1; done
  url=http://$(sed -n 's/^listening on //p' "$scratch/fusion.out")
  PYTHONPATH=$build/python "$python" - "$url" <<'PY'
import json, sys, time, urllib.request
def post(path, body):
    req = urllib.request.Request(sys.argv[1] + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req) as r:
        out = json.load(r)
    return out, (time.perf_counter() - t) * 1000
for name, body in [("a correct answer", {"code": "print(sum(map(int, input().split())))", "stdin": "40 2"}),
                   ("an infinite loop", {"code": "while True: pass", "run_timeout": 1}),
                   ("a memory hog", {"code": "x = bytearray(1 << 30)", "memory_limit_MB": 128})]:
    out, ms = post("/run_code", {"language": "python", **body})
    rr = out["run_result"]
    print(f"    {name:17}: {out['status']:7} run {rr['status']}, exit {rr['return_code']}, "
          f"stdout {rr['stdout'].strip()!r} ({ms:.0f} ms round trip)")
out, ms = post("/run_jupyter", {"cells": ["xs = [3, 1, 2]", "sorted(xs)", "print(len(xs))", "xs[7]"]})
cells = ", ".join(repr(c["stdout"].strip() or (c["display"] and c["display"][0]["text/plain"])
                       or (c["error"] and c["error"][0]["ename"]) or "") for c in out["cells"])
print(f"    a notebook       : {out['status']:7} cells {cells} ({ms:.0f} ms round trip, one python3 for all)")
PY
  kill -TERM "$fusion_pid"
  wait "$fusion_pid" || die "the SandboxFusion service did not stop cleanly"
else
  echo
  echo "== 12. frameworks skipped: no Python environment with inspect-ai or no Debian base (scripts/setup.sh)"
fi

elapsed_ms=$(( (${EPOCHREALTIME/./} - start_us) / 1000 ))
kept=" (kept)"; [[ $root == "$scratch/root" ]] && kept=" (throw-away: removed now)"
printf '\ndemo: done in %d.%03d s; runtime root %s%s\n' $((elapsed_ms / 1000)) $((elapsed_ms % 1000)) "$root" "$kept"
