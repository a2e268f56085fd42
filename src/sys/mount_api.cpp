#include "sys/mount_api.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/error.hpp"

namespace sandlet::sys {
namespace {

int sys_open_tree(int dfd, const char* path, unsigned flags) {
  return static_cast<int>(::syscall(SYS_open_tree, dfd, path, flags));
}
int sys_mount_setattr(int dfd, const char* path, unsigned flags, struct mount_attr* attr) {
  return static_cast<int>(::syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof *attr));
}
int sys_fsopen(const char* fs, unsigned flags) { return static_cast<int>(::syscall(SYS_fsopen, fs, flags)); }
int sys_fsconfig(int fd, unsigned cmd, const char* key, const void* value, int aux) {
  return static_cast<int>(::syscall(SYS_fsconfig, fd, cmd, key, value, aux));
}
int sys_fsmount(int fd, unsigned flags, unsigned attr) { return static_cast<int>(::syscall(SYS_fsmount, fd, flags, attr)); }

}  // namespace

UniqueFd idmapped_clone(const std::string& path, int userns_fd) {
  UniqueFd fd(sys_open_tree(AT_FDCWD, path.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (!fd) throw_errno("layer " + path + ": open_tree");
  struct mount_attr attr = {};
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<uint64_t>(userns_fd);
  if (sys_mount_setattr(fd.get(), "", AT_EMPTY_PATH, &attr) < 0) {
    int e = errno;
    if (e == EINVAL || e == EOPNOTSUPP)
      throw Error(Code::kUnimplemented,
                  "layer " + path + ": its filesystem does not support idmapped mounts (mount_setattr: " +
                      std::strerror(e) + ")", e);
    throw_errno("layer " + path + ": mount_setattr(MOUNT_ATTR_IDMAP)", e);
  }
  return fd;
}

FsContext::FsContext(const char* fstype) : fstype_(fstype), fd_(sys_fsopen(fstype, FSOPEN_CLOEXEC)) {
  if (!fd_) throw_errno(std::string("fsopen ") + fstype);
}

void FsContext::fail(const std::string& what) {
  int e = errno;
  // The kernel explains fsconfig failures in the context's log; include it when present.
  char log[512];
  ssize_t n = ::read(fd_.get(), log, sizeof log - 1);
  std::string detail;
  if (n > 0) {
    log[n] = 0;
    detail = std::string(" [") + log + "]";
    while (!detail.empty() && (detail.back() == '\n')) detail.pop_back();
  }
  throw_errno(fstype_ + " " + what + detail, e);
}

FsContext& FsContext::set(const char* key, const std::string& value) {
  if (sys_fsconfig(fd_.get(), FSCONFIG_SET_STRING, key, value.c_str(), 0) < 0) fail(std::string("option ") + key);
  return *this;
}

FsContext& FsContext::set_fd(const char* key, int fd) {
  if (sys_fsconfig(fd_.get(), FSCONFIG_SET_FD, key, nullptr, fd) < 0) fail(std::string("option ") + key);
  return *this;
}

UniqueFd FsContext::mount(unsigned attr_flags) {
  if (sys_fsconfig(fd_.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0) fail("create");
  UniqueFd m(sys_fsmount(fd_.get(), FSMOUNT_CLOEXEC, attr_flags));
  if (!m) fail("fsmount");
  return m;
}

OverlayRootfs build_overlay_rootfs(const std::vector<std::string>& layers, int userns_fd, uid_t root_uid,
                                   uint64_t disk_bytes) {
  // Lowers first: a failure here (bad layer) costs nothing else.
  std::vector<UniqueFd> lowers;
  lowers.reserve(layers.size());
  for (const auto& layer : layers) lowers.push_back(idmapped_clone(layer, userns_fd));

  // The writable layer: a size-capped tmpfs owned by the sandbox's root.
  std::string owner = std::to_string(root_uid);
  UniqueFd upper_mnt = FsContext("tmpfs")
                           .set("size", std::to_string(disk_bytes))
                           .set("mode", "0755")
                           .set("uid", owner)
                           .set("gid", owner)
                           .mount(MOUNT_ATTR_NODEV);
  for (const char* d : {"upper", "work"}) {
    if (::mkdirat(upper_mnt.get(), d, 0755) < 0) throw_errno(std::string("mkdir rootfs ") + d);
    if (::fchownat(upper_mnt.get(), d, root_uid, root_uid, AT_SYMLINK_NOFOLLOW) < 0)
      throw_errno(std::string("chown rootfs ") + d);
  }
  UniqueFd upper(::openat(upper_mnt.get(), "upper", O_PATH | O_DIRECTORY | O_CLOEXEC));
  UniqueFd work(::openat(upper_mnt.get(), "work", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!upper || !work) throw_errno("open rootfs upper/work");

  FsContext ovl("overlay");
  try {
    // lowerdir+ appends below the previous ones, so the topmost layer goes first.
    for (auto it = lowers.rbegin(); it != lowers.rend(); ++it) ovl.set_fd("lowerdir+", it->get());
    ovl.set_fd("upperdir", upper.get()).set_fd("workdir", work.get());
  } catch (const Error& e) {
    // OverlayFS takes layers as descriptors since Linux 6.13, as O_PATH ones (ours) since 6.15.
    if (e.err_no() != EBADF) throw;
    throw Error(Code::kUnimplemented,
                std::string("this kernel's OverlayFS does not take layers as O_PATH descriptors (Linux 6.15 or "
                            "later does): ") + e.what(),
                e.err_no());
  }
  OverlayRootfs out;
  out.root = ovl.mount(MOUNT_ATTR_NODEV);
  out.sources = std::move(lowers);
  out.sources.push_back(std::move(upper_mnt));
  return out;
}

}  // namespace sandlet::sys
