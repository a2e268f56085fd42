#include "guest/file_rules.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace sandlet::guest {
namespace {

// From the proc documentation's list of what leaks kernel memory or state, or acts on the whole kernel.
constexpr const char* kKernelFiles[] = {
    "/proc/kcore",   "/proc/kpagecgroup", "/proc/kpageflags", "/proc/kpagecount", "/proc/sysrq-trigger",
    "/proc/timer_list", "/proc/sched_debug", "/proc/keys",    "/proc/key-users",  "/proc/latency_stats",
    "/proc/kmsg",    "/proc/kallsyms",    "/proc/vmallocinfo", "/proc/slabinfo",  "/proc/pagetypeinfo",
};
constexpr const char* kKernelDirs[] = {"/proc/acpi", "/proc/scsi", "/proc/driver", "/proc/tty/driver"};

int sys_open_tree(int dir, const char* path, unsigned flags) {
  return static_cast<int>(syscall(SYS_open_tree, dir, path, flags));
}
int sys_mount_setattr(int dir, const char* path, unsigned flags, struct mount_attr* attr) {
  return static_cast<int>(syscall(SYS_mount_setattr, dir, path, flags, attr, sizeof *attr));
}

// The stand-ins' filesystem: a tiny tmpfs made once, holding an empty file and an empty directory, both
// mode 0 and read-only once made. Each stand-in is a bind (clone) of one of them.
int stand_in_fs() {
  static int root = -1;
  if (root >= 0) return root;
  const int fs = static_cast<int>(syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC));
  if (fs < 0) return -1;
  int mnt = -1;
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "64k", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "nr_inodes", "16", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0555", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) == 0)
    mnt = static_cast<int>(syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                                   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC));
  close(fs);
  if (mnt < 0) return -1;
  const int f = openat(mnt, "file", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
  if (f < 0 || mkdirat(mnt, "dir", 0) != 0) {
    if (f >= 0) close(f);
    close(mnt);
    return -1;
  }
  close(f);
  struct mount_attr ro = {};
  ro.attr_set = MOUNT_ATTR_RDONLY;
  if (sys_mount_setattr(mnt, "", AT_EMPTY_PATH, &ro) != 0) {
    close(mnt);
    return -1;
  }
  return root = mnt;
}

// An O_PATH descriptor of `path`, never through a symlink; -1 with errno.
int open_no_symlinks(const char* path) {
  struct open_how how = {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how));
}

