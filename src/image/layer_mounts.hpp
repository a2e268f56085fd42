// Node-wide mounts of store layers: each layer is mounted once (file-backed EROFS, read-only, no loop
// device) at <mount dir>/<digest> and shared by every sandbox that uses it — sandboxes take private
// clones of that mount, so the page cache of a layer is shared. The first mount of a layer verifies its
// metadata image and blobs against their digests: corrupted data is never mounted.
#pragma once
#include <functional>
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
  // Layers mounted now.
  std::vector<std::string> mounted() const;
  bool is_mounted(const std::string& digest) const;

  const std::string& dir() const { return dir_; }

 private:
  void mount_locked(const std::string& digest, const std::string& target);
  const LayerStore& store_;
  std::string dir_;
};

}  // namespace sandlet::image
