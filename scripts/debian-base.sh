#!/usr/bin/env bash
# Builds (once) and caches a minimal Debian bookworm root filesystem with python3, git, adduser and procps:
# the base layer of the demo, the benchmarks and the framework tests (Inspect's checks add users and run ps).
#
# Usage: scripts/debian-base.sh [--print-path] [--toolchain]
#   --print-path  print only the rootfs path on stdout (progress always goes to stderr)
#   --toolchain   another tree, debian-bookworm-toolchain: the same plus g++ (the code-execution service's
#                 C++ pool and its tests), kept apart so that the base layer stays small
#
# Output: ${SANDLET_CACHE:-/var/cache/sandlet}/debian-bookworm-minbase/rootfs, plus the stamp file
# .../debian-bookworm-minbase/complete, written last. With the stamp present the script does nothing (no
# network) and prints the path. Without it, whatever a crashed run left is removed and the build starts
# over: debootstrap fills a temporary directory beside rootfs, which is checked, renamed into place, and
# only then stamped.
#
# Environment: SANDLET_CACHE          cache directory (default /var/cache/sandlet)
#              SANDLET_DEBIAN_MIRROR  Debian mirror to bootstrap from (default: the machine's own apt
#                                     source for bookworm, from /etc/apt/sources.list.d/*.sources or
#                                     /etc/apt/sources.list)
set -euo pipefail

suite=bookworm
name=debian-$suite-minbase
# A stamp made with another list is stale: the tree is built again.
include=python3,git,adduser,procps

die() { echo "debian-base.sh: $*" >&2; exit 1; }
say() { echo "debian-base.sh: $*" >&2; }

print_path=0
for arg in "$@"; do
  case $arg in
    --print-path) print_path=1 ;;
    --toolchain) name=debian-$suite-toolchain; include=$include,g++ ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown argument '$arg' (usage: $0 [--print-path] [--toolchain])" ;;
  esac
done

cache=${SANDLET_CACHE:-/var/cache/sandlet}
base=$cache/$name
rootfs=$base/rootfs
stamp=$base/complete

report() {
  if [[ $print_path -eq 1 ]]; then echo "$rootfs"; else echo "rootfs: $rootfs"; fi
}

# Fast path: the stamp is written last, so its presence means a finished, checked tree.
stamp_current() { [[ -e $stamp && -d $rootfs ]] && grep -qx "suite=$suite variant=minbase include=$include" "$stamp"; }
if stamp_current; then
  [[ $print_path -eq 1 ]] || say "cached ($stamp exists)"
  report
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap creates device nodes and root-owned files); try: sudo $0"
for tool in chroot du flock mktemp; do
  command -v "$tool" >/dev/null 2>&1 || die "missing '$tool' on PATH"
done

mkdir -p "$base"
# One builder at a time (the demo and a benchmark may start together); the second waits, then finds the stamp.
exec 9>"$base/.lock"
flock 9
if stamp_current; then
  say "built by a concurrent run"
  report
  exit 0
fi

# Unmounts whatever is mounted at or under $base (debootstrap mounts /proc and /sys in its target and
# normally unmounts them, but not when killed), deepest first.
unmount_under_base() {
  local mnt mp
  local -a mps=()
  while read -r _ _ _ _ mnt _; do
    mp=$(printf '%b' "$mnt")  # mountinfo escapes space, tab, newline and backslash as \ooo
    if [[ $mp == "$base" || $mp == "$base"/* ]]; then mps+=("$mp"); fi
  done </proc/self/mountinfo
  local i
  for ((i = ${#mps[@]} - 1; i >= 0; i--)); do  # later lines are mounted on top of / below earlier ones
    say "unmounting ${mps[i]}"
    umount "${mps[i]}" 2>/dev/null || umount -l "${mps[i]}" || say "warning: cannot unmount ${mps[i]}"
  done
}

# ---- start over from a clean state -------------------------------------------------------------------
unmount_under_base
shopt -s nullglob
stale=("$rootfs" "$base"/rootfs.tmp.*)
shopt -u nullglob
for d in "${stale[@]}"; do
  if [[ -e $d ]]; then
    say "removing unfinished $d"
    rm -rf --one-file-system -- "$d"
  fi
done
rm -f -- "$stamp" "$stamp".tmp.*

# ---- mirror -------------------------------------------------------------------------------------------
# The first URIs of an enabled deb822 "deb" entry whose Suites include $suite, in file order; else the
# first "deb" line of sources.list whose suite is $suite, else its first "deb" line.
find_mirror() {
  local f uri
  shopt -s nullglob
  for f in /etc/apt/sources.list.d/*.sources; do
    uri=$(awk -v suite="$suite" '
      function flush() {
        if (uris != "" && types ~ /(^|[ \t])deb([ \t]|$)/ && enabled !~ /^[ \t]*(no|false|0)[ \t]*$/) {
          n = split(suites, s, /[ \t]+/)
          for (i = 1; i <= n; i++) if (s[i] == suite) { split(uris, u, /[ \t]+/); print u[1]; found = 1; exit }
        }
        uris = types = suites = enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      tolower($0) ~ /^uris:/    { sub(/^[^:]*:[ \t]*/, ""); uris = $0; next }
      tolower($0) ~ /^types:/   { sub(/^[^:]*:[ \t]*/, ""); types = $0; next }
      tolower($0) ~ /^suites:/  { sub(/^[^:]*:[ \t]*/, ""); suites = $0; next }
      tolower($0) ~ /^enabled:/ { sub(/^[^:]*:[ \t]*/, ""); enabled = tolower($0); next }
      END { if (!found) flush() }
    ' "$f")
    if [[ -n $uri ]]; then shopt -u nullglob; echo "$uri"; return; fi
  done
  shopt -u nullglob
  if [[ -r /etc/apt/sources.list ]]; then
    awk -v suite="$suite" '
      /^[ \t]*deb[ \t]/ {
        line = $0; sub(/^[ \t]*deb[ \t]+/, "", line)
        if (line ~ /^\[/) sub(/^\[[^]]*\][ \t]*/, "", line)   # [arch=… signed-by=…] options
        split(line, w, /[ \t]+/)
        if (first == "") first = w[1]
        if (w[2] == suite) { print w[1]; done = 1; exit }
      }
      END { if (!done && first != "") print first }
    ' /etc/apt/sources.list
  fi
}

