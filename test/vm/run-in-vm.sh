#!/usr/bin/env bash
# Runs a command as root inside a throw-away virtual machine (QEMU, software emulation: no KVM needed)
# booted with a stock Debian kernel on a pure cgroup v2 host: cgroup2 at /sys/fs/cgroup with the cpu,
# memory and pids controllers and no v1 hierarchy. This machine's own host is hybrid, and its v1 memory
# hierarchy is held by its process manager, so this is where the pure-v2 code path meets real controllers;
# booting older kernels (Debian 12's 6.1, 6.12 LTS) is how the paths chosen by probing them are tested.
#
# usage: run-in-vm.sh --kernel DIR [--disk IMG | --file PATH...] [--memory MiB] [--timeout S] -- CMD [ARG]...
#        run-in-vm.sh --make-disk IMG --file PATH...
#   (SANDLET_VM_APPEND replaces "quiet" on the kernel command line, e.g. "earlyprintk=ttyS0 loglevel=7")
#   --kernel DIR     an unpacked Debian kernel package (its vmlinuz and modules)
#   --file PATH      a file or directory copied into the guest at the same absolute path; for ELF files,
#                    their shared libraries come along (repeatable)
#   --make-disk IMG  only build the guest's root disk with those files, for several runs to share
#   --disk IMG       boot that disk (made by --make-disk); the guest's writes go to a throw-away overlay
# The guest's root is an ext4 disk (like a real host's: file-backed EROFS layers need a filesystem that
# reads pages, which tmpfs is not) with busybox and the files given; /dev/shm is tmpfs; no network.
# Exit status: CMD's; 77 (skip) when QEMU or the kernel is missing; 124 on timeout; 125 when the guest
# died before CMD ended.
set -euo pipefail

kernel_dir= memory=2048 timeout_s=1200 make_disk= disk=
files=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel) kernel_dir=$2; shift 2 ;;
    --file) files+=("$2"); shift 2 ;;
    --make-disk) make_disk=$2; shift 2 ;;
    --disk) disk=$2; shift 2 ;;
    --memory) memory=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "run-in-vm.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 || -n $make_disk ]] || { echo "run-in-vm.sh: no command given" >&2; exit 2; }
