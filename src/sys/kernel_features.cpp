#include "sys/kernel_features.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "sys/fd.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::sys {

std::string errno_name(int e) {
  const char* n = ::strerrorname_np(e);
  return n ? n : "errno " + std::to_string(e);
}

namespace {

// The answer of a call that returned `rc` with errno `e`, as "<call> = <result>".
std::string answer(const char* call, long rc, int e) {
  return std::string(call) + " = " + (rc < 0 ? errno_name(e) : std::to_string(rc));
}

// A call that exists answers anything but ENOSYS to arguments it must reject.
Probe exists(const char* name, const char* call, long rc) {
  int e = errno;
  Probe p{name, !(rc < 0 && e == ENOSYS), answer(call, rc, e)};
  return p;
}

Probe probe_clone_into_cgroup() {
  // clone_args grew its `cgroup` field with CLONE_INTO_CGROUP. A kernel whose clone_args is shorter
  // refuses a longer one whose extra bytes are set (E2BIG) before anything else; one that knows the
  // field goes on and rejects the invalid exit signal (EINVAL). Nothing is copied or created.
  struct clone_args args = {};
  args.flags = CLONE_INTO_CGROUP;
  args.cgroup = 1;
  args.exit_signal = 1ull << 40;
  long rc = ::syscall(SYS_clone3, &args, sizeof args);
  int e = errno;
  if (rc == 0) ::_exit(0);  // cannot happen (see above); never let a copy of the host process run on
  return Probe{"clone_into_cgroup", rc < 0 && e == EINVAL,
               answer("clone3(clone_args with its cgroup field set, invalid exit signal)", rc, e)};
}

Probe probe_pidfd(bool* waitid_ok, std::string* waitid_answer) {
  // Arguments each call rejects (no descriptor is made): pid 0, and a descriptor that is not a pidfd.
  UniqueFd not_a_pidfd(::open("/", O_PATH | O_CLOEXEC));
  long open_rc = ::syscall(SYS_pidfd_open, 0, 0);
  int open_e = errno;
  long sig = ::syscall(SYS_pidfd_send_signal, not_a_pidfd.get(), 0, nullptr, 0);
  int sig_e = errno;
  siginfo_t info;
  int w = ::waitid(P_PIDFD, static_cast<id_t>(not_a_pidfd.get()), &info, WEXITED | WNOHANG);
  int w_e = errno;
  // A kernel with P_PIDFD finds the descriptor is no pidfd (EBADF); one without rejects the id type (EINVAL).
  *waitid_ok = w < 0 && w_e == EBADF;
  *waitid_answer = answer("waitid(P_PIDFD, a non-pidfd descriptor)", w, w_e);
  bool ok = !(open_rc < 0 && open_e == ENOSYS) && !(sig < 0 && sig_e == ENOSYS);
  return Probe{"pidfd", ok,
               answer("pidfd_open(0)", open_rc, open_e) + ", " + answer("pidfd_send_signal(a non-pidfd)", sig, sig_e)};
}

Probe probe_mount_api() {
  // Each call with arguments it rejects before doing any work (an unknown flag, no descriptor).
  long fs = ::syscall(SYS_fsopen, "tmpfs", 1u << 31);
  int e = errno;
  if (fs >= 0) ::close(static_cast<int>(fs));
  bool ok = !(fs < 0 && e == ENOSYS);
  std::string how = answer("fsopen(tmpfs, unknown flag)", fs, e);
  struct Call {
    const char* text;
    long rc;
    int e;
  };
  auto call = [](const char* text, long rc) { return Call{text, rc, errno}; };
  const Call calls[] = {
      call("fsconfig(-1)", ::syscall(SYS_fsconfig, -1, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0)),
      call("fsmount(-1)", ::syscall(SYS_fsmount, -1, 0, 0)),
      call("move_mount(-1)", ::syscall(SYS_move_mount, -1, "", -1, "", 0)),
      call("open_tree(-1)", ::syscall(SYS_open_tree, -1, "", 0)),
  };
  for (const Call& c : calls) {
    if (c.rc < 0 && c.e == ENOSYS) ok = false;
    how += ", " + answer(c.text, c.rc, c.e);
  }
  return Probe{"mount_api", ok, how};
}

Probe probe_mount_setattr() {
  struct mount_attr attr = {};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  long rc = ::syscall(SYS_mount_setattr, -1, "", AT_EMPTY_PATH, &attr, sizeof attr);
  int e = errno;
  return Probe{"mount_setattr", rc < 0 && e == EBADF, answer("mount_setattr(-1, MOUNT_ATTR_RDONLY)", rc, e)};
}

// OverlayFS is there: listed in /proc/filesystems, or its module loads when asked for (fsopen does that).
void probe_overlay(KernelFeatures& f) {
  auto listed = read_file_if_exists("/proc/filesystems", 1 << 16);
  if (listed && listed->find("\toverlay\n") != std::string::npos) {
    f.overlay = true;
    f.probes.push_back(Probe{"overlay", true, "listed in /proc/filesystems"});
    return;
  }
  long fs = ::syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  int e = errno;
  if (fs >= 0) ::close(static_cast<int>(fs));
  f.overlay = fs >= 0;
  f.probes.push_back(Probe{"overlay", f.overlay, answer("fsopen(overlay)", fs, e)});
}

Probe probe_seccomp() {
  uint32_t action = SECCOMP_RET_KILL_PROCESS;
  long rc = ::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action);
  int e = errno;
  return Probe{"seccomp_filter", rc == 0, answer("seccomp(GET_ACTION_AVAIL, KILL_PROCESS)", rc, e)};
}

