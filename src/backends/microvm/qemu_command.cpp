#include "backends/microvm/qemu_command.hpp"

#include <time.h>
#include <x86intrin.h>

namespace sandlet::microvm {

std::vector<std::string> qemu_argv(const VmCommand& c) {
  const auto fdpath = [](int fd) { return "/dev/fd/" + std::to_string(fd); };
  std::vector<std::string> a = {c.qemu};
  // ACPI stays on (Debian's kernels find virtio-mmio devices through it); rtc on (off costs seconds under
  // TCG); no PIT (the TSC is given).
  a.insert(a.end(), {"-M", "microvm,pit=off,pic=on,rtc=on,isa-serial=on,acpi=on"});
  if (c.kvm) a.insert(a.end(), {"-accel", "kvm", "-cpu", "host"});
  else a.insert(a.end(), {"-accel", "tcg,tb-size=64", "-cpu", "max"});
  a.insert(a.end(), {"-smp", std::to_string(c.vcpus), "-m", std::to_string(c.memory_mib),
                     "-nodefaults", "-no-user-config", "-no-reboot", "-display", "none",
                     "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
                     "-chardev", "socket,id=con,fd=" + std::to_string(VmCommand::kConsoleFd), "-serial", "chardev:con",
                     "-chardev", "socket,id=qmp,server=on,wait=off,fd=" + std::to_string(VmCommand::kQmpFd),
                     "-mon", "chardev=qmp,mode=control",
                     "-kernel", fdpath(c.kernel_fd), "-initrd", fdpath(c.initrd_fd)});
  std::string append = "console=ttyS0 quiet panic=-1 cryptomgr.notests sandlet.layers=" + std::to_string(c.layers);
  if (!c.kvm && c.tsc_khz) append += " tsc_early_khz=" + std::to_string(c.tsc_khz) + " tsc=reliable";
  a.insert(a.end(), {"-append", append});
  for (size_t i = 0; i < c.disks.size(); ++i) {
    const VmDisk& d = c.disks[i];
    const std::string id = "d" + std::to_string(i);
    a.insert(a.end(), {"-drive", "file=" + fdpath(d.fd) + ",if=none,format=raw,id=" + id +
                                     (d.readonly ? ",readonly=on" : ",cache=unsafe,discard=unmap"),
                       "-device", "virtio-blk-device,drive=" + id + ",serial=" + d.serial});
  }
  a.insert(a.end(), {"-device", "virtio-serial-device,max_ports=2", "-chardev",
                     "socket,id=chan,fd=" + std::to_string(VmCommand::kChannelFd), "-device",
                     "virtserialport,chardev=chan,name=sandlet.0"});
  a.insert(a.end(), c.extra.begin(), c.extra.end());
  return a;
}

static uint64_t measure_tsc_khz() {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC_RAW, &a);
  const uint64_t t0 = __rdtsc();
  struct timespec nap = {0, 20 * 1000 * 1000};
  nanosleep(&nap, nullptr);
  clock_gettime(CLOCK_MONOTONIC_RAW, &b);
  const uint64_t t1 = __rdtsc();
  const uint64_t ns = static_cast<uint64_t>(b.tv_sec - a.tv_sec) * 1000000000ull + b.tv_nsec - a.tv_nsec;
  return ns ? (t1 - t0) * 1000000ull / ns : 0;
}

uint64_t host_tsc_khz() {
  static const uint64_t once = measure_tsc_khz();
  return once;
}

}  // namespace sandlet::microvm
