// The rules of the baseline seccomp filter, compiled with libseccomp. Used at build time only (by
// sandlet-seccomp-gen, which embeds the result in the library) and by the unit test that checks the
// embedded program is what these rules compile to.
#include "policy/seccomp/baseline_rules.hpp"

#include <seccomp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sandlet::seccomp {
namespace {

// Denied with EPERM. Grouped by why a sandbox never needs them.
constexpr const char* kDenied[] = {
    // kernel modules, kexec, power
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    // swap, accounting, quotas, host clock
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex",
    // tracing / BPF / perf: large kernel attack surface
    "bpf", "perf_event_open", "lookup_dcookie", "fanotify_init",
    // keyrings are not namespaced
    "keyctl", "add_key", "request_key",
    // raw I/O ports and legacy oddities
    "iopl", "ioperm", "uselib", "nfsservctl", "vhangup", "syslog", "_sysctl", "sysfs",
    // mounts and namespaces: the sandbox's view of the world is fixed by the host
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "setns", "unshare",
    // file handles bypass path-based checks
    "open_by_handle_at", "name_to_handle_at",
    // io_uring and userfaultfd: frequent sources of kernel exploits
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
};

}  // namespace

std::string build_baseline_seccomp_bpf() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) throw std::runtime_error("seccomp_init failed");
  struct Guard {
    scmp_filter_ctx c;
    ~Guard() { seccomp_release(c); }
  } guard{ctx};
  auto check = [](int rc, const std::string& what) {
    if (rc < 0) throw std::runtime_error("seccomp filter: " + what + ": " + std::strerror(-rc));
  };
  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0), name);
  }
  // clone3 stays allowed although BPF cannot read its flags: the init sets every
  // user.max_*_namespaces counter of the sandbox's user namespace to 0, so the kernel refuses new
  // namespaces however they are asked for. The rules below are defence in depth.
  // clone(2) may not create namespaces: one rule per flag, since BPF rules compare, not test bits.
  for (uint64_t flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS,
                        CLONE_NEWCGROUP, CLONE_NEWTIME})
    check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)),
          "clone");
  // Terminal injection into another session's input.
  check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, static_cast<uint32_t>(TIOCSTI))),
        "ioctl TIOCSTI");
  // XFS_IOC_SWAPEXT (_IOWR('X', 109, struct xfs_swapext)): swapping extents with a protected file.
  constexpr uint32_t kXfsIocSwapext = 0xc0c0586d;
  check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, kXfsIocSwapext)),
        "ioctl XFS_IOC_SWAPEXT");

  const int mem = ::memfd_create("sandlet-seccomp", MFD_CLOEXEC);
  if (mem < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  struct CloseMem {
    int fd;
    ~CloseMem() { ::close(fd); }
  } close_mem{mem};
  check(seccomp_export_bpf(ctx, mem), "export");
  const off_t size = ::lseek(mem, 0, SEEK_END);
  std::string bpf(static_cast<size_t>(size), '\0');
  if (::pread(mem, bpf.data(), bpf.size(), 0) != size)
    throw std::runtime_error(std::string("read exported seccomp filter: ") + std::strerror(errno));
  return bpf;
}

}  // namespace sandlet::seccomp
