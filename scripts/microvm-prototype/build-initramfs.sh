#!/bin/bash
# usage: build-initramfs.sh KERNEL_DIR OUT.cpio[.gz|.zst] [--keep-xz] [--only-modules "m1 m2"]
# KERNEL_DIR: an unpacked Debian linux-image package (e.g. /var/cache/sandlet/vm-kernel/bookworm).
# Packs static busybox, the kernel modules listed below (+ their depends= and softdep pre: deps,
# read from each .ko's .modinfo, i.e. what modules.dep says), numbered in load order, and ./init.sh as /init.
set -euo pipefail
kdir=$1 out=$2; shift 2
keep_xz= mods="virtio_mmio virtio_blk virtio_console crc32c_generic erofs overlay ext4"
while [[ $# -gt 0 ]]; do case $1 in --keep-xz) keep_xz=1; shift;; --only-modules) mods=$2; shift 2;; *) echo "bad arg $1" >&2; exit 2;; esac; done
here=$(cd "$(dirname "$0")" && pwd)
moddir=$(ls -d "$kdir"/{usr/,}lib/modules/* 2>/dev/null | head -1 || true)
builtin="$moddir/modules.builtin"
work=$(mktemp -d /tmp/sandlet-initrd.XXXXXX); trap 'rm -rf "$work"' EXIT
root=$work/root; mkdir -p "$root"/{bin,dev,proc,sys,tmp,run,mnt,newroot,modules}
mknod "$root/dev/console" c 5 1; mknod "$root/dev/null" c 1 3
cp "$(readlink -f "$(command -v busybox)")" "$root/bin/busybox"
n=0 loaded=" "
add() { # $1 module name (as in depends=, '-' and '_' equivalent)
  local name=${1//-/_} ko f dep info
  [[ $loaded == *" $name "* ]] && return 0
  ko=$(find "$moddir/kernel" \( -name "$name.ko*" -o -name "${name//_/-}.ko*" \) | head -1)
  if [[ -z $ko ]]; then
    # crypto aliases: "crc32c" / "crypto-crc32c" -> crc32c_generic
    local alias=${name#crypto_}; ko=$(find "$moddir/kernel" -name "${alias}_generic.ko*" | head -1)
    [[ -n $ko ]] && name=${alias}_generic
    [[ $loaded == *" $name "* ]] && return 0
  fi
  if [[ -z $ko ]]; then echo "  $1: built-in or absent" >&2; loaded+="$name "; return 0; fi
  f=$work/$name.tmp.ko
  case $ko in *.xz) xz -dc "$ko" > "$f" ;; *) cp "$ko" "$f" ;; esac
  info=$(readelf -p .modinfo "$f")
  [[ -n $keep_xz && $ko == *.xz ]] && cp "$ko" "$f"
  for dep in $(grep -o 'depends=[^ ]*' <<<"$info" | cut -d= -f2 | tr ',' ' ') $(grep -o 'softdep=pre: .*' <<<"$info" | cut -d: -f2-); do add "$dep"; done
  n=$((n+1)); local ext=.ko; [[ -n $keep_xz && $ko == *.xz ]] && ext=.ko.xz
  mv "$f" "$root/modules/$(printf %02d $n)-$name$ext"; loaded+="$name "
}
for m in $mods; do add "$m"; done
ls "$root/modules" >&2
cp "$here/init.sh" "$root/init"; chmod +x "$root/init"
[[ -d $here/guest-bin ]] && cp "$here"/guest-bin/* "$root/bin/"  # test helpers (static)
(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null) > "$work/out.cpio"
case $out in *.gz) gzip -1 < "$work/out.cpio" > "$out";; *.zst) zstd -q -3 < "$work/out.cpio" > "$out";; *) cp "$work/out.cpio" "$out";; esac
ls -la "$out" >&2
