#!/bin/bash
# Boot a stock Debian kernel on QEMU -M microvm under TCG into the test initramfs.
# usage: boot.sh KDIR SLMODE [extra qemu args...]
#   KDIR: /var/cache/sandlet/vm-kernel/bookworm (6.1) or .../bookworm-backports (6.12)
#   SLMODE: marker|info|blk|serial|porttest|count|counter|idle|poweroff|reboot (see init.sh)
# Builds (cached in ./out) the uncompressed vmlinux (PVH entry) and the initramfs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); kdir=$1 mode=$2; shift 2
mkdir -p "$here/out"; name=$(basename "$kdir")
bz=$(ls "$kdir"/boot/vmlinuz-* "$kdir"/{usr/,}lib/modules/*/vmlinuz 2>/dev/null | head -1 || true)
[[ -s $here/out/vmlinux-$name ]] || "$here/../microvm/extract-vmlinux.sh" "$bz" "$here/out/vmlinux-$name" >&2
[[ -s $here/out/initrd-$name.cpio ]] || "$here/build-initramfs.sh" "$kdir" "$here/out/initrd-$name.cpio" 2>/dev/null
# Guest TSC under TCG ticks at the host TSC rate: hand the kernel that rate (no PIT/HPET calibration).
[[ -x $here/tscfreq ]] || gcc -O2 -o "$here/tscfreq" "$here/tscfreq.c"
tsc_khz=$("$here/tscfreq")
exec qemu-system-x86_64 \
  -M microvm,pit=off,pic=on,rtc=on,isa-serial=on,acpi=on -accel tcg -cpu max -smp 1 -m 256 \
  -nodefaults -no-user-config -no-reboot -display none -serial stdio \
  -kernel "$here/out/vmlinux-$name" -initrd "$here/out/initrd-$name.cpio" \
  -append "console=ttyS0 quiet tsc_early_khz=$tsc_khz tsc=reliable cryptomgr.notests panic=-1 slmode=$mode" \
  "$@"
