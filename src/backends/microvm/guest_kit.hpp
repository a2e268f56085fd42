// What a microVM boots: a kernel kit (an uncompressed vmlinux and the modules the guest init loads, made by
// the set-up from Debian's stock kernel package: scripts/microvm/make-kernel-kit.sh) and the initramfs the
// library builds from it at first use: sandlet-vm-init as /init plus those modules, cached by content.
#pragma once
#include <string>
#include <vector>

namespace sandlet::microvm {

struct KernelKit {
  std::string dir;       // the kit's directory
  std::string vmlinux;   // dir/vmlinux
  std::string release;   // e.g. "6.1.0-50-amd64"
  std::vector<std::string> modules;  // file names under dir/modules, in load order
};

// Where the kit is: `configured` when not empty (a runtime's choice), else $SANDLET_MICROVM_KERNEL, else
// /var/cache/sandlet/microvm-kernel/default. INVALID_ARGUMENT (naming the setting) or NOT_FOUND when it is
// not a usable kit.
// `modules`: read the module list too (the probe of every runtime open does not).
KernelKit find_kernel_kit(const std::string& configured, bool modules = true);
// Where it would be looked for, for messages and the backend list.
std::string kernel_kit_location(const std::string& configured);

// $SANDLET_MICROVM_ACCEL ("" when unset): the accelerator asked for (vm_accel::choose). "kvm" goes with a
// kernel kit built for the host's KVM (a PVM guest kernel where KVM is PVM, as on machines whose KVM
// cannot boot a stock kernel).
std::string accel_setting();

// The initramfs for `kit` in `cache_dir` (made once; named by the SHA-256 of what it holds). Thread-safe
// across processes (written under a temporary name, renamed into place).
std::string initramfs_for(const KernelKit& kit, const std::string& cache_dir);

// The embedded sandlet-vm-init as an executable file in `dir` (named by its SHA-256), for the host mux.
std::string vm_init_binary(const std::string& dir);

}  // namespace sandlet::microvm
