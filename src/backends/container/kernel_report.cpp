#include "backends/container/kernel_report.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <memory>
#include <vector>

#include <pthread.h>

#include "backends/container/container_backend.hpp"
#include "backends/container/kernel_support.hpp"
#include "common/clone3_on_stack.hpp"
#include "common/error.hpp"
#include "spec/weaker_guarantees.hpp"
#include "sys/fd.hpp"
#include "sys/fs_util.hpp"
#include "sys/kernel_features.hpp"
#include "sys/mount_api.hpp"
#include "sys/private_mount_ns.hpp"

namespace json = boost::json;

namespace sandlet::container {
namespace {

constexpr const char* kRequired = "required: without it the container backend cannot run";

// What each probed feature is for, and the path taken with and without it.
struct Use {
  const char* name;
  const char* used_for;
  const char* with;     // path when present
  const char* without;  // path (or consequence) when absent
};
constexpr Use kUses[] = {
    {"clone3", "starting each sandbox's init in its namespaces, and commands inside", "clone3", kRequired},
    {"clone_into_cgroup", "starting inits and commands directly in their cgroup (no migration)",
     "CLONE_INTO_CGROUP", kRequired},
    {"pidfd", "signalling sandbox inits without pid reuse races", "pidfd_open + pidfd_send_signal", kRequired},
    {"waitid_pidfd", "reaping sandbox inits through their pidfd", "waitid(P_PIDFD)", kRequired},
    {"close_range", "closing inherited descriptors in new processes", "close_range", kRequired},
    {"openat2", "file transfer inside a sandbox (no magic-link traversal)", "openat2(RESOLVE_NO_MAGICLINKS)",
     kRequired},
    {"mount_api", "root filesystems and /dev built as detached mounts (never in the host's mount table)",
     "fsopen/fsconfig/fsmount/move_mount/open_tree", kRequired},
    {"mount_setattr", "idmapped layers: root inside owns what the host's root owns in an image",
     "MOUNT_ATTR_IDMAP", kRequired},
    {"overlay", "the root filesystem: OverlayFS of the layers and a per-sandbox tmpfs upper", "OverlayFS",
     kRequired},
    {"overlay_layer_fds", "handing layers to OverlayFS",
     "as descriptors of detached mounts (fsconfig FSCONFIG_SET_FD lowerdir+)",
     "by path: the detached layers are attached in a private mount namespace of a helper thread (never the "
     "host's), OverlayFS is mounted from their paths and handed over detached as before; slower per root "
     "filesystem (a round trip to that thread and one extra tmpfs)"},
    {"seccomp_filter", "the baseline seccomp filter", "SECCOMP_RET_KILL_PROCESS available", kRequired},
    {"namespace_counters", "no namespace can be created inside (user.max_*_namespaces = 0 in the sandbox)",
     "per-user-namespace counters",
     "the init sets the counters that exist; a namespace type without one can be created inside"},
    {"landlock", "nothing yet (the policy layer will)", "not used by this version", "not used by this version"},
};

const Use* use_of(const std::string& name) {
  for (const Use& u : kUses)
    if (name == u.name) return &u;
  return nullptr;
}

json::object row(const std::string& name, bool present, const std::string& used_for, const std::string& probe,
                 const std::string& path) {
  json::object o;
  o["name"] = name;
  o["present"] = present;
  o["used_for"] = used_for;
  o["probe"] = probe;
  o["path"] = path;
  return o;
}

#if defined(SANDLET_HAVE_CLONE3_ON_STACK)
// The child below shares our memory: raw system calls only (no errno, no libc).
long raw_syscall3(long n, long a, long b, long c) {
  long ret;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}
struct HolderPipe {
  int read_fd, write_fd;
};
// Holds its user namespace until the parent writes a byte or goes away (its copy of the write end is closed first).
int hold_userns(void* arg) {
  auto* p = static_cast<HolderPipe*>(arg);
  raw_syscall3(SYS_close, p->write_fd, 0, 0);
  char b;
  raw_syscall3(SYS_read, p->read_fd, reinterpret_cast<long>(&b), 1);
  return 0;
}
#endif

// MOUNT_ATTR_IDMAP on a detached tmpfs. Needs a user namespace other than the host's, with a mapping:
// a short-lived child holds one.
std::pair<bool, std::string> probe_idmap_tmpfs() {
#if defined(SANDLET_HAVE_CLONE3_ON_STACK)
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {false, "not probed: pipe: " + sys::errno_name(errno)};
  sys::UniqueFd read_end(fds[0]), write_end(fds[1]);
  HolderPipe pipe{fds[0], fds[1]};
  constexpr size_t kStack = 16 * 1024;
  auto stack = std::make_unique<char[]>(kStack);
  int pidfd = -1;
  struct clone_args args = {};
  args.flags = CLONE_VM | CLONE_NEWUSER | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = 0;
  args.stack = reinterpret_cast<uint64_t>(stack.get());
  args.stack_size = kStack;
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);  // no handler may run on the child's stack
  long pid = sandlet_clone3_on_stack(&args, sizeof args, &hold_userns, &pipe);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return {false, "not probed: cannot make a user namespace (clone3: " + sys::errno_name(static_cast<int>(-pid)) + ")"};
  sys::UniqueFd child(pidfd);
  // However this function is left: the child is let go and reaped before its stack is freed.
  struct Release {
    int write_fd, pidfd;
    ~Release() {
      (void)!::write(write_fd, "x", 1);
      siginfo_t info;
      while (::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED | __WALL) < 0 && errno == EINTR) {
      }
    }
  } release{write_end.get(), child.get()};
  const std::string proc = "/proc/" + std::to_string(pid);
  std::string result;
  bool ok = false;
  try {
    sys::write_existing(proc + "/uid_map", "0 65534 1\n");
    sys::write_existing(proc + "/gid_map", "0 65534 1\n");
    sys::UniqueFd userns(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    if (!userns) throw_errno("open its user namespace");
    sys::UniqueFd tmpfs = sys::FsContext("tmpfs").mount(0);
    struct mount_attr attr = {};
    attr.attr_set = MOUNT_ATTR_IDMAP;
    attr.userns_fd = static_cast<uint64_t>(userns.get());
    long rc = ::syscall(SYS_mount_setattr, tmpfs.get(), "", AT_EMPTY_PATH, &attr, sizeof attr);
    int e = errno;
    ok = rc == 0;
    result = "mount_setattr(detached tmpfs, MOUNT_ATTR_IDMAP) = " + (ok ? std::string("0") : sys::errno_name(e));
  } catch (const std::exception& e) {
    result = std::string("not probed: ") + e.what();
  }
  return {ok, result};
#else
  return {false, "not probed on this architecture"};
#endif
}

}  // namespace

