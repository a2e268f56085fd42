#!/bin/sh
# Runs inside the pure cgroup v2 guest (test/vm/run-in-vm.sh): the integration and C tests, then explicit
# checks of the v2 layout — limits written to the sandbox's own group, per-exec groups under it, and
# nothing left once sandboxes are gone and gc ran. busybox sh.
# usage: pure-v2-suite.sh CLI INTEGRATION_TESTS CAPI_TESTS ROOTFS
set -u
cli=$1 integration=$2 capi=$3 rootfs=$4
fail=0
check() {  # check DESCRIPTION COMMAND...: runs the command, records a failure
  desc=$1; shift
  if "$@"; then echo "ok: $desc"; else echo "FAILED: $desc"; fail=1; fi
}

[ -e /sys/fs/cgroup/cgroup.subtree_control ] && [ ! -e /sys/fs/cgroup/unified ] || { echo "not a pure cgroup v2 host"; exit 1; }
"$integration" --reporter compact "~[needs-hybrid-host]" || fail=1
"$capi" || fail=1

root=/tmp/pure-v2-root
id=$("$cli" --root "$root" create --layer "$rootfs" --memory 64M --pids 50 --cpus 0.5) || { echo "FAILED: create"; exit 1; }
group=/sys/fs/cgroup/sandlet/$id
check "the sandbox has its own group" test -d "$group"
check "memory.max = 64 MiB" test "$(cat "$group/memory.max")" = 67108864
check "memory.swap.max = 0" test "$(cat "$group/memory.swap.max")" = 0
check "pids.max = 50" test "$(cat "$group/pids.max")" = 50
check "cpu.max = half a CPU" test "$(cat "$group/cpu.max")" = "50000 100000"
check "the init sits in the sandbox's group" test -n "$(cat "$group/cgroup.procs")"
check "a command runs in a per-exec group, seen from the sandbox's cgroup namespace" \
  test "$("$cli" --root "$root" exec "$id" -- cat /proc/self/cgroup)" = "0::/x0"
check "a command is killed with its group on timeout" \
  sh -c "\"$cli\" --root \"$root\" exec --timeout 1 \"$id\" -- sh -c 'sleep 100 & sleep 100'; test \$? = 124"
"$cli" --root "$root" rm "$id" || fail=1
check "destroy removes the group" test ! -e "$group"
"$cli" --root "$root" gc >/dev/null || fail=1
check "gc removes the idle parent group" test ! -e /sys/fs/cgroup/sandlet
check "no mount left" test "$(grep -c sandlet /proc/self/mountinfo)" = 0
exit $fail