mirror=${SANDLET_DEBIAN_MIRROR:-}
[[ -n $mirror ]] || mirror=$(find_mirror)
[[ -n $mirror ]] || die "no Debian mirror found for '$suite' in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; set SANDLET_DEBIAN_MIRROR"
mirror=${mirror%/}
say "mirror: $mirror${SANDLET_DEBIAN_MIRROR:+ (from SANDLET_DEBIAN_MIRROR)}"

# ---- debootstrap --------------------------------------------------------------------------------------
if ! command -v debootstrap >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "debootstrap is missing and there is no apt-get to install it"
  say "installing debootstrap"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends debootstrap >&2; then
    apt-get update -q >&2 || die "apt-get update failed (needed to install debootstrap)"
    apt-get install -y -q --no-install-recommends debootstrap >&2 || die "cannot install debootstrap"
  fi
fi

start_us=${EPOCHREALTIME/./}
tmp=$(mktemp -d "$base/rootfs.tmp.XXXXXX")
chmod 0755 "$tmp"  # becomes the image's / (mktemp makes it 0700)
on_exit() {
  local rc=$?
  unmount_under_base
  if [[ -n ${tmp:-} && -e $tmp ]]; then
    if [[ $rc -ne 0 && -r $tmp/debootstrap/debootstrap.log ]]; then
      say "last lines of $tmp/debootstrap/debootstrap.log:"
      tail -n 25 "$tmp/debootstrap/debootstrap.log" >&2 || true
    fi
    rm -rf --one-file-system -- "$tmp"
  fi
  [[ $rc -eq 0 ]] || say "failed (exit $rc); nothing was cached"
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP

say "debootstrap --variant=minbase --include=$include $suite into $tmp (takes a few minutes)"
# debootstrap's progress goes to stderr like ours; stdout stays for the path.
debootstrap --variant=minbase --include="$include" "$suite" "$tmp" "$mirror" >&2 ||
  die "debootstrap failed (mirror $mirror)"
unmount_under_base  # debootstrap unmounts its /proc and /sys itself; make sure

# apt is not used inside sandboxes built from this layer: drop its caches to keep the layer small.
rm -rf -- "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/cache/apt/archives/partial/* \
  "$tmp"/var/cache/apt/*.bin "$tmp"/var/lib/apt/lists/*
# Nothing of the build machine stays in the layer: debootstrap wrote the build mirror into the apt sources
# and its log, and copied the host's /etc/hostname and /etc/resolv.conf (sandboxes get their own).
printf '# emptied by sandlet scripts/debian-base.sh: apt is not used in this layer\n' >"$tmp/etc/apt/sources.list"
rm -f -- "$tmp/var/log/bootstrap.log"
echo localhost >"$tmp/etc/hostname"
: >"$tmp/etc/resolv.conf"

# ---- check, publish, stamp ----------------------------------------------------------------------------
checks=(/usr/bin/python3 /usr/bin/git /usr/sbin/adduser /usr/bin/ps)
[[ $include != *g++* ]] || checks+=(/usr/bin/g++)
for f in "${checks[@]}"; do
  chroot "$tmp" /usr/bin/test -x "$f" || die "the new rootfs has no executable $f"
done
out=$(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$tmp" python3 -c 'print(1)') ||
  die "chroot $tmp python3 -c 'print(1)' failed"
[[ $out == 1 ]] || die "chroot $tmp python3 -c 'print(1)' printed '$out', expected 1"
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$tmp" git --version >/dev/null ||
  die "chroot $tmp git --version failed"

mv -T -- "$tmp" "$rootfs"
tmp=
sync -f "$rootfs" 2>/dev/null || sync
{
  echo "suite=$suite variant=minbase include=$include"
  echo "debootstrap=$(dpkg-query -W -f='${Version}' debootstrap 2>/dev/null || echo unknown)"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$stamp.tmp.$$"
mv -T -- "$stamp.tmp.$$" "$stamp"
sync -f "$base" 2>/dev/null || sync

elapsed_ms=$(( (${EPOCHREALTIME/./} - start_us) / 1000 ))
say "built in $(printf '%d.%03d' $((elapsed_ms / 1000)) $((elapsed_ms % 1000))) s; size $(du -sh --one-file-system "$rootfs" | cut -f1)"
report
