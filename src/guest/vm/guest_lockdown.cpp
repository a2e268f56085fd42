#include "guest/vm/guest_lockdown.hpp"

#include <errno.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "guest/setup.hpp"

namespace sandlet::guest::vm {
namespace {

Status own_dev() {
  if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") != 0)
    return errno_status(errno, "mount the agent's /dev");
  struct Node {
    const char* name;
    unsigned major, minor;
  };
  static const Node kNodes[] = {{"/dev/null", 1, 3},    {"/dev/zero", 1, 5}, {"/dev/full", 1, 7},
                                {"/dev/random", 1, 8},  {"/dev/urandom", 1, 9}, {"/dev/tty", 5, 0}};
  const mode_t old = umask(0);
  for (const Node& n : kNodes)
    if (mknod(n.name, S_IFCHR | 0666, makedev(n.major, n.minor)) != 0) {
      umask(old);
      return errno_statusf(errno, "mknod %s", n.name);
    }
  umask(old);
  if (mkdir("/dev/pts", 0755) != 0 || mkdir("/dev/shm", 01777) != 0) return errno_status(errno, "mkdir in /dev");
  if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") != 0)
    return errno_status(errno, "mount /dev/pts");
  if (mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=256m") != 0)
    return errno_status(errno, "mount /dev/shm");
  struct Link {
    const char* target;
    const char* path;
  };
  static const Link kLinks[] = {{"pts/ptmx", "/dev/ptmx"},
                                {"/proc/self/fd", "/dev/fd"},
                                {"/proc/self/fd/0", "/dev/stdin"},
                                {"/proc/self/fd/1", "/dev/stdout"},
                                {"/proc/self/fd/2", "/dev/stderr"}};
  for (const Link& l : kLinks)
    if (symlink(l.target, l.path) != 0) return errno_statusf(errno, "symlink %s", l.path);
  if (mount(nullptr, "/dev", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, nullptr) != 0)
    return errno_status(errno, "make /dev read-only");
  return Status::Ok();
}

}  // namespace

Status lock_down_guest() {
  if (Status s = own_dev(); !s.ok()) return s;
  // The namespace counters first (they live in /proc/sys), then /proc/sys and /sys read-only.
  if (Status s = forbid_new_namespaces(); !s.ok()) return s;
  if (Status s = allow_detached_mounts(false); !s.ok()) return s;  // closes the counter it kept
  if (Status s = bind_read_only("/proc/sys"); !s.ok()) return s;
  if (Status s = bind_read_only("/sys"); !s.ok()) return s;
  for (int cap : {CAP_MKNOD, CAP_SYS_RAWIO, CAP_SYS_MODULE, CAP_SYS_BOOT})
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) return errno_statusf(errno, "drop capability %d", cap);
  return Status::Ok();
}

}  // namespace sandlet::guest::vm
