#include "image/layer_mounts.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "common/error.hpp"
#include "common/fault_point.hpp"
#include "image/erofs_format.hpp"
#include "image/erofs_writer.hpp"
#include "image/fs_tree.hpp"
#include "image/store_files.hpp"
#include "sys/fs_util.hpp"
#include "sys/kernel_features.hpp"
#include "sys/loop_device.hpp"
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
  if (is_mounted(digest)) {
    if (lazy_.reused) lazy_.reused(digest);
    return target;
  }
  // Mounting needs the exclusive lock; flock cannot upgrade atomically, so look again once it is ours.
  hold->reset();
  sys::UniqueFd exclusive = sys::lock_file(lock_path, LOCK_EX);
  if (!is_mounted(digest)) mount_locked(digest, target);
  if (::flock(exclusive.get(), LOCK_SH) != 0) throw_errno("lock " + lock_path);  // downgrade: atomic
  *hold = std::move(exclusive);
  return target;
}

std::map<std::string, std::string> LayerMounts::attach_images(const LayerInfo& layer, sys::UniqueFd* hold) {
  if (layer.store.empty())
    throw Error(Code::kDataLoss, "layer " + layer.digest + ": a data blob is missing from " + store_.dir());
  if (!lazy_.attach) throw Error(Code::kUnimplemented, "layer " + layer.digest + " is lazy and nothing here can load it");
  const std::string lock_path = dir_ + "/" + layer.digest + ".lock";
  sys::UniqueFd exclusive = sys::lock_file(lock_path, LOCK_EX);
  std::map<std::string, std::string> cache = lazy_.attach(layer);  // (again for a mounted one: the same files)
  const std::string marker = dir_ + "/" + layer.digest + kImagesMarker;
  sys::UniqueFd m(::open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  if (!m) throw_errno("create " + marker);
  if (::flock(exclusive.get(), LOCK_SH) != 0) throw_errno("lock " + lock_path);  // downgrade: atomic
  *hold = std::move(exclusive);
  return cache;
}

namespace {

constexpr unsigned kLayerMountAttrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID;

// An EROFS mount of `meta` with `devices` as its extra devices (paths of regular files, or of block
// devices when `meta` is one).
sys::UniqueFd mount_erofs(const std::string& meta, const std::vector<std::string>& devices) {
  sys::FsContext ctx("erofs");
  ctx.set_flag("ro");  // a read-only block device (a loop device) takes only a read-only superblock
  ctx.set("source", meta);
  for (const auto& d : devices) ctx.set("device", d);
  return ctx.mount(kLayerMountAttrs);
}

// The same through loop devices, one per file. The mount holds them; they go when it goes.
sys::UniqueFd mount_erofs_on_loop(const std::string& meta, const std::vector<std::string>& blobs) {
  std::vector<sys::LoopDevice> loops;  // each keeps its device bound until the mount holds it
  loops.push_back(sys::attach_loop_device(meta));
  std::vector<std::string> devices;
  for (const auto& b : blobs) {
    loops.push_back(sys::attach_loop_device(b));
    devices.push_back(loops.back().path);
  }
  fault_point("layers.loop_bound");  // (tests: a crash here leaves bound devices only to the kernel's autoclear)
  return mount_erofs(loops.front().path, devices);
}

}  // namespace

const LayerMounts::Backing& LayerMounts::backing() const {
  std::call_once(backing_once_, [this] {
    Backing b;
    b.loop_unavailable = sys::loop_devices_unavailable();
    long fs = ::syscall(SYS_fsopen, "erofs", FSOPEN_CLOEXEC);
    if (fs < 0) {
      b.answer = "fsopen(erofs) = " + sys::errno_name(errno);
      backing_ = b;
      return;
    }
    ::close(static_cast<int>(fs));
    b.erofs = true;
    // A real (empty) image of ours on the store's filesystem, mounted detached and dropped: a kernel that
    // cannot mount files (or a filesystem it cannot read pages from, like tmpfs) asks for a block device.
    // (Named per process and call: two processes may probe the same store at once.)
    const std::string probe = dir_ + "/.erofs-probe-" + std::to_string(::getpid()) + "-" + sys::random_hex(4) + ".img";
    try {
      write_erofs(FsTree(), 64 * 1024, {}, probe);
      sys::FsContext ctx("erofs");
      ctx.set_flag("ro").set("source", probe);
      ctx.mount(kLayerMountAttrs);
      b.file_backed = true;
      b.answer = "file-backed mount of an empty image in " + dir_ + ": done";
    } catch (const Error& e) {
      b.answer = "file-backed mount of an empty image in " + dir_ + ": " + e.what();
    }
    ::unlink(probe.c_str());
    backing_ = b;
  });
  return backing_;
}

void LayerMounts::mount_locked(const std::string& digest, const std::string& target) {
  auto layer = store_.find(digest);
  if (!layer) throw Error(Code::kNotFound, "layer " + digest + " not found in " + store_.dir());
  store_.verify(*layer);
  std::vector<std::string> blobs;
  bool lazy = false;
  for (const auto& b : layer->blobs) {
    blobs.push_back(store_.blob_path(b));
    if (!store_.has_blob_data(b)) lazy = true;
  }
  if (lazy) {
    if (layer->store.empty())
      throw Error(Code::kDataLoss, "layer " + digest + ": a data blob is missing from " + store_.dir());
    if (!lazy_.attach) throw Error(Code::kUnimplemented, "layer " + digest + " is lazy and nothing here can load it");
    if (file_backed_.load(std::memory_order_relaxed) == 0 || !backing().file_backed)
      throw Error(Code::kUnimplemented, "layer " + digest + " is lazy: lazy layers need file-backed EROFS mounts (Linux 6.12 "
                                        "or later and a store on a filesystem such as ext4, xfs or btrfs); pull it eagerly");
    auto cache = lazy_.attach(*layer);
    for (size_t i = 0; i < blobs.size(); ++i) {
      if (store_.has_blob_data(layer->blobs[i])) continue;
      auto it = cache.find(layer->blobs[i]);
      if (it == cache.end()) throw Error(Code::kInternal, "layer " + digest + ": the loader gave no cache file for a blob");
      blobs[i] = it->second;
    }
  }
  struct DetachOnFailure {
    const LazyHooks* hooks;
    const std::string& digest;
    bool armed;
    ~DetachOnFailure() {
      if (armed && hooks->detach) {
        try {
          hooks->detach(digest);
        } catch (...) {
        }
      }
    }
  } undo{&lazy_, digest, lazy};
  sys::UniqueFd mnt;
  // The first mount is the probe (no separate one: a failed probe mount logs a kernel error): file-backed
  // until the kernel asks for a block device, then loop devices for this store from now on.
  bool loop = file_backed_.load(std::memory_order_relaxed) == 0;
  if (!loop) {
    try {
      mnt = mount_erofs(store_.meta_path(digest), blobs);
      file_backed_.store(1, std::memory_order_relaxed);
    } catch (const Error& e) {
      if (e.err_no() == ENODEV)
        throw Error(Code::kUnimplemented, "layer " + digest + ": the kernel has no EROFS filesystem (" + e.what() + ")",
                    ENODEV);
      if (e.err_no() != ENOTBLK) throw;
      file_backed_.store(0, std::memory_order_relaxed);
      loop = true;
    }
  }
  if (loop) {
    std::string no_loops = sys::loop_devices_unavailable();
    if (!no_loops.empty())
      throw Error(Code::kUnimplemented,
                  "layer " + digest + ": EROFS cannot mount files of " + store_.dir() +
                      " here (file-backed mounts need a kernel that has them, Linux 6.12 or later, and a store on a "
                      "filesystem such as ext4, xfs or btrfs), and " + no_loops);
    mnt = mount_erofs_on_loop(store_.meta_path(digest), blobs);
  }
  fault_point("layers.mounted");  // detached yet: it goes with the process
  sys::mkdir_p(target, 0755);
  if (::syscall(SYS_move_mount, mnt.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    throw_errno("attach layer " + digest + " at " + target);
  }
  undo.armed = false;
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
    // A lazy layer attached for images (attach_images): detached once unused, unless a mount holds it.
    if (name.size() == 64 + std::strlen(kImagesMarker) && name.compare(64, std::string::npos, kImagesMarker) == 0) {
      const std::string digest = name.substr(0, 64);
      if (candidates && !candidates->count(digest)) continue;
      sys::UniqueFd lock = sys::lock_file(dir_ + "/" + digest + ".lock", LOCK_EX);
      if (in_use().count(digest)) continue;
      if (!is_mounted(digest) && lazy_.detach) lazy_.detach(digest);
      ::unlink((dir_ + "/" + name).c_str());
      continue;
    }
    if (name.size() != 64 || (candidates && !candidates->count(name))) continue;
    // One layer at a time (creates take several shared locks in spec order: no lock ordering to keep).
    sys::UniqueFd lock = sys::lock_file(dir_ + "/" + name + ".lock", LOCK_EX);
    if (in_use().count(name)) continue;
    std::string target = dir_ + "/" + name;
    if (is_mounted(name)) {
      if (::umount2(target.c_str(), MNT_DETACH) != 0) throw_errno("unmount layer " + target);
      released.push_back(name);
      if (lazy_.detach) {
        auto layer = store_.find(name);
        if (layer && !layer->store.empty()) lazy_.detach(name);
      }
    }
    ::rmdir(target.c_str());
  }
  return released;
}

}  // namespace sandlet::image
