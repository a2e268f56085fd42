#include "backends/container/sandbox_dev.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <string>

#include "common/error.hpp"
#include "sys/mount_api.hpp"

namespace sandlet::container {
namespace {

struct DeviceNode {
  const char* name;
  unsigned major, minor;
};
constexpr DeviceNode kNodes[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
                                 {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};

// mknodat applies this process's umask: the mode is set again (the umask is process-wide, not ours to
// change).
void set_mode(int dir, const char* name, mode_t mode) {
  if (::fchmodat(dir, name, mode, 0) < 0) throw_errno(std::string("chmod /dev/") + name);
}

}  // namespace

UniqueFd build_sandbox_dev(uid_t root_uid, gid_t root_gid) {
  UniqueFd dev = sys::FsContext("tmpfs")
                     .set("size", "64m")
                     .set("nr_inodes", "4096")
                     .set("mode", "0755")
                     .set("uid", std::to_string(root_uid))
                     .set("gid", std::to_string(root_gid))
                     .mount(MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
  for (const DeviceNode& n : kNodes) {
    if (::mknodat(dev.get(), n.name, S_IFCHR | 0666, makedev(n.major, n.minor)) < 0)
      throw_errno(std::string("mknod /dev/") + n.name);
    set_mode(dev.get(), n.name, 0666);
  }
  // Mount points: the init mounts its own devpts and tmpfs on them (their roots' modes are what shows).
  for (const char* d : {"pts", "shm"})
    if (::mkdirat(dev.get(), d, 0755) < 0) throw_errno(std::string("mkdir /dev/") + d);
  static const char* const kLinks[][2] = {{"pts/ptmx", "ptmx"},
                                          {"/proc/self/fd", "fd"},
                                          {"/proc/self/fd/0", "stdin"},
                                          {"/proc/self/fd/1", "stdout"},
                                          {"/proc/self/fd/2", "stderr"}};
  for (const auto& l : kLinks)
    if (::symlinkat(l[0], dev.get(), l[1]) < 0) throw_errno(std::string("symlink /dev/") + l[1]);
  return dev;
}

}  // namespace sandlet::container
