#!/bin/busybox sh
# PID 1 of the test initramfs. Busybox's standalone shell runs applets without symlinks.
# The kernel passes unknown "key=value" boot parameters as environment: slmode= selects the test.
/bin/busybox mount -t proc proc /proc   # standalone applets re-exec /proc/self/exe: proc first
export PATH=/bin
echo "SLM-INIT $(cut -d' ' -f1 /proc/uptime)"
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "SLM-INIT2 $(cut -d' ' -f1 /proc/uptime)"
for m in /modules/*.ko*; do
  [ -e "$m" ] || continue
  insmod "$m" || echo "SLM-INSMOD-FAIL $m"
done
echo "SLM-MODS $(cut -d' ' -f1 /proc/uptime)"
log() { echo "$*" > /dev/console; }
wait_for() { i=0; while [ ! -e "$1" ] && [ $i -lt 200 ]; do usleep 10000; i=$((i+1)); done; [ -e "$1" ]; }
findport() { for p in /sys/class/virtio-ports/*; do [ "$(cat $p/name 2>/dev/null)" = "$1" ] && { echo /dev/${p##*/}; return 0; }; done; return 1; }
case "${slmode:-marker}" in
marker)
  echo "SLM-READY $(cut -d' ' -f1 /proc/uptime)"
  poweroff -f ;;
info)
  echo "SLM-READY $(cut -d' ' -f1 /proc/uptime)"
  uname -a; cat /proc/cmdline; lsmod
  echo "--- virtio devices:"; for d in /sys/bus/virtio/devices/*; do echo "$d $(cat $d/device) $(readlink $d/driver)"; done
  echo "--- platform virtio-mmio:"; ls /sys/bus/platform/devices | grep -i -E 'virtio|LNRO' 
  echo "--- blocks:"; cat /proc/partitions
  echo "--- ports:"; ls -l /dev/vport* /dev/hvc* 2>&1; for p in /sys/class/virtio-ports/*; do echo "$p name=$(cat $p/name)"; done
  echo "--- clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) avail: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource)"
  dmesg | grep -i -E 'tsc|clocksource|calibrat|virtio|LNRO|acpi: .*(ged|GED)|rtc|pit|hpet|err|warn|fail' | head -60
  echo "SLM-DONE"; poweroff -f ;;
serial)
  # One open of the port (a port takes one opener at a time). Reader and writer share fd 3.
  port=$(wait_for /sys/class/virtio-ports/vport0p1 && findport sandlet.0); log "SLM-PORT $port"
  ls -l /dev/vport* > /dev/console
  exec 3<>"$port"
  ( n=0; while true; do
      n=$((n+1))
      r=0; while read -r line <&3 || { r=$?; false; }; do log "SLM-GOT[$n] $line"; [ "$line" = quit ] && break; done
      log "SLM-READER-EOF[$n] rc=$r t=$(cut -d' ' -f1 /proc/uptime)"; usleep 500000
    done ) &
  i=0; while true; do i=$((i+1)); t=$(cut -d' ' -f1 /proc/uptime); echo "guest-line $i t=$t" >&3; log "SLM-WROTE $i rc=$? t=$t -> $(cut -d' ' -f1 /proc/uptime)"; sleep 1; done ;;
porttest)
  port=$(wait_for /sys/class/virtio-ports/vport0p1 && findport sandlet.0); log "SLM-PORT $port"
  /bin/porttest "$port" ${ptdelay:-0} ${ptiters:-80} > /dev/console 2>&1; poweroff -f ;;
serialecho)
  port=$(wait_for /sys/class/virtio-ports/vport0p1 && findport sandlet.0); log "SLM-PORT $port"
  while true; do cat "$port" > "$port"; log "SLM-CAT-EXIT $? $(cut -d' ' -f1 /proc/uptime)"; usleep 200000; done ;;
blk)
  wait_for /dev/vdb; cat /proc/partitions
  mkdir -p /mnt/lower /mnt/rw
  mount -t erofs -o ro /dev/vda /mnt/lower && log "SLM-EROFS-OK" || log "SLM-EROFS-FAIL"
  mount -t ext4 /dev/vdb /mnt/rw && log "SLM-EXT4-OK" || log "SLM-EXT4-FAIL"
  mkdir -p /mnt/rw/upper /mnt/rw/work
  mount -t overlay overlay -o lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work /newroot && log "SLM-OVL-OK" || log "SLM-OVL-FAIL"
  mount | grep -E 'erofs|ext4|overlay' > /dev/console
  mkdir -p /newroot/proc /newroot/sys /newroot/dev
  mount --move /sys /newroot/sys; mount --move /dev /newroot/dev; /bin/busybox mount --move /proc /newroot/proc  # after this, only /bin/busybox X (no /proc/self/exe)
  echo "SLM-SWITCH"
  exec /bin/busybox switch_root /newroot /bin/busybox sh -c '
    echo "SLM-IN-NEWROOT $(cat /hello.txt) $(cut -d" " -f1 /proc/uptime)"; /bin/busybox ls /; /bin/busybox mount | /bin/busybox grep " / "
    echo written-in-guest > /newfile.txt; /bin/busybox sync; echo SLM-CMD-DONE; /bin/busybox poweroff -f' ;;
count)
  [ -n "$slkmsg" ] && exec > /dev/kmsg 2>&1
  grep -E "ttyS|virtio" /proc/interrupts | head -40
  sleep 1; echo "SLM-VIRTIO-DEVS $(ls /sys/bus/virtio/devices | wc -l) PLATFORM $(ls /sys/bus/platform/devices | grep -c -i -E 'LNRO0005|virtio')"
  for d in /sys/bus/virtio/devices/*; do echo "$d id=$(cat $d/device)"; done; cat /proc/partitions
  dmesg | grep -i virtio | head -30; echo SLM-DONE; poweroff -f ;;
counter)
  i=0; while true; do i=$((i+1)); echo "SLM-CNT $i $(cut -d' ' -f1 /proc/uptime)"; usleep 200000; [ -e /tmp/stop ] && break; done ;;
idle)
  echo "SLM-READY $(cut -d' ' -f1 /proc/uptime)"; while true; do sleep 3600; done ;;
poweroff) echo SLM-READY; poweroff -f; echo "SLM-POWEROFF-RETURNED" ;;
reboot) echo SLM-READY; reboot -f; echo "SLM-REBOOT-RETURNED" ;;
shell) exec sh ;;
esac
echo "SLM-FALLTHROUGH"; sleep 5; poweroff -f
