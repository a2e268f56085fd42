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

}  // namespace sandlet::vm_accel
