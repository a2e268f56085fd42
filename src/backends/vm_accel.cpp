#include "backends/vm_accel.hpp"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.hpp"

#include "sys/fd.hpp"

namespace sandlet::vm_accel {
namespace {

bool exists(const char* path) { return ::access(path, F_OK) == 0; }

std::string find_on_path(const char* name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

}  // namespace

boost::json::object Probe::json() const {
  return {{"kvm", kvm}, {"accelerator", accelerator}, {"accelerator_reason", why}, {"qemu", qemu}};
}

static Probe probe_now() {
  Probe p;
  p.qemu = find_on_path("qemu-system-x86_64");
  sys::UniqueFd kvm(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!kvm) {
    p.kvm = "absent";
    p.accelerator = "tcg";
    p.why = std::string("/dev/kvm cannot be opened (") + std::strerror(errno) + "): the CPU is emulated";
    return p;
  }
  if (::ioctl(kvm.get(), KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
    p.kvm = "unusable";
    p.accelerator = "tcg";
    p.why = "/dev/kvm answers with another API version: the CPU is emulated";
    return p;
  }
  if (exists("/sys/module/kvm_pvm")) {
    p.kvm = "pvm";
    p.accelerator = "tcg";
    p.why = "KVM here is PVM, which boots only kernels built as PVM guests: a stock kernel's CPU is emulated "
            "(a PVM guest kernel runs under KVM: its kit in $SANDLET_MICROVM_KERNEL with $SANDLET_MICROVM_ACCEL=kvm)";
    return p;
  }
  if (exists("/sys/module/kvm_intel") || exists("/sys/module/kvm_amd")) {
    p.kvm = "hardware";
    p.accelerator = "kvm";
    p.why = "hardware virtualization through /dev/kvm";
    return p;
  }
  p.kvm = "unusable";
  p.accelerator = "tcg";
  p.why = "/dev/kvm is served by neither kvm_intel nor kvm_amd: the CPU is emulated";
  return p;
}

// Host facts: probed once per process (every runtime open lists every backend; the CLI opens one per run).
Probe probe() {
  static const Probe once = probe_now();
  return once;
}

std::string choose(const Probe& p, const std::string& requested, const std::string& setting) {
  if (requested.empty() || requested == "auto") return p.accelerator;
  if (requested == "tcg") return "tcg";
  if (requested != "kvm")
    throw Error(Code::kInvalidArgument, setting + ": \"" + requested + "\" is not an accelerator (auto, kvm or tcg)");
  if (p.kvm != "hardware" && p.kvm != "pvm")
    throw Error(Code::kFailedPrecondition, setting + " asks for kvm, and /dev/kvm here is " + p.kvm + ": " + p.why);
  return "kvm";
}

}  // namespace sandlet::vm_accel
