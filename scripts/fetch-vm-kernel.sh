#!/usr/bin/env bash
# Fetches the kernel that the pure cgroup v2 test boots in a throw-away VM (test/vm/run-in-vm.sh): the
# newest Debian kernel from the backports suite of the next release, unpacked (nothing is installed; the
# host keeps its own kernel). Idempotent: once unpacked, it touches no network.
#
# usage: fetch-vm-kernel.sh [DIR]   (default: $SANDLET_VM_KERNEL_DIR, else /var/cache/sandlet/vm-kernel)
# $SANDLET_VM_KERNEL_SUITE picks another suite (e.g. sid) should the backports one carry no kernel; the
# kernel must be Linux 6.15 or later (see README, host requirements).
# Leaves DIR/current -> the unpacked package (vmlinuz and modules). The apt archive comes from this
# machine's own apt sources, so a local mirror is used when one is configured.
set -euo pipefail

dest=${1:-${SANDLET_VM_KERNEL_DIR:-/var/cache/sandlet/vm-kernel}}
suite=${SANDLET_VM_KERNEL_SUITE:-trixie-backports}
die() { echo "fetch-vm-kernel.sh: $*" >&2; exit 1; }

if [[ -e $dest/current/.complete ]]; then
  echo "fetch-vm-kernel.sh: $(cat "$dest/current/.complete") already in $dest"
  exit 0
fi

# The Debian archive this machine uses: the first non-security URI of its apt sources.
archive=$(
  {
    grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' || true
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | sed 's/\[[^]]*\]//' | awk '{print $2}' || true
  } | grep -v security | head -1 || true
)
[[ -n $archive ]] || die "no Debian archive found in this machine's apt sources"

mkdir -p "$dest"
work=$(mktemp -d "$dest/.fetch-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/debs"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] $archive $suite main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" -q update >/dev/null || die "apt-get update of $suite failed"

# linux-image-amd64 names the versioned package; newer kernels split it into -binary and -modules.
image=$(apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null | grep -o 'linux-image-[0-9][^ ]*' | head -1)
[[ -n $image ]] || die "no linux-image-amd64 in $suite"
version=${image#linux-image-}
packages=("$image")
for part in binary modules; do
  if apt-cache "${apt_opts[@]}" show "linux-$part-$version" >/dev/null 2>&1; then packages+=("linux-$part-$version"); fi
done
(cd "$work/debs" && apt-get "${apt_opts[@]}" -q download "${packages[@]}" >/dev/null 2>&1) ||
  die "download of ${packages[*]} failed"

unpacked=$dest/$version
rm -rf "$unpacked"
mkdir -p "$unpacked"
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$unpacked"; done
found=
for f in "$unpacked"/boot/vmlinuz-* "$unpacked"/{usr/,}lib/modules/*/vmlinuz; do [[ -e $f ]] && found=$f; done
[[ -n $found ]] || die "no vmlinuz in ${packages[*]}"
echo "$image ($suite)" > "$unpacked/.complete"
ln -sfn "$version" "$dest/current"
echo "fetch-vm-kernel.sh: $image unpacked in $unpacked"
