#!/usr/bin/env bash
# rust_example_test.sh LIB_DIR ROOTFS_DIR — builds examples/rust (the C ABI from Rust, no crates) against the
# libsandlet.so in LIB_DIR and runs it on a throw-away runtime root with the layer directory ROOTFS_DIR.
#
# The example is copied to a temp directory and built there (target/ included), offline, so the source tree
# is left untouched. Checks the example's output, its exit codes on bad input, and that nothing of the
# sandbox is left behind (mounts, cgroup, state). Everything it creates is removed on exit.
#
# Exit: 0 pass, 1 fail (with the reason), 2 usage, 77 skip (no cargo on PATH, or not root).
# Env: CARGO (optional) names the cargo to use instead of the one on PATH.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }

[[ $# -eq 2 && -n $1 && -n $2 ]] || { echo "usage: $0 LIB_DIR ROOTFS_DIR" >&2; exit 2; }
lib_dir=$(cd -- "$1" 2>/dev/null && pwd) || fail "library directory $1 not found"
rootfs=$(cd -- "$2" 2>/dev/null && pwd) || fail "rootfs directory $2 not found"
[[ -e $lib_dir/libsandlet.so ]] || fail "no libsandlet.so in $lib_dir (build the 'sandlet' target first)"
[[ -e $rootfs/bin/sh || -L $rootfs/bin/sh ]] || fail "$rootfs has no /bin/sh (see test/fixtures/make-rootfs.sh)"

cargo=${CARGO:-$(command -v cargo || true)}
if [[ -z $cargo ]]; then
  echo "SKIP: no cargo"
  exit 77
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: sandboxes need root"
  exit 77
fi

src=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../../examples/rust" && pwd) || fail "examples/rust not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandlet-rust-example.XXXXXX")
# Mount points still under $tmp (deepest first), from /proc/self/mountinfo.
mounts_under_tmp() { awk -v t="$tmp" '$5 == t || index($5, t "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r; }
cleanup() {
  local m
  # Should be none (the runtime unmounts what it mounted); never let rm walk into a mounted tree.
  for m in $(mounts_under_tmp); do umount -l -- "$m" 2>/dev/null || true; done
  rm -rf --one-file-system -- "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== copying $src to $tmp/src"
mkdir -- "$tmp/src"
# Everything but a target/ directory someone may have built in the source tree.
(cd -- "$src" && tar --exclude=./target -cf - .) | (cd -- "$tmp/src" && tar -xf -)

echo "== building with $("$cargo" --version) ($(rustc --version 2>/dev/null || echo 'rustc ?')), SANDLET_LIB_DIR=$lib_dir"
build() {
  (cd -- "$tmp/src" && SANDLET_LIB_DIR=$lib_dir CARGO_TARGET_DIR=$tmp/target "$cargo" "$@" --offline) \
    >"$tmp/cargo.log" 2>&1 || { cat -- "$tmp/cargo.log" >&2; fail "cargo $* failed"; }
}
build build
# The unit test checks sandlet_exec_options_t's field offsets against the header's layout.
build test
grep -q "exec_options_layout_matches_the_header ... ok" "$tmp/cargo.log" \
  || { cat -- "$tmp/cargo.log" >&2; fail "the layout unit test did not run"; }
bin=$tmp/target/debug/sandlet-quickstart
[[ -x $bin ]] || fail "no binary at $bin"

# The rpath from build.rs: the binary must find libsandlet.so.1 in LIB_DIR without LD_LIBRARY_PATH.
if command -v ldd >/dev/null 2>&1; then
  resolved=$(env -u LD_LIBRARY_PATH ldd "$bin" | awk '$1 ~ /^libsandlet\.so/ { print $3 }')
  [[ $resolved == "$lib_dir"/libsandlet.so* ]] || fail "libsandlet resolves to '${resolved:-nothing}', not $lib_dir"
fi

state=$tmp/state
run() { env -u LD_LIBRARY_PATH -u SANDLET_ROOT -u SANDLET_EXAMPLE_ROOTFS timeout 120 "$bin" "$@"; }

echo "== running: sandlet-quickstart $state $rootfs"
rc=0
run "$state" "$rootfs" >"$tmp/out" 2>"$tmp/err" || rc=$?
sed 's/^/  | /' "$tmp/out"
[[ -s $tmp/err ]] && sed 's/^/  ! /' "$tmp/err"
[[ $rc -eq 0 ]] || fail "the example exited $rc"

expect_line() { # a regular expression (ERE) one line of the output must match whole
  grep -Eqx -- "$1" "$tmp/out" || fail "no output line matching: $1"
}
esc() { printf '%s' "$1" | sed 's/[][\.*^$(){}?+|]/\\&/g'; }
expect_line "runtime at $(esc "$state"), sandlet [0-9]+\.[0-9]+\.[0-9]+.* \(ABI 1\)"
expect_line "created sandbox [0-9a-zA-Z_-]+"
expect_line "stdout: hello from sandbox, running as uid 0"
expect_line "exit code: 0 \(signal 0, timed out: 0\)"
expect_line "tr a-z A-Z: FED THROUGH STDIN"
expect_line "/work/answer\.txt: written inside the sandbox"
expect_line "expected error: exec no-such-command: .+ \[NOT_FOUND\]"
expect_line "destroyed"
expect_line "expected error: exec after destroy: .+ \[FAILED_PRECONDITION\]"
expect_line "runtime closed"
id=$(sed -n 's/^created sandbox //p' "$tmp/out")

echo "== failures are reported with the code name and a non-zero exit"
rc=0
run "$state" "$tmp/no-such-layer" >"$tmp/out2" 2>"$tmp/err2" || rc=$?
[[ $rc -eq 1 ]] || fail "a missing layer: exit $rc, expected 1"
grep -Eq '^quickstart: create sandbox: .+ \[INVALID_ARGUMENT\]' "$tmp/err2" \
  || { cat -- "$tmp/err2" >&2; fail "a missing layer: no 'quickstart: create sandbox: ... [INVALID_ARGUMENT]' on stderr"; }
sed 's/^/  ! /' "$tmp/err2"
rc=0
run >/dev/null 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "no arguments: exit $rc, expected 2 (usage)"

echo "== nothing left behind"
left=$(mounts_under_tmp)
[[ -z $left ]] || fail "mounts left under $tmp: $left"
if [[ -d $state/sandboxes ]] && [[ -n $(ls -A -- "$state/sandboxes") ]]; then
  fail "sandbox state left in $state/sandboxes: $(ls -A -- "$state/sandboxes" | tr '\n' ' ')"
fi
if [[ -n $id && -d /sys/fs/cgroup ]]; then
  cg=$(find /sys/fs/cgroup -maxdepth 4 -type d -name "$id" 2>/dev/null | head -n 3)
  [[ -z $cg ]] || fail "cgroup of sandbox $id left: $cg"
fi

echo "PASS: rust example (sandbox $id)"
