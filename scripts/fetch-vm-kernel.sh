#!/usr/bin/env bash
# Fetches the stock Debian kernels that the VM tests boot (test/vm/run-in-vm.sh), unpacked (nothing is
# installed; the host keeps its own kernel). Idempotent: a kernel already unpacked touches no network.
#
# usage: fetch-vm-kernel.sh [--suite SUITE]... [DIR]   (DIR: $SANDLET_VM_KERNEL_DIR, else /var/cache/sandlet/vm-kernel)
# Without --suite, three kernels: the newest one (the backports suite of the next Debian release, or
# $SANDLET_VM_KERNEL_SUITE), bookworm's own (Linux 6.1: what Debian 12 clusters run) and bookworm-backports'
# (6.12 LTS). Each unpacked package (vmlinuz and modules) is linked as DIR/SUITE; the newest also as
# DIR/current (the pure cgroup v2 test's). The packages come through this machine's own apt sources'
# archive, so a local mirror is used when one is configured.
set -euo pipefail

newest_suite=${SANDLET_VM_KERNEL_SUITE:-trixie-backports}
suites=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --suite) suites+=("$2"); shift 2 ;;
    -*) echo "fetch-vm-kernel.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
dest=${1:-${SANDLET_VM_KERNEL_DIR:-/var/cache/sandlet/vm-kernel}}
[[ ${#suites[@]} -gt 0 ]] || suites=("$newest_suite" bookworm bookworm-backports)
die() { echo "fetch-vm-kernel.sh: $*" >&2; exit 1; }

# The Debian archive this machine uses: the first non-security URI of its apt sources.
archive=$(
  {
    grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' || true
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | sed 's/\[[^]]*\]//' | awk '{print $2}' || true
  } | grep -v security | head -1 || true
)

fetch_suite() {  # $1: suite; leaves $dest/$1 -> the unpacked kernel
  local suite=$1
  if [[ -e $dest/$suite/.complete ]]; then
    echo "fetch-vm-kernel.sh: $(cat "$dest/$suite/.complete") already in $dest/$suite"
    return 0
  fi
  # (Before suites had links of their own, the newest kernel had only "current".)
  if [[ $suite == "$newest_suite" && -e $dest/current/.complete ]]; then
    ln -sfn "$(readlink "$dest/current")" "$dest/$suite"
    echo "fetch-vm-kernel.sh: $(cat "$dest/current/.complete") already in $dest/current"
    return 0
  fi
  [[ -n $archive ]] || die "no Debian archive found in this machine's apt sources"
  mkdir -p "$dest"
  local work
  work=$(mktemp -d "$dest/.fetch-XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  mkdir -p "$work/lists/partial" "$work/debs"
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  echo "deb [signed-by=$keyring] $archive $suite main" > "$work/sources.list"
  local apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
                  -o "Dir::State::Lists=$work/lists" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" -q update >/dev/null || die "apt-get update of $suite failed"

  # linux-image-amd64 names the versioned package; newer kernels split it into -binary and -modules.
  local image version part
  image=$(apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null | grep -o 'linux-image-[0-9][^ ]*' | head -1)
  [[ -n $image ]] || die "no linux-image-amd64 in $suite"
  version=${image#linux-image-}
  local packages=("$image")
  for part in binary modules; do
    if apt-cache "${apt_opts[@]}" show "linux-$part-$version" >/dev/null 2>&1; then packages+=("linux-$part-$version"); fi
  done
  (cd "$work/debs" && apt-get "${apt_opts[@]}" -q download "${packages[@]}" >/dev/null 2>&1) ||
    die "download of ${packages[*]} failed"

  local unpacked=$dest/$version deb f found=
  rm -rf "$unpacked"
  mkdir -p "$unpacked"
  for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$unpacked"; done
  for f in "$unpacked"/boot/vmlinuz-* "$unpacked"/{usr/,}lib/modules/*/vmlinuz; do [[ -e $f ]] && found=$f; done
  [[ -n $found ]] || die "no vmlinuz in ${packages[*]}"
  echo "$image ($suite)" > "$unpacked/.complete"
  ln -sfn "$version" "$dest/$suite"
  echo "fetch-vm-kernel.sh: $image unpacked in $unpacked"
}

# One suite that cannot be fetched does not stop the others (its VM test is then skipped).
failed=0
for suite in "${suites[@]}"; do
  ( fetch_suite "$suite" ) || { failed=1; continue; }
  if [[ $suite == "$newest_suite" ]]; then ln -sfn "$(readlink "$dest/$suite")" "$dest/current"; fi
done
exit $failed
