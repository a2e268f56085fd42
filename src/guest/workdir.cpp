#include "guest/workdir.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sandlet::guest {
namespace {

// `rel` (relative to `root`) as a path of the sandbox: ".." and absolute symlinks stop at its root, and
// /proc's magic links (which could name a directory of another root) are refused.
int open_in_root(int root, const std::string& rel) {
  struct open_how how = {};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how));
}

Status refused(uint32_t code, int e, const std::string& workdir, const std::string& why) {
  return make_status(code, e, "workdir " + workdir + ": " + why);
}

// Why `at` (a prefix of the workdir) cannot be opened as a directory.
Status open_failure(int e, const std::string& workdir, const std::string& at) {
  if (e == ENOTDIR) return refused(SANDLET_INVALID_ARGUMENT, e, workdir, at + " is not a directory");
  if (e == ENOENT) return refused(SANDLET_INVALID_ARGUMENT, e, workdir, at + " is a symlink to a missing path");
  if (e == ELOOP) return refused(SANDLET_INVALID_ARGUMENT, e, workdir, at + ": too many or magic symlinks");
  return errno_status(e, "workdir " + workdir + ": open " + at);
}

// Made by the init, the directory is already root's; the explicit owner and mode keep a set-gid parent's
// group and the umask out of it (docker makes it root's, 0755, whoever the sandbox's user is).
Status made(int parent, const std::string& name, const std::string& workdir, const std::string& at) {
  const int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "workdir " + workdir + ": open " + at);
  const bool ok = fchown(fd, 0, 0) == 0 && fchmod(fd, 0755) == 0;
  const int e = errno;
  close(fd);
  return ok ? Status::Ok() : errno_status(e, "workdir " + workdir + ": set the owner of " + at);
}

}  // namespace

Status make_workdir(const std::string& workdir) {
  if (workdir.empty() || workdir == "/") return Status::Ok();
  if (workdir[0] != '/') return refused(SANDLET_INVALID_ARGUMENT, EINVAL, workdir, "not an absolute path");
  const int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return errno_status(errno, "workdir: open /");
  // The common case: the image has it.
  if (const int fd = open_in_root(root, workdir.substr(1)); fd >= 0) {
    close(fd);
    close(root);
    return Status::Ok();
  }
  int parent = root;
  Status st;
  std::string rel, name;
  for (size_t start = 1; start < workdir.size() && st.ok();) {
    size_t end = workdir.find('/', start);
    if (end == std::string::npos) end = workdir.size();
    name.assign(workdir, start, end - start);
    start = end + 1;
    if (name.empty() || name == "." || name == "..") {
      st = refused(SANDLET_INVALID_ARGUMENT, EINVAL, workdir, "not a normalized path");
      break;
    }
    rel += (rel.empty() ? "" : "/") + name;
    const std::string at = workdir.substr(0, end);
    int next = open_in_root(root, rel);
    if (next < 0 && errno == ENOENT) {
      // Missing: made in the directory its parent resolved to (nothing of the sandbox runs yet to race).
      if (mkdirat(parent, name.c_str(), 0755) == 0) {
        st = made(parent, name, workdir, at);
      } else if (errno == EROFS) {
        st = refused(SANDLET_FAILED_PRECONDITION, EROFS, workdir, "cannot create " + at + " on a read-only file system");
      } else if (errno != EEXIST) {  // EEXIST: a dangling symlink, reported below
        st = errno_status(errno, "workdir " + workdir + ": mkdir " + at);
      }
      if (st.ok()) next = open_in_root(root, rel);
    }
    if (st.ok() && next < 0) st = open_failure(errno, workdir, at);
    if (parent != root) close(parent);
    parent = next;
  }
  if (parent >= 0 && parent != root) close(parent);
  close(root);
  return st;
}

}  // namespace sandlet::guest
