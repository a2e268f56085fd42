#include "guest/host_mounts.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace sandlet::guest {
namespace {

// One component below `dir`, never through a symlink (the image's or anything else's): a target is
// where the spec says, not wherever a link in the image points.
int open_component(int dir, const char* name) {
  struct open_how how = {};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, dir, name, &how, sizeof how));
}

// An O_PATH descriptor of `target`'s directory, made (mkdir -p, mode 0755, root's) where missing.
// `what` names it in errors ("mounts[N].target /path").
Status open_target(const std::string& target, const std::string& what, int* out) {
  int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return errno_status(errno, what + ": open /");
  std::string name;
  for (size_t start = 1; start < target.size();) {
    size_t end = target.find('/', start);
    if (end == std::string::npos) end = target.size();
    name.assign(target, start, end - start);
    start = end + 1;
    if (name.empty() || name == "." || name == "..") {
      close(dir);
      return make_status(SANDLET_INTERNAL, EINVAL, what + ": not a normalized path");
    }
    if (mkdirat(dir, name.c_str(), 0755) != 0 && errno != EEXIST) {
      const int e = errno;
      close(dir);
      return errno_status(e, what + ": mkdir " + target.substr(0, end));
    }
    const int next = open_component(dir, name.c_str());
    const int e = errno;
    close(dir);
    if (next < 0) {
      // The image and the spec disagree: the spec's to fix, like any invalid field.
      const std::string at = target.substr(0, end);
      if (e == ELOOP)
        return make_status(SANDLET_INVALID_ARGUMENT, e, what + ": " + at + " is a symlink in the image (refused)");
      if (e == ENOTDIR)
        return make_status(SANDLET_INVALID_ARGUMENT, e, what + ": " + at + " is not a directory in the image");
      return errno_status(e, what + ": open " + at);
    }
    dir = next;
  }
  *out = dir;
  return Status::Ok();
}

Status attach_one(const proto::InitMount& m, size_t index, int fd) {
  char what[48];
  snprintf(what, sizeof what, "mounts[%zu].target ", index);
  const std::string name = what + m.target;
  int at = -1;
  if (Status s = open_target(m.target, name, &at); !s.ok()) return s;
  const int r = move_mount(fd, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
  const int e = errno;
  close(at);
  if (r != 0) return errno_status(e, name + ": attach the host directory");
  // The host made it read-only; a sandbox must never get a writable one by mistake.
  if (m.flags & proto::kMountReadOnly) {
    struct statfs st;
    if (syscall(SYS_fstatfs, fd, &st) != 0) return errno_status(errno, name + ": statfs");
    if (!(st.f_flags & ST_RDONLY))
      return make_status(SANDLET_INTERNAL, EPROTO, name + ": read-only mount arrived writable");
  }
  return Status::Ok();
}

}  // namespace

Status attach_host_mounts(const std::vector<proto::InitMount>& mounts, const int* fds) {
  Status st;
  for (size_t i = 0; i < mounts.size(); ++i) {
    if (st.ok()) st = attach_one(mounts[i], i, fds[i]);
    close(fds[i]);
  }
  return st;
}

}  // namespace sandlet::guest
