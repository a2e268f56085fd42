#!/usr/bin/env bash
# Runs the bench scenarios (sandlet-bench) inside a throw-away VM on a stock Debian kernel — Debian 12's
# 6.1 by default — with bubblewrap in the same VM as the peer, and prints one JSON object per scenario
# (JSON Lines, as `make bench` does). For "the same scenarios on the 6.1 VM (ratios against bubblewrap in
# the same VM)": absolute figures under software emulation mean little; the ratios to the peer are what
# to compare. Run it on a quiet machine: the VM's two emulated CPUs keep both host cores busy.
#
# usage: bench-in-vm.sh [--kernel DIR] [--memory MiB] [--scenario "NAME ARGS..."]... [BUILD_DIR]
#   --kernel DIR    an unpacked Debian kernel (default /var/cache/sandlet/vm-kernel/bookworm: 6.1)
#   --scenario S    a sandlet-bench scenario with its arguments (repeatable; default: the issue's set,
#                   iterations scaled down for emulation)
#   BUILD_DIR       the build tree (default ./build): its sandlet-bench, libsandlet, sandlet CLI, test-rootfs
# Exit status: 0 when every scenario printed its result; what run-in-vm.sh says otherwise (77: skip).
set -euo pipefail

here=$(cd "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
kernel=/var/cache/sandlet/vm-kernel/bookworm memory=3072
scenarios=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) kernel=$2; shift 2 ;;
    --memory) memory=$2; shift 2 ;;
    --scenario) scenarios+=("$2"); shift 2 ;;
    -*) echo "bench-in-vm.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
build=$(cd "${1:-build}" && pwd)
[[ ${#scenarios[@]} -gt 0 ]] || scenarios=(
  "lifecycle --iterations 100 --concurrency 1"
  "run --iterations 100 --concurrency 1"
  "lifecycle-cli --iterations 50 --concurrency 1"
  "exec --iterations 500 --concurrency 1"
  "idle-density --iterations 100"
)
bwrap=$(command -v bwrap || true)
[[ -n $bwrap ]] || { echo "SKIP: needs bwrap (bubblewrap) for the peer" >&2; exit 77; }
for f in sandlet-bench sandlet test-rootfs/bin/busybox; do
  [[ -e $build/$f ]] || { echo "bench-in-vm.sh: no $build/$f (build first: make build)" >&2; exit 2; }
done

# The guest runs each scenario and marks its JSON line; everything else on the console is diagnostics.
guest=$(mktemp /tmp/sandlet-bench-vm-XXXXXX.sh)
out=$(mktemp /tmp/sandlet-bench-vm-XXXXXX.log)
trap 'rm -f "$guest" "$out"' EXIT
{
  echo 'fail=0'
  for s in "${scenarios[@]}"; do
    printf 'r=$(%q %s --json --rootfs %q --cli %q) && echo "BENCH-JSON $r" || { echo "bench: %s failed" >&2; fail=1; }\n' \
      "$build/sandlet-bench" "$s" "$build/test-rootfs" "$build/sandlet" "$s"
  done
  echo 'exit $fail'
} > "$guest"
chmod +x "$guest"

set +e
"$here/run-in-vm.sh" --kernel "$kernel" --memory "$memory" --timeout 3600 \
  --file "$build/sandlet-bench" --file "$build/sandlet" --file "$build/test-rootfs" --file "$bwrap" \
  --file "$guest" -- sh "$guest" > "$out" 2>&1
rc=$?
set -e
grep -a '^sandlet-vm: ' "$out" | tr -d '\r' >&2 || true
grep -a 'BENCH-JSON ' "$out" | sed 's/.*BENCH-JSON //' | tr -d '\r'
if [[ $rc -ne 0 ]]; then
  echo "bench-in-vm.sh: the guest run ended with status $rc; its console:" >&2
  tail -n 40 "$out" >&2
fi
exit $rc
