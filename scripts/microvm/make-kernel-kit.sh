#!/usr/bin/env bash
# Makes the microvm backend's guest kernel kit from an unpacked Debian kernel package (fetch-vm-kernel.sh):
#   OUT/vmlinux   the uncompressed ELF kernel (QEMU boots it through its PVH entry: no in-guest unpacking)
#   OUT/modules/  the modules the guest init loads (virtio-mmio, block, console, network, EROFS, OverlayFS,
#                 ext4 and what they depend on), decompressed, with `order` listing them in load order
#   OUT/release   the kernel release
# The library builds its initramfs from the kit at first use (docs/backends/microvm.md). Idempotent.
#
# usage: make-kernel-kit.sh KERNEL_DIR OUT
set -euo pipefail
kdir=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "make-kernel-kit.sh: $*" >&2; exit 1; }
wanted="virtio_mmio virtio_blk virtio_console virtio_net crc32c_generic erofs overlay ext4"
# A kit made for another module list is made again.
[[ -e $out/.complete && $(cat "$out/wanted" 2>/dev/null) == "$wanted" ]] &&
  { echo "make-kernel-kit.sh: $(cat "$out/release") already in $out"; exit 0; }
moddir=$(ls -d "$kdir"/{usr/,}lib/modules/* 2>/dev/null | head -1 || true)
bz=$(ls "$kdir"/boot/vmlinuz-* "$moddir"/vmlinuz 2>/dev/null | head -1 || true)
[[ -n $moddir && -n $bz ]] || die "no kernel and modules under $kdir"
mkdir -p "$(dirname "$out")"
work=$(mktemp -d "${out%/}.tmp-XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -p "$work/modules"
"$here/extract-vmlinux.sh" "$bz" "$work/vmlinux" >/dev/null

loaded=" " order=()
add() {  # $1: a module name as depends= writes it ('-' and '_' alike); its dependencies first
  local name=${1//-/_} ko f info dep alias
  [[ $loaded == *" $name "* ]] && return 0
  ko=$(find "$moddir/kernel" \( -name "$name.ko*" -o -name "${name//_/-}.ko*" \) | head -1)
  if [[ -z $ko ]]; then  # crypto aliases: crc32c -> crc32c_generic
    alias=${name#crypto_}
    ko=$(find "$moddir/kernel" -name "${alias}_generic.ko*" | head -1)
    [[ -n $ko ]] && name=${alias}_generic
    [[ $loaded == *" $name "* ]] && return 0
  fi
  loaded+="$name "
  [[ -n $ko ]] || return 0  # built in
  f=$work/modules/$name.ko
  case $ko in *.xz) xz -dc "$ko" > "$f" ;; *.zst) zstd -dcq "$ko" > "$f" ;; *) cp "$ko" "$f" ;; esac
  info=$(readelf -p .modinfo "$f")
  for dep in $(grep -o 'depends=[^ ]*' <<<"$info" | cut -d= -f2 | tr ',' ' ') \
             $(grep -o 'softdep=pre: .*' <<<"$info" | cut -d: -f2-); do
    add "$dep"
  done
  order+=("$name.ko")
}
for m in $wanted; do add "$m"; done
echo "$wanted" > "$work/wanted"
printf '%s\n' "${order[@]}" > "$work/modules/order"
basename "$moddir" > "$work/release"
date -u +%FT%TZ > "$work/.complete"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
echo "make-kernel-kit.sh: $(cat "$out/release") in $out (${#order[@]} modules)"