Status attach_clone(int clone, int at, const std::string& what) {
  if (syscall(SYS_move_mount, clone, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    return errno_status(errno, what + ": attach");
  return Status::Ok();
}

std::string rule_name(size_t index, const proto::InitFileRule& r) {
  char buf[48];
  snprintf(buf, sizeof buf, "policy.files[%zu].path ", index);
  return buf + r.path;
}

}  // namespace

// Where a detached mount cannot be cloned (Linux 6.1 and 6.12: open_tree of an fsmount result is EINVAL),
// by path with mount(2) instead: a directory gets an empty read-only tmpfs of its own, a file a read-only
// bind of the sandbox's /dev/null (reads empty; writes to a device node are not stopped by a read-only
// mount, and /dev/null discards them). `at` is reached through its descriptor, so no
// symlink is followed.
Status put_stand_in_by_path(int at, const char* path, bool directory) {
  char target[32];
  snprintf(target, sizeof target, "/proc/self/fd/%d", at);
  if (directory) {
    if (mount("none", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=2,mode=0555") != 0)
      return errno_statusf(errno, "mount a stand-in over %s", path);
    return Status::Ok();
  }
  if (mount("/dev/null", target, nullptr, MS_BIND, nullptr) != 0)
    return errno_statusf(errno, "bind a stand-in over %s", path);
  // `at` still names what lies below the new mount: open the path again to reach the bind itself.
  const int bound = open_no_symlinks(path);
  if (bound < 0) return errno_statusf(errno, "open the stand-in over %s", path);
  struct mount_attr attr = {};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
  const int rc = sys_mount_setattr(bound, "", AT_EMPTY_PATH, &attr);
  const int saved = errno;
  close(bound);
  if (rc != 0) return errno_statusf(saved, "make the stand-in over %s read-only", path);
  return Status::Ok();
}

Status put_stand_in(const char* path, bool directory) {
  const int fs = stand_in_fs();
  if (fs < 0) return errno_status(errno, "make the stand-ins' tmpfs");
  const int at = open_no_symlinks(path);
  if (at < 0) return errno_statusf(errno, "open %s", path);
  const int clone = sys_open_tree(fs, directory ? "dir" : "file", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  Status st;
  if (clone < 0 && errno == EINVAL) st = put_stand_in_by_path(at, path, directory);
  else if (clone < 0) st = errno_statusf(errno, "clone a stand-in for %s", path);
  else st = attach_clone(clone, at, std::string("stand-in over ") + path);
  if (clone >= 0) close(clone);
  close(at);
  return st;
}

static bool g_masks_done = false;

bool kernel_files_masked() { return g_masks_done; }

Status mask_kernel_files() {
  for (const char* path : kKernelFiles) {
    struct stat st;
    if (lstat(path, &st) != 0) continue;  // not in this kernel
    if (Status s = put_stand_in(path, false); !s.ok()) return s;
  }
  for (const char* path : kKernelDirs) {
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (Status s = put_stand_in(path, true); !s.ok()) return s;
  }
  g_masks_done = true;
  return Status::Ok();
}

Status apply_file_rules(const std::vector<proto::InitFileRule>& rules) {
  // Shortest first: a nested rule is attached on top of the one around it.
  std::vector<size_t> order(rules.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return rules[a].path.size() != rules[b].path.size() ? rules[a].path.size() < rules[b].path.size() : a < b;
  });
  // Each read-only/writable rule's tree is cloned before any rule changes anything: a writable path below a
  // read-only one gets its own, still writable, mount.
  std::vector<int> clones(rules.size(), -1);
  auto close_all = [&] {
    for (int& fd : clones)
      if (fd >= 0) close(fd), fd = -1;
  };
  for (size_t i = 0; i < rules.size(); ++i) {
    const proto::InitFileRule& r = rules[i];
    if (r.access == proto::FileRuleAccess::kHidden || r.path == "/") continue;
    const int at = open_no_symlinks(r.path.c_str());
    if (at < 0) {
      const int e = errno;
      close_all();
      if (e == ENOENT || e == ELOOP || e == ENOTDIR)
        return make_status(SANDLET_INVALID_ARGUMENT, e, rule_name(i, r) + ": " +
                                                            (e == ENOENT ? "not in the sandbox's filesystem"
                                                                         : "reached through a symlink (refused)"));
      return errno_status(e, rule_name(i, r) + ": open");
    }
    clones[i] = sys_open_tree(at, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    const int e = errno;
    close(at);
    if (clones[i] < 0) {
      close_all();
      return errno_status(e, rule_name(i, r) + ": clone its tree");
    }
  }
  Status st;
  for (size_t i : order) {
    const proto::InitFileRule& r = rules[i];
    if (r.access == proto::FileRuleAccess::kHidden) {
      struct stat sb;
      if (lstat(r.path.c_str(), &sb) != 0) continue;  // nothing there to hide
      st = put_stand_in(r.path.c_str(), S_ISDIR(sb.st_mode));
      if (!st.ok()) {
        st.message = rule_name(i, r) + ": " + st.message;
        break;
      }
      continue;
    }
    // Only the rule's own mount changes: mounts below it (host mounts, nested rules) keep their flags.
    struct mount_attr attr = {};
    if (r.access == proto::FileRuleAccess::kReadOnly) attr.attr_set = MOUNT_ATTR_RDONLY;
    else attr.attr_clr = MOUNT_ATTR_RDONLY;
    attr.propagation = MS_PRIVATE;
    if (r.path == "/") {  // the root mount itself (a mount stacked on "/" would not be what "/" resolves to)
      if (sys_mount_setattr(AT_FDCWD, "/", 0, &attr) != 0) {
        st = errno_status(errno, rule_name(i, r) + ": set the root mount read-only/writable");
        break;
      }
      continue;
    }
    if (sys_mount_setattr(clones[i], "", AT_EMPTY_PATH, &attr) != 0) {
      st = errno_status(errno, rule_name(i, r) + ": set its mount read-only/writable");
      break;
    }
    const int at = open_no_symlinks(r.path.c_str());
    if (at < 0) {
      st = errno_status(errno, rule_name(i, r) + ": open");
      break;
    }
    st = attach_clone(clones[i], at, rule_name(i, r));
    close(at);
    if (!st.ok()) break;
  }
  close_all();
  return st;
}

}  // namespace sandlet::guest