[[ -z $disk || ${#files[@]} -eq 0 ]] || { echo "run-in-vm.sh: --file goes with --make-disk, not --disk" >&2; exit 2; }

qemu=$(command -v qemu-system-x86_64 || true)
# (Older packages put the kernel in /boot, newer ones next to its modules in /usr/lib/modules/VERSION.)
vmlinuz=$(ls "$kernel_dir"/boot/vmlinuz-* "$kernel_dir"/{usr/,}lib/modules/*/vmlinuz 2>/dev/null | head -1 || true)
if [[ -z $make_disk ]] && [[ -z $qemu || -z $vmlinuz ]]; then
  echo "SKIP: needs qemu-system-x86_64 and an unpacked kernel in '$kernel_dir' (scripts/setup.sh provides both)"
  exit 77
fi
if [[ -n $disk && ! -s $disk ]]; then
  echo "SKIP: no guest disk $disk (its set-up step did not run or was skipped)"
  exit 77
fi
busybox=$(command -v busybox || true)
[[ -n $busybox ]] || { echo "SKIP: needs busybox (busybox-static)"; exit 77; }
mkfs=$(PATH=$PATH:/usr/sbin:/sbin command -v mkfs.ext4 || true)
[[ -n $mkfs ]] || { echo "SKIP: needs mkfs.ext4 (e2fsprogs)"; exit 77; }

work=$(mktemp -d /tmp/sandlet-vm-XXXXXX)
trap 'rm -rf "$work"' EXIT

# ---- the root disk: busybox, the files (with their shared libraries) and stage 2 -------------------------
build_disk() {  # $1: the image to write
  local out=$1 img=$work/root f
  mkdir -p "$img"/{bin,dev,proc,sys,tmp,root}
  cp "$busybox" "$img/bin/busybox"
  # Files at their own paths, with the shared libraries of every ELF among them (and the loader).
  copy_path() {
    local src=$1
    [[ -e $img$src || -L $img$src ]] && return 0
    mkdir -p "$img$(dirname "$src")"
    cp -a "$src" "$img$src"
    if [[ -L $src ]]; then
      # The link as it is, then what it names (as written: the guest's /lib is not the host's symlink).
      local target
      target=$(readlink "$src")
      [[ $target == /* ]] || target=$(dirname "$src")/$target
      copy_path "$target"
      return 0
    fi
    # Debug information would only make the disk image larger and slower to build.
    if [[ -f $src ]] && head -c4 "$src" | grep -q ELF; then strip --strip-debug "$img$src" 2>/dev/null || true; fi
  }
  for f in "${files[@]}"; do
    copy_path "$f"
    while IFS= read -r elf; do
      { ldd "$elf" 2>/dev/null || true; } | { grep -o '/[^ ]*' || true; } | while IFS= read -r lib; do copy_path "$lib"; done
    done < <(find "$f" -type f -perm -u+x -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
  done
  # Stage 2 (on the disk): the host's usual mounts, a pure cgroup v2 tree, then the command that stage 1
  # copied from the initramfs (so that one disk serves runs of different commands).
  cat > "$img/stage2" <<'STAGE2'
/bin/busybox --install -s /bin
# (Tools given with --file, e.g. iproute2's ip, come before busybox's applets of the same name.)
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up 2>/dev/null
echo "sandlet-vm: $(uname -r), cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers), $(grep -c ^processor /proc/cpuinfo) CPUs"
cd /tmp
sh -c "$(cat /command)" </dev/null
echo "SANDLET-VM-EXIT $?"
poweroff -f
STAGE2
  # The files plus room for what the command writes (runtime roots, layer stores).
  local size_mib=$(( $(du -sm "$img" | cut -f1) + 1024 ))
  rm -f "$out"
  truncate -s "${size_mib}M" "$out"
  "$mkfs" -q -F -L sandlet-vm -d "$img" "$out"
  rm -rf "$img"
}

if [[ -n $make_disk ]]; then
  mkdir -p "$(dirname "$make_disk")"
  build_disk "$make_disk.tmp"
  mv "$make_disk.tmp" "$make_disk"
  echo "run-in-vm.sh: guest disk $make_disk ($(du -sh --apparent-size "$make_disk" | cut -f1), $(du -sh "$make_disk" | cut -f1) used)"
  exit 0
fi
if [[ -z $disk ]]; then
  disk=$work/disk.img
  build_disk "$disk"
fi
# The disk stays as it was built (shared by runs, and each attempt starts from it); the guest writes to a
# temporary overlay.
snapshot=",snapshot=on"

# ---- the initramfs: this kernel's modules, the command, stage 1 -----------------------------------------
initrd=$work/initrd  # just enough to mount the disk
mkdir -p "$initrd"/{bin,dev,proc,sys,newroot,modules}
cp "$busybox" "$initrd/bin/busybox"
# Kernel modules the product needs (built into some kernels, modules in Debian's), dependencies first
# (read from each module's .modinfo: no depmod needed), numbered in load order.
moddir=$(ls -d "$kernel_dir"/{usr/,}lib/modules/* 2>/dev/null | head -1 || true)
loaded=" "
add_module() {  # $1: module name
  local name=$1 ko tmp dep
  [[ $loaded == *" $name "* ]] && return 0
  ko=$(find "$moddir" -name "$name.ko*" -o -name "${name//_/-}.ko*" | head -1)
  # A soft dependency may name an algorithm ("crc32c"): its portable implementation is NAME_generic.
  [[ -n $ko ]] || ko=$(find "$moddir" -name "${name}_generic.ko*" | head -1)
  [[ -n $ko ]] || return 0  # built in
  tmp=$work/$name.ko
  case $ko in
    *.xz) xz -dc "$ko" > "$tmp" ;;
    *.zst) zstd -qdc "$ko" > "$tmp" ;;
    *) cp "$ko" "$tmp" ;;
  esac
  local info
  info=$(readelf -p .modinfo "$tmp" 2>/dev/null || true)
  # Hard dependencies, and the "pre:" soft ones (libcrc32c wants a crc32c implementation loaded first).
  for dep in $(grep -o 'depends=[^ ]*' <<< "$info" | cut -d= -f2 | tr ',' ' ') \
             $(grep -o 'softdep=pre: .*' <<< "$info" | cut -d: -f2-); do
    add_module "$dep"
  done
  loaded+="$name "
  mv "$tmp" "$initrd/modules/$(printf '%02d' "$(wc -w <<< "$loaded")")-$name.ko"
}
# The disk (virtio over PCI), its filesystem, then what the product uses (loop: EROFS layers on kernels
# whose EROFS cannot mount files) and what the tests use (veth: the network tests' fake internet).
for m in virtio_pci virtio_blk ext4 overlay erofs loop veth; do add_module "$m"; done

printf '%q ' "$@" > "$initrd/command"
# Stage 1 (PID 1 of the initramfs): load the modules, mount the disk, re-root onto it. (The initial
# rootfs would not do as the root: pivot_root(2), which every sandbox does, refuses it.)
cat > "$initrd/init" <<'STAGE1'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t devtmpfs devtmpfs /dev
for m in /modules/*.ko; do [ -e "$m" ] && insmod "$m"; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
mount -t ext4 /dev/vda /newroot || { echo "SANDLET-VM-EXIT 125"; poweroff -f; }
cp /command /newroot/command
umount /proc /dev
cd /newroot
mount --move . /
exec chroot . /bin/busybox sh /stage2
STAGE1
chmod +x "$initrd/init"
(cd "$initrd" && find . | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -1 > "$work/initrd.gz"

# Software emulation (TCG): this host's KVM is PVM, which boots only PVM guest kernels. A PC machine, not
# the lighter microvm: under emulation on a busy host, microvm's kernel could not calibrate its TSC (no
# HPET or PM timer to compare with) and often hung or panicked; the PC boots a little slower (the counts
# are in docs/ARCHITECTURE.md).
# A guest that has not reached the command within $boot_timeout s is stuck in its boot: it is killed and
# booted again (3 attempts); once the command runs, its outcome is final.
boot_timeout=120
for attempt in 1 2 3; do
  : > "$work/console.log"
  TMPDIR=$work timeout "$timeout_s" "$qemu" -M pc -accel tcg -cpu max -smp 2 -m "$memory" -nographic -nic none -no-reboot \
    -kernel "$vmlinuz" -initrd "$work/initrd.gz" \
    -drive "file=$disk,format=raw,if=none,id=root,cache=unsafe$snapshot" -device virtio-blk-pci,drive=root \
    -append "console=ttyS0 ${SANDLET_VM_APPEND:-quiet} panic=-1 rdinit=/init" </dev/null >"$work/console.log" 2>&1 &
  qemu_pid=$!
  booted=
  for ((tick = 0; tick < boot_timeout * 10; tick++)); do
    if grep -aq 'sandlet-vm: ' "$work/console.log"; then booted=1; break; fi
    kill -0 "$qemu_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $booted ]]; then
    kill "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
    echo "run-in-vm.sh: attempt $attempt: the guest did not boot; its console:"
    tail -n 15 "$work/console.log"
    continue
  fi
  set +e
  wait "$qemu_pid"
  qemu_rc=$?
  set -e
  cat "$work/console.log"
  [[ $qemu_rc -eq 124 ]] && { echo "run-in-vm.sh: timed out after ${timeout_s}s"; exit 124; }
  rc=$(grep -ao 'SANDLET-VM-EXIT [0-9]*' "$work/console.log" | tail -1 | cut -d' ' -f2 || true)
  # The emulator's known weak spot, not the guest's workload: the kernel patches its own code live
  # (static keys: a breakpoint byte while it rewrites an instruction), and under TCG another vCPU has
  # executed that byte after the patch finished ("Oops: int3", seen once in ~25 runs of 7.3). Only that
  # signature earns one more run; any other crash is final.
  if [[ -z $rc && -z ${retried_int3:-} ]] && grep -aq 'Oops: int3' "$work/console.log"; then
    retried_int3=1
    echo "run-in-vm.sh: the guest kernel died of a stale breakpoint (Oops: int3, an emulation artefact); running again"
    continue
  fi
  [[ -n $rc ]] || { echo "run-in-vm.sh: the guest ended before the command did (QEMU exit $qemu_rc)"; exit 125; }
  exit "$rc"
done
echo "run-in-vm.sh: the guest did not boot (or finish) in 3 attempts"
exit 125
