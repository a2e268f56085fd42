#include "sys/mount_api.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "common/error.hpp"
#include "sys/kernel_features.hpp"
#include "sys/private_mount_ns.hpp"

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
    struct statfs fs;
    if ((e == EINVAL || e == EOPNOTSUPP) && ::fstatfs(fd.get(), &fs) == 0 && fs.f_type == TMPFS_MAGIC)
      throw Error(Code::kUnimplemented,
                  "layer " + path + " is on tmpfs, which this kernel cannot idmap (MOUNT_ATTR_IDMAP on tmpfs: " +
                      errno_name(e) + "; Linux 6.3 or later can): import it into the layer store or put it on "
                      "ext4, xfs or btrfs",
                  e);
    if (e == EINVAL || e == EOPNOTSUPP)
      throw Error(Code::kUnimplemented,
                  "layer " + path + ": its filesystem does not support idmapped mounts (mount_setattr: " +
                      std::strerror(e) + ")", e);
    throw_errno("layer " + path + ": mount_setattr(MOUNT_ATTR_IDMAP)", e);
  }
  return fd;
}

UniqueFd host_dir_clone(const std::string& path, bool readonly, int userns_fd, const std::string& what) {
  UniqueFd fd(sys_open_tree(AT_FDCWD, path.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
  if (!fd) throw_errno(what + ": open_tree");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_errno(what + ": fstat");
  if (!S_ISDIR(st.st_mode)) throw_errno(what + ": not a directory", ENOTDIR);
  struct mount_attr attr = {};
  attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  // A copy of a shared mount would join its peer group: mounts and unmounts would then propagate
  // between the host and the sandbox.
  attr.propagation = MS_PRIVATE;
  if (readonly) {
    attr.attr_set |= MOUNT_ATTR_RDONLY | MOUNT_ATTR_IDMAP;
    attr.userns_fd = static_cast<uint64_t>(userns_fd);
    if (sys_mount_setattr(fd.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) == 0) return fd;
    // A filesystem without idmapped mounts (tmpfs before 6.3, proc, ...) or a tree already idmapped:
    // the same attributes without the idmap (then host owners show as the overflow id inside).
    const int e = errno;
    if (e != EINVAL && e != EOPNOTSUPP && e != EPERM) throw_errno(what + ": mount_setattr(read-only, idmapped)", e);
    attr.attr_set &= ~static_cast<uint64_t>(MOUNT_ATTR_IDMAP);
    attr.userns_fd = 0;
  }
  if (sys_mount_setattr(fd.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) != 0)
    throw_errno(what + (readonly ? ": mount_setattr(read-only, nosuid, nodev)" : ": mount_setattr(nosuid, nodev)"));
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

FsContext& FsContext::set_flag(const char* key) {
  if (sys_fsconfig(fd_.get(), FSCONFIG_SET_FLAG, key, nullptr, 0) < 0) fail(std::string("option ") + key);
  return *this;
}

FsContext& FsContext::set_fd(const char* key, int fd) {
  if (sys_fsconfig(fd_.get(), FSCONFIG_SET_FD, key, nullptr, fd) < 0) fail(std::string("option ") + key);
  return *this;
}

int FsContext::try_set_fd(const char* key, int fd) {
  return sys_fsconfig(fd_.get(), FSCONFIG_SET_FD, key, nullptr, fd) < 0 ? errno : 0;
}

UniqueFd FsContext::mount(unsigned attr_flags) {
  if (sys_fsconfig(fd_.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0) fail("create");
  UniqueFd m(sys_fsmount(fd_.get(), FSMOUNT_CLOEXEC, attr_flags));
  if (!m) fail("fsmount");
  return m;
}

namespace {

// The overlay from detached layer mounts handed over as descriptors (kernels whose OverlayFS takes them).
// Empty, with *refused set to the errno, when the first descriptor is refused: no exception on that path,
// which a kernel without them takes in every process (a process's first exception costs the unwinder's
// set-up of the whole binary's frame tables).
std::optional<UniqueFd> overlay_from_descriptors(const std::vector<UniqueFd>& lowers, int upper, int work, int* refused) {
  FsContext ovl("overlay");
  // lowerdir+ appends below the previous ones, so the topmost layer goes first.
  for (auto it = lowers.rbegin(); it != lowers.rend(); ++it) {
    if (it == lowers.rbegin()) {
      if ((*refused = ovl.try_set_fd("lowerdir+", it->get())) != 0) return std::nullopt;
      continue;
    }
    ovl.set_fd("lowerdir+", it->get());
  }
  ovl.set_fd("upperdir", upper).set_fd("workdir", work);
  return ovl.mount(MOUNT_ATTR_NODEV);
}

// The same where OverlayFS takes layers only as paths, which it resolves and privately clones in the
// mounting thread's mount namespace: the detached mounts are attached in a namespace of our own (never
// the host's) under one per-build tmpfs, the overlay is mounted from their paths and cloned detached, and
// detaching that tmpfs drops the rest at once (one RCU wait instead of one per layer). The layer list goes
// through mount(2), whose options may fill a page: fsconfig() takes at most 255 bytes per value, ~30
// layers. Names are relative to the staging directory (the thread's own working directory while it
// builds), so that the most layers a spec may have fit.
UniqueFd overlay_by_path(std::vector<UniqueFd>& lowers, int upper_mnt) {
  UniqueFd root;
  PrivateMountNamespace::get().run([&] {
    static unsigned builds = 0;  // (jobs run one at a time)
    const std::string dir = "/" + std::to_string(builds++);
    if (::mkdir(dir.c_str(), 0700) != 0) throw_errno("overlay staging: mkdir " + dir);
    if (::mount("sandlet-stage", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700,size=64k") != 0) {
      int e = errno;
      ::rmdir(dir.c_str());
      throw_errno("overlay staging: mount tmpfs", e);
    }
    struct Cleanup {
      const std::string& dir;
      ~Cleanup() {
        ::umount2(dir.c_str(), MNT_DETACH);
        ::rmdir(dir.c_str());
      }
    } cleanup{dir};
    if (::chdir(dir.c_str()) != 0) throw_errno("overlay staging: chdir " + dir);
    struct BackToRoot {  // (destroyed before the cleanup: the directory is not held as a cwd)
      ~BackToRoot() { (void)!::chdir("/"); }
    } back;
    auto attach = [](int mnt, const std::string& at) {
      if (::mkdir(at.c_str(), 0700) != 0) throw_errno("overlay staging: mkdir " + at);
      if (::syscall(SYS_move_mount, mnt, "", AT_FDCWD, at.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
        throw_errno("overlay staging: attach a layer at " + at);
    };
    std::string lowerdir;  // topmost first, ':'-separated (our names need no escaping)
    for (size_t i = 0; i < lowers.size(); ++i) {
      const std::string at = std::to_string(i);
      attach(lowers[i].get(), at);
      lowerdir = i == 0 ? at : at + ":" + lowerdir;
    }
    attach(upper_mnt, "u");
    const std::string options = "lowerdir=" + lowerdir + ",upperdir=u/upper,workdir=u/work";
    if (options.size() >= static_cast<size_t>(::sysconf(_SC_PAGESIZE)))
      throw Error(Code::kInvalidArgument, "overlay (layer paths): " + std::to_string(lowers.size()) +
                                              " layers are more than one mount's options can name");
    if (::mkdir("o", 0700) != 0) throw_errno("overlay staging: mkdir o");
    if (::mount("overlay", "o", "overlay", MS_NODEV, options.c_str()) != 0)
      throw_errno("overlay (layer paths): mount " + std::to_string(lowers.size()) + " layers");
    root.reset(sys_open_tree(AT_FDCWD, "o", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    if (!root) throw_errno("overlay (layer paths): open_tree");
  });
  return root;
}

// How this process's kernel takes layers: -1 not known yet, 1 as descriptors, 0 only by path. The first
// build tries descriptors (the fast path costs no separate probe); if that fails, the probe decides
// whether the kernel lacks them (then by path, from now on) or the failure was the layers' own.
std::atomic<int> g_layer_fds{-1};

UniqueFd overlay_root(std::vector<UniqueFd>& lowers, int upper_mnt, int upper, int work) {
  const int mode = g_layer_fds.load(std::memory_order_relaxed);
  if (mode != 0) {
    int refused = 0;
    try {
      if (auto root = overlay_from_descriptors(lowers, upper, work, &refused)) {
        g_layer_fds.store(1, std::memory_order_relaxed);
        return std::move(*root);
      }
    } catch (const Error&) {
      if (mode == 1 || overlay_layer_fds_probe().present) throw;
      g_layer_fds.store(0, std::memory_order_relaxed);
      return overlay_by_path(lowers, upper_mnt);
    }
    if (mode == 1 || overlay_layer_fds_probe().present)
      throw_errno("overlay option lowerdir+ (a layer descriptor)", refused);
    g_layer_fds.store(0, std::memory_order_relaxed);
  }
  return overlay_by_path(lowers, upper_mnt);
}

}  // namespace

uint64_t mount_id_of(int fd) {
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) != 0) throw_errno("statx mount id");
  if (!(sx.stx_mask & STATX_MNT_ID)) throw Error(Code::kUnimplemented, "statx gives no mount id on this kernel");
  return sx.stx_mnt_id;
}

OverlayRootfs build_overlay_rootfs(const std::vector<std::string>& layers, int userns_fd, uid_t root_uid,
                                   uint64_t disk_bytes) {
  // Lowers first: a failure here (bad layer) costs nothing else.
  std::vector<UniqueFd> lowers;
  lowers.reserve(layers.size());
  for (const auto& layer : layers) lowers.push_back(idmapped_clone(layer, userns_fd));

  // The writable layer: a size-capped tmpfs owned by the sandbox's root. Inodes are capped too (one per
  // 4 KiB of disk, at least 16384): empty files take no blocks, and a tmpfs's default allows millions.
  std::string owner = std::to_string(root_uid);
  UniqueFd upper_mnt = FsContext("tmpfs")
                           .set("size", std::to_string(disk_bytes))
                           .set("nr_inodes", std::to_string(std::max<uint64_t>(disk_bytes / 4096, 16384)))
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

  OverlayRootfs out;
  out.root = overlay_root(lowers, upper_mnt.get(), upper.get(), work.get());
  out.sources = std::move(lowers);
  out.upper_mnt_id = mount_id_of(upper_mnt.get());
  out.upper = std::move(upper_mnt);
  return out;
}

}  // namespace sandlet::sys
