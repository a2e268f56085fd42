#include "image/layer_mounts.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/error.hpp"
#include "image/erofs_format.hpp"
#include "image/store_files.hpp"
#include "sys/fs_util.hpp"
#include "sys/mount_api.hpp"

namespace sandlet::image {

LayerMounts::LayerMounts(const LayerStore& store, std::string mount_dir) : store_(store), dir_(std::move(mount_dir)) {
  sys::mkdir_p(dir_, 0755);
}

bool LayerMounts::is_mounted(const std::string& digest) const {
  struct statfs fs;
  return ::statfs((dir_ + "/" + digest).c_str(), &fs) == 0 && static_cast<uint32_t>(fs.f_type) == erofs::kMagic;
}

std::string LayerMounts::acquire(const std::string& digest, sys::UniqueFd* hold) {
  std::string target = dir_ + "/" + digest;
  std::string lock_path = dir_ + "/" + digest + ".lock";
  *hold = sys::lock_file(lock_path, LOCK_SH);
  if (is_mounted(digest)) return target;
  // Mounting needs the exclusive lock; flock cannot upgrade atomically, so look again once it is ours.
  hold->reset();
  sys::UniqueFd exclusive = sys::lock_file(lock_path, LOCK_EX);
  if (!is_mounted(digest)) mount_locked(digest, target);
  if (::flock(exclusive.get(), LOCK_SH) != 0) throw_errno("lock " + lock_path);  // downgrade: atomic
  *hold = std::move(exclusive);
  return target;
}

void LayerMounts::mount_locked(const std::string& digest, const std::string& target) {
  auto layer = store_.find(digest);
  if (!layer) throw Error(Code::kNotFound, "layer " + digest + " not found in " + store_.dir());
  store_.verify(*layer);
  sys::FsContext ctx("erofs");
  ctx.set("source", store_.meta_path(digest));
  for (const auto& b : layer->blobs) ctx.set("device", store_.blob_path(b));
  sys::UniqueFd mnt;
  try {
    mnt = ctx.mount(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID);
  } catch (const Error& e) {
    // EROFS mounts a regular file only when its filesystem reads pages through the page cache; tmpfs
    // does not, and the kernel then asks for a block device.
    if (e.err_no() != ENOTBLK) throw;
    throw Error(Code::kUnimplemented,
                "layer " + digest + ": the layer store " + store_.dir() +
                    " is on a filesystem that cannot back EROFS file mounts (tmpfs cannot); put the runtime root "
                    "on a disk filesystem such as ext4, xfs or btrfs (" + e.what() + ")",
                e.err_no());
  }
  sys::mkdir_p(target, 0755);
  if (::syscall(SYS_move_mount, mnt.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    throw_errno("attach layer " + digest + " at " + target);
  }
}

std::vector<std::string> LayerMounts::mounted() const {
  std::vector<std::string> out;
  for (const auto& name : sys::list_dir(dir_)) {
    if (name.size() == 64 && is_mounted(name)) out.push_back(name);
  }
  return out;
}

std::vector<std::string> LayerMounts::release_unused(const std::set<std::string>* candidates,
                                                     const std::function<std::set<std::string>()>& in_use) {
  std::vector<std::string> released;
  for (const auto& name : sys::list_dir(dir_)) {
    if (name.size() != 64 || (candidates && !candidates->count(name))) continue;
    // One layer at a time (creates take several shared locks in spec order: no lock ordering to keep).
    sys::UniqueFd lock = sys::lock_file(dir_ + "/" + name + ".lock", LOCK_EX);
    if (in_use().count(name)) continue;
    std::string target = dir_ + "/" + name;
    if (is_mounted(name)) {
      if (::umount2(target.c_str(), MNT_DETACH) != 0) throw_errno("unmount layer " + target);
      released.push_back(name);
    }
    ::rmdir(target.c_str());
  }
  return released;
}

}  // namespace sandlet::image
