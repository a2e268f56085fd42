// What a VM backend's guest would run on here: hardware KVM, a KVM that cannot boot a stock kernel (PVM,
// which runs only kernels built as PVM guests), or none, in which case QEMU emulates the CPU (TCG). Probed
// once per call from the kernel's own answers (/dev/kvm, the loaded KVM module), never from versions.
#pragma once
#include <boost/json/object.hpp>
#include <string>

namespace sandlet::vm_accel {

struct Probe {
  std::string kvm;          // "hardware", "pvm", "absent" or "unusable"
  std::string accelerator;  // what a stock guest kernel gets: "kvm" or "tcg"
  std::string why;          // one sentence: why that accelerator
  std::string qemu;         // the qemu-system-x86_64 found on PATH, "" when none
  boost::json::object json() const;
};

Probe probe();  // once per process

// The accelerator a VM gets, "kvm" or "tcg", for the setting `requested` (named `setting` in errors):
// "" or "auto" is the probe's choice for a stock kernel; "kvm" is KVM whatever serves /dev/kvm (for a guest
// kernel built for it, e.g. a PVM guest kernel on a PVM host); "tcg" is emulation. Another value is
// INVALID_ARGUMENT, "kvm" without a usable /dev/kvm FAILED_PRECONDITION, each naming the setting.
std::string choose(const Probe& p, const std::string& requested, const std::string& setting);

}  // namespace sandlet::vm_accel
