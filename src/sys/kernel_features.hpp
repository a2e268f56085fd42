// What the running kernel offers, found by asking it (each probe is a harmless call whose answer tells
// whether the interface exists), never inferred from its version. Probed once per process and cached:
// the kernel cannot change under a running process. kernel_features() holds the cheap probes (a few
// microseconds each, made at a runtime's first open); the costlier ones below run where they are first
// needed, and in reports. Probes that depend on more than the kernel (a filesystem, a cgroup tree) live
// with what they depend on (image/layer_mounts, backends/container/kernel_support).
#pragma once
#include <string>
#include <vector>

namespace sandlet::sys {

// One probe: the interface, whether it is there, and what the kernel answered (for reports).
struct Probe {
  std::string name;
  bool present = false;
  std::string answer;  // e.g. "clone3(NULL, 0) = EINVAL: the call exists"
};

struct KernelFeatures {
  std::string release;  // uname -r: for reports only, nothing is chosen by it
  bool clone3 = false;
  bool clone_into_cgroup = false;
  bool pidfd = false;         // pidfd_open + pidfd_send_signal
  bool waitid_pidfd = false;  // waitid(P_PIDFD)
  bool close_range = false;
  bool openat2 = false;
  bool mount_api = false;       // fsopen/fsconfig/fsmount/move_mount/open_tree
  bool mount_setattr = false;   // and with it MOUNT_ATTR_IDMAP (per filesystem: checked where used)
  bool overlay = false;         // OverlayFS registered (fsopen loads its module when needed)
  bool seccomp_kill_process = false;
  int landlock_abi = 0;             // 0: none
  std::vector<Probe> probes;        // every probe above, in report order
};

// Probes on the first call (thread-safe); later calls return the same object.
const KernelFeatures& kernel_features();

// OverlayFS takes layers as O_PATH descriptors (fsconfig FSCONFIG_SET_FD "lowerdir+"). ~80 us (an
// overlay context made and freed): asked only when a root filesystem built that way failed, and by reports.
const Probe& overlay_layer_fds_probe();
// user.max_*_namespaces exist for every namespace type the kernel has (what the init sets to 0). ~0.1 ms
// of /proc lookups: for reports (the init itself checks each counter it writes).
const Probe& namespace_counters_probe();

// errno as its symbolic name ("EINVAL"), for probe answers.
std::string errno_name(int e);

}  // namespace sandlet::sys
