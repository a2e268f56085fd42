// QEMU's command line for one microVM (the `microvm` machine, virtio-mmio devices). Every file QEMU reads
// is passed as an open descriptor (/dev/fd/N): QEMU runs as the sandbox's own unprivileged uid and needs
// no path into the runtime's root. The settings that keep a stock Debian kernel booting under TCG, and
// why, are in docs/backends/microvm.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sandlet::microvm {

struct VmDisk {
  int fd = -1;          // open, inherited by QEMU
  bool readonly = true;
  std::string serial;   // what the guest finds it by ("sl-layer0", "sl-upper")
};

struct VmCommand {
  std::string qemu;                // the binary
  bool kvm = false;                // hardware acceleration; else TCG
  uint64_t tsc_khz = 0;            // TCG: the host TSC rate the guest kernel is told
  uint32_t vcpus = 1;
  uint64_t memory_mib = 256;
  int kernel_fd = -1, initrd_fd = -1;
  std::vector<VmDisk> disks;       // layers (lowest first), then the writable disk
  int layers = 0;                  // how many of `disks` are layers
  std::vector<std::string> extra;  // more devices (the NIC: vm_network.hpp)
  // Fixed descriptor numbers in QEMU (host_mux.cpp hands them over): the channel, the console, QMP.
  static constexpr int kChannelFd = 3, kConsoleFd = 4, kQmpFd = 5;
};

std::vector<std::string> qemu_argv(const VmCommand& c);

// The host's TSC rate in kHz, measured once per process (a TCG guest's TSC ticks at the host's rate and
// its kernel cannot calibrate it: docs/backends/microvm.md).
uint64_t host_tsc_khz();

// Most disks QEMU's microvm machine takes (virtio-mmio slots, minus the serial device).
constexpr int kMaxDisks = 22;

}  // namespace sandlet::microvm
