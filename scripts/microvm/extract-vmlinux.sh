#!/bin/bash
# usage: extract-vmlinux.sh bzImage out.elf  -- the uncompressed ELF vmlinux inside a bzImage (xz/zstd/gzip),
# bootable by QEMU through its PVH entry point (CONFIG_PVH=y): saves the in-guest decompression.
set -euo pipefail
in=$1 out=$2
try() { # $1 magic (printf format) $2 decompressor
  local off
  for off in $(grep -abo "$(printf "$1")" "$in" 2>/dev/null | cut -d: -f1); do
    tail -c +$((off+1)) "$in" | $2 > "$out.tmp" 2>/dev/null || true
    if [[ -s $out.tmp ]] && readelf -h "$out.tmp" >/dev/null 2>&1; then mv "$out.tmp" "$out"; return 0; fi
  done
  return 1
}
LC_ALL=C
try '\3757zXZ\000' 'xz -dc' || try '\050\265\057\375' 'zstd -dcq' || try '\037\213\010' 'gzip -dc' || { rm -f "$out.tmp"; echo "no kernel found" >&2; exit 1; }
readelf -n "$out" | grep -q -i 'Xen' && echo "$out: ELF with PVH (Xen) note" || echo "$out: WARNING no PVH note"
