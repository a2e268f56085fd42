// Node-wide mounts of store layers: each layer is mounted once (EROFS, read-only) at <mount dir>/<digest>
// and shared by every sandbox that uses it — sandboxes take private clones of that mount, so the page
// cache of a layer is shared. The first mount of a layer verifies its metadata image and blobs against
// their digests: corrupted data is never mounted.
// EROFS reads the store's files directly where the kernel can (file-backed mounts; the store's
// filesystem must read pages through the page cache, as ext4, xfs and btrfs do). Elsewhere (older
// kernels, a store on tmpfs) each image and blob goes through a read-only loop device that the kernel
// detaches once the mount is gone (see sys/loop_device.hpp): no device outlives its mount, even
// after a crash.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "image/layer_store.hpp"
#include "sys/fd.hpp"

namespace sandlet::image {

class LayerMounts final {
 public:
  LayerMounts(const LayerStore& store, std::string mount_dir);

  // The mount point of `digest`, mounting (after verification) if it is not mounted yet. `hold` receives a
  // shared lock on the layer that keeps it mounted until closed: keep it until the sandbox's record (which
  // names the layer) is written and its root filesystem holds a clone of the mount.
  std::string acquire(const std::string& digest, sys::UniqueFd* hold);
  // Unmounts mounted layers that are candidates (all when `candidates` is null) and that `in_use` — asked
  // under the layer's exclusive lock, so creates in flight finish first — does not list. Lazy unmount:
  // sandboxes already holding clones keep working.
  std::vector<std::string> release_unused(const std::set<std::string>* candidates,
                                          const std::function<std::set<std::string>()>& in_use);
  // A lazy layer for a backend that reads the layer's images itself (a VM's disks; nothing is mounted):
  // attaches it to the loader and returns blob -> cache file for the blobs whose data the store lacks. A
  // marker (<mount dir>/<digest>.images) stands for the attachment until release_unused finds the layer
  // unused and detaches it. `hold` as for acquire().
  std::map<std::string, std::string> attach_images(const LayerInfo& layer, sys::UniqueFd* hold);
  // Layers mounted now.
  std::vector<std::string> mounted() const;
  bool is_mounted(const std::string& digest) const;

  const std::string& dir() const { return dir_; }
  static constexpr const char* kImagesMarker = ".images";

  // Lazy layers (LayerInfo::store set): `attach` makes the cache files of the blobs whose data is not in the
  // store ready to be mounted (returns blob -> cache file path; they are watched before it returns), and
  // `detach` says a layer's mount is gone. Without hooks a lazy layer cannot be mounted.
  struct LazyHooks {
    std::function<std::map<std::string, std::string>(const LayerInfo&)> attach;
    std::function<void(const std::string& digest)> detach;
    // A layer found mounted already (by this process or another): a lazy one needs its loader running.
    std::function<void(const std::string& digest)> reused;
  };
  void set_lazy_hooks(LazyHooks hooks) { lazy_ = std::move(hooks); }

  // How this store's layers can be mounted, probed once for reports by mounting (detached) and dropping
  // an empty image on the store's filesystem. Mounts themselves decide by their first attempt.
  struct Backing {
    bool erofs = false;        // the kernel has EROFS (fsopen loads its module when needed)
    bool file_backed = false;  // EROFS mounts the store's files directly
    std::string answer;        // what the kernel answered to the probe
    std::string loop_unavailable;  // why loop devices cannot be used ("" = they can)
  };
  const Backing& backing() const;

 private:
  void mount_locked(const std::string& digest, const std::string& target);
  const LayerStore& store_;
  LazyHooks lazy_;
  std::string dir_;
  mutable std::once_flag backing_once_;
  mutable Backing backing_;
  std::atomic<int> file_backed_{-1};  // -1 not known yet, 1 the store's files mount, 0 through loop devices
};

}  // namespace sandlet::image
