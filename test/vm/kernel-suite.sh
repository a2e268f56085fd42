#!/bin/sh
# Runs inside a VM of test/vm/run-in-vm.sh: a pure cgroup v2 host on a stock Debian kernel. First what the
# kernel offers and the paths sandlet takes there (`sandlet doctor`, checked against the paths this kernel
# is known to need), then the integration tests (layer tests included) and the C tests, the conformance
# suite when it is built, explicit checks of the v2 layout and of store layers through the CLI, and that
# nothing is left behind: mounts, cgroups, loop devices. busybox sh.
# usage: kernel-suite.sh CLI INTEGRATION_TESTS CAPI_TESTS ROOTFS OVERLAY_PATH STORE_PATH ATTACKS SHARD
#                        [CONFORMANCE_TESTS...]
#   OVERLAY_PATH, STORE_PATH: the "paths" the doctor must report ("" = not checked)
#   ATTACKS: which of the attack suite and the resource-abuse tests run here, as a test filter
#            ("[attacks],[abuse]" for all; "-" for none)
#   SHARD: K/N. The integration tests of the files whose paths depend on the kernel (KERNEL_FILES) run
#          on every VM; the others are dealt round N VMs, and this one runs the K-th share (1/1: all).
set -u
cli=$1 integration=$2 capi=$3 rootfs=$4 want_overlay=$5 want_store=$6 attacks=$7 shard=$8
shift 8
fail=0
check() {  # check DESCRIPTION COMMAND...: runs the command, records a failure
  desc=$1; shift
  if "$@"; then echo "ok: $desc"; else echo "FAILED: $desc"; fail=1; fi
}
bound_loops() {  # loop devices bound to a file
  n=0
  for f in /sys/block/loop*/loop/backing_file; do [ -e "$f" ] && n=$((n + 1)); done
  echo $n
}
section() { echo "=== $1 ($(cut -d' ' -f1 /proc/uptime) s since boot)"; }

[ -e /sys/fs/cgroup/cgroup.subtree_control ] && [ ! -e /sys/fs/cgroup/unified ] || { echo "not a pure cgroup v2 host"; exit 1; }

section "sandlet doctor"
root=/tmp/kernel-suite-root
"$cli" --root "$root" doctor -v || fail=1
"$cli" --root "$root" doctor --json > /tmp/doctor.json || fail=1
[ -z "$want_overlay" ] || check "overlay layers: $want_overlay" grep -qF "\"overlay\":\"$want_overlay\"" /tmp/doctor.json
[ -z "$want_store" ] || check "store layers: $want_store" grep -qF "\"store_layers\":\"$want_store\"" /tmp/doctor.json

section "integration tests"
# (Not the tests that need this machine's hybrid cgroup layout; an idle node this guest is. Nor the grep of
# the whole tree outside /proc: minutes of reading busybox once per applet link under emulation, and
# nothing of the kernel.) A test that needs what this kernel lacks (veth for the network tests' fake
# internet, say) SKIPs and says why.
base="~[needs-hybrid-host]~[attacks]~[abuse]~[whole-tree]"
# Layers, mounts, isolation, seccomp, cgroup limits, freezing, snapshots: what differs between kernels.
# (And the network boundary's attacks: cgroup BPF, sk_lookup and address events differ between kernels.)
KERNEL_FILES="layers_test store_test lazy_test mounts_test mounts_security_test snapshot_test isolation_test
  seccomp_test kernel_paths_test file_rules_test build_secrets_test job_pause_test qos_test fncall_test
  exec_test pause_pool_test network_boundary_test network_gateway_dns_abuse_test"
share=${shard%/*} shares=${shard#*/}
if [ "$shares" = 1 ]; then
  "$integration" --reporter compact "$base" || fail=1
else
  kernel_spec="" rest="$base"
  for f in $KERNEL_FILES; do
    kernel_spec="$kernel_spec${kernel_spec:+,}[#$f]$base"
    rest="$rest~[#$f]"
  done
  "$integration" -# --reporter compact "$kernel_spec" || fail=1
  section "integration tests: share $shard of the rest"
  # Names one per line, quoted by Catch2 when read back: only its escapes (\ and \,) are needed.
  "$integration" -# --list-test-names-only "$rest" |
    awk -v n="$shares" -v k="$share" 'NF && (NR - 1) % n == k - 1' | sed 's/\\/\\\\/g; s/,/\\,/g' > /tmp/share.txt
  if [ -s /tmp/share.txt ]; then
    echo "$(wc -l < /tmp/share.txt) test cases"
    "$integration" -# --reporter compact -f /tmp/share.txt || fail=1
  fi
fi
if [ "$attacks" != - ]; then
  section "attack suite and resource abuse: $attacks"
  "$integration" --reporter compact "$attacks" || fail=1
fi
section "C tests"
"$capi" || fail=1
for conformance in "$@"; do
  section "conformance suite: $(basename "$conformance")"
  SANDLET_CONFORMANCE_BACKENDS=container "$conformance" --reporter compact || fail=1
done

section "cgroup v2 layout"
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
check "no namespace can be made inside" \
  sh -c "! \"$cli\" --root \"$root\" exec \"$id\" -- unshare -U true 2>/dev/null"
"$cli" --root "$root" rm "$id" || fail=1
check "destroy removes the group" test ! -e "$group"

section "store layers through the CLI"
"$cli" --root "$root" layer import "$rootfs" --name bb >/dev/null || fail=1
id=$("$cli" --root "$root" create --layer bb) || { echo "FAILED: create from a store layer"; exit 1; }
check "a store layer's files read back" \
  test "$("$cli" --root "$root" exec "$id" -- sh -c 'head -1 /etc/passwd | cut -d: -f1')" = root
if [ "$want_store" = "EROFS on loop devices" ]; then
  check "its image and blobs sit on loop devices" test "$(bound_loops)" -ge 2
else
  check "no loop device is used" test "$(bound_loops)" = 0
fi
"$cli" --root "$root" rm "$id" >/dev/null || fail=1
"$cli" --root "$root" gc >/dev/null || fail=1
check "gc removes the idle parent group" test ! -e /sys/fs/cgroup/sandlet
check "no mount left" test "$(grep -c sandlet /proc/self/mountinfo)" = 0
check "no loop device left bound" test "$(bound_loops)" = 0
exit $fail