Probe probe_namespace_counters() {
  bool ok = true;
  std::string how;
  for (const char* kind : {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time"}) {
    if (::access((std::string("/proc/self/ns/") + kind).c_str(), F_OK) != 0) {
      how += std::string(how.empty() ? "" : ", ") + kind + ": no such namespace";
      continue;
    }
    bool counter = ::access((std::string("/proc/sys/user/max_") + kind + "_namespaces").c_str(), F_OK) == 0;
    if (!counter) {
      ok = false;
      how += std::string(how.empty() ? "" : ", ") + "no user.max_" + kind + "_namespaces";
    }
  }
  if (ok && how.empty()) how = "user.max_{user,mnt,pid,net,ipc,uts,cgroup,time}_namespaces exist";
  return Probe{"namespace_counters", ok, how};
}

KernelFeatures probe_all() {
  KernelFeatures f;
  struct utsname u;
  if (::uname(&u) == 0) f.release = u.release;

  Probe clone3 = exists("clone3", "clone3(NULL, 0)", ::syscall(SYS_clone3, nullptr, 0));
  f.clone3 = clone3.present;
  f.probes.push_back(clone3);
  Probe into = f.clone3 ? probe_clone_into_cgroup() : Probe{"clone_into_cgroup", false, "not probed: no clone3"};
  f.clone_into_cgroup = into.present;
  f.probes.push_back(into);
  std::string waitid_answer;
  Probe pidfd = probe_pidfd(&f.waitid_pidfd, &waitid_answer);
  f.pidfd = pidfd.present;
  f.probes.push_back(pidfd);
  f.probes.push_back(Probe{"waitid_pidfd", f.waitid_pidfd, waitid_answer});
  // Descriptors this high are never open (nr_open caps them far lower): nothing is closed.
  Probe cr = exists("close_range", "close_range(2^30, 2^30)", ::syscall(SYS_close_range, 1u << 30, 1u << 30, 0));
  f.close_range = cr.present;
  f.probes.push_back(cr);
  Probe o2 = exists("openat2", "openat2(\"/\", how = NULL, size 0)", ::syscall(SYS_openat2, AT_FDCWD, "/", nullptr, 0));
  f.openat2 = o2.present;
  f.probes.push_back(o2);
  Probe api = probe_mount_api();
  f.mount_api = api.present;
  f.probes.push_back(api);
  Probe setattr = probe_mount_setattr();
  f.mount_setattr = setattr.present;
  f.probes.push_back(setattr);
  probe_overlay(f);
  Probe sc = probe_seccomp();
  f.seccomp_kill_process = sc.present;
  f.probes.push_back(sc);
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  int e = errno;
  f.landlock_abi = abi > 0 ? static_cast<int>(abi) : 0;
  f.probes.push_back(Probe{"landlock", abi > 0, answer("landlock_create_ruleset(VERSION)", abi, e)});
  return f;
}

}  // namespace

const KernelFeatures& kernel_features() {
  static const KernelFeatures features = probe_all();  // (thread-safe initialisation)
  return features;
}

const Probe& overlay_layer_fds_probe() {
  static const Probe probe = [] {
    // The parameter is checked when it is set: no mount is made.
    long fs = ::syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
    if (fs < 0) return Probe{"overlay_layer_fds", false, answer("fsopen(overlay)", fs, errno)};
    UniqueFd ctx(static_cast<int>(fs));
    UniqueFd dir(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    long rc = ::syscall(SYS_fsconfig, ctx.get(), FSCONFIG_SET_FD, "lowerdir+", nullptr, dir.get());
    int e = errno;
    return Probe{"overlay_layer_fds", rc == 0,
                 answer("fsconfig(overlay, FSCONFIG_SET_FD, \"lowerdir+\", O_PATH descriptor)", rc, e)};
  }();
  return probe;
}

const Probe& namespace_counters_probe() {
  static const Probe probe = probe_namespace_counters();
  return probe;
}

}  // namespace sandlet::sys