std::string kernel_report_json(const sys::CgroupSystem* cgroups, const image::LayerMounts* layers) {
  const sys::KernelFeatures& f = sys::kernel_features();
  json::array features;
  std::vector<sys::Probe> probes = f.probes;
  probes.push_back(sys::overlay_layer_fds_probe());
  probes.push_back(sys::namespace_counters_probe());
  for (const sys::Probe& p : probes) {
    const Use* u = use_of(p.name);
    std::string path = !u ? "" : p.present ? u->with : u->without;
    if (p.name == "landlock" && p.present) path += " (ABI " + std::to_string(f.landlock_abi) + " here)";
    features.push_back(row(p.name, p.present, u ? u->used_for : "", p.answer, path));
    if (p.name == "overlay_layer_fds" && !p.present && f.overlay) {
      std::string why;
      try {
        sys::PrivateMountNamespace::get();
      } catch (const Error& e) {
        why = e.what();
      }
      features.push_back(row("private_mount_namespace", why.empty(), "the by-path overlay's helper thread",
                             why.empty() ? "unshare(CLONE_NEWNS) + pivot_root onto a tmpfs on a thread: done" : why,
                             why.empty() ? "a helper thread in a mount namespace of its own"
                                         : "unavailable: root filesystems cannot be built on this kernel"));
    }
  }
  auto [idmap_tmpfs, idmap_answer] = probe_idmap_tmpfs();
  features.push_back(row("idmap_tmpfs", idmap_tmpfs, "layers given as directories on tmpfs", idmap_answer,
                         idmap_tmpfs ? "idmapped like any other layer"
                                     : "such a layer is refused (UNIMPLEMENTED); store layers and directories on "
                                       "ext4, xfs or btrfs are not affected"));

  json::array weaker;
  if (cgroups && !cgroups->v2_root.empty()) {
    features.push_back(row("cgroup2", true, "one cgroup per sandbox, per-exec child groups", cgroups->describe(),
                           cgroups->unified ? "limits on cgroup v2 controllers"
                                            : "limits on the v1 controllers, cgroup2 for kill and CLONE_INTO_CGROUP"));
    const HostGuarantees& h = host_guarantees(*cgroups);
    features.push_back(row("cgroup_kill", h.cgroup_kill, "killing every process of a command or sandbox",
                           h.cgroup_kill_answer,
                           h.cgroup_kill ? "cgroup.kill"
                                         : "the command's process group is killed instead (weaker guarantee "
                                           "exec_kill_descendants)"));
    features.push_back(row("swap_accounting", h.swap_accounted, "limits.memory bounding swap too", h.swap_answer,
                           h.swap_accounted ? "swap bounded with RAM"
                           : h.swap_on      ? "RAM bounded only (weaker guarantee memory_swap)"
                                            : "no swap to bound"));
    for (const auto& w : weaker_guarantees(h, nullptr)) {
      json::object o;
      o["name"] = w.name;
      for (const auto& g : kWeakerGuarantees)
        if (g.name == w.name) o["guarantee"] = std::string(g.guarantee);
      o["why"] = w.why;
      weaker.push_back(std::move(o));
    }
  } else {
    features.push_back(row("cgroup2", false, "one cgroup per sandbox, per-exec child groups", "no cgroup2 tree found",
                           kRequired));
  }

  std::string store_path = "not probed";
  if (layers) {
    const image::LayerMounts::Backing& b = layers->backing();
    features.push_back(row("erofs", b.erofs, "store layers (content-addressed EROFS images)", b.erofs ? "fsopen(erofs): done" : b.answer,
                           b.erofs ? "EROFS" : "store layers are refused (UNIMPLEMENTED)"));
    if (b.erofs) {
      features.push_back(row("erofs_file_backed", b.file_backed, "mounting the store's image and blob files",
                             b.answer,
                             b.file_backed ? "file-backed EROFS mounts (no loop device)"
                                           : "each image and blob through a read-only loop device, freed with its "
                                             "mount; a blob shared by several layers is cached once per layer"));
      features.push_back(row("loop_devices", b.loop_unavailable.empty(), "EROFS where file-backed mounts are missing",
                             b.loop_unavailable.empty() ? "/dev/loop-control opens" : b.loop_unavailable,
                             b.file_backed ? "not needed here" : b.loop_unavailable.empty() ? "LOOP_CONFIGURE, autoclear, direct I/O" : "unavailable: store layers are refused (UNIMPLEMENTED)"));
      store_path = b.file_backed ? "file-backed EROFS"
                   : b.loop_unavailable.empty() ? "EROFS on loop devices"
                                                : "unavailable: " + b.loop_unavailable;
    } else {
      store_path = "unavailable: no EROFS";
    }
  }

  json::object paths;
  paths["overlay"] = !f.overlay ? "unavailable: no OverlayFS"
                     : sys::overlay_layer_fds_probe().present ? "layer descriptors"
                                           : "layer paths in a private mount namespace";
  paths["store_layers"] = store_path;

  json::object out;
  out["kernel"] = f.release;
  out["container_backend"] = probe().reason;  // the kernel, and the host (root, user namespaces, cgroup2)
  out["features"] = std::move(features);
  out["weaker_guarantees"] = std::move(weaker);
  out["paths"] = std::move(paths);
  return json::serialize(out);
}

}  // namespace sandlet::container
