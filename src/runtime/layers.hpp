// The runtime's side of layered environments: resolving a spec's environment and store references to
// mounted layer directories at create, and unmounting layers once no live sandbox uses them.
#pragma once
#include "backends/backend.hpp"
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "image/layer_mounts.hpp"
#include "image/layer_store.hpp"
#include "runtime/record.hpp"
#include "runtime/sandbox_dirs.hpp"
#include "spec/spec.hpp"
#include "sys/fd.hpp"

namespace sandlet {

class LayerUsage final {
 public:
  // `used_here(except)`: store layers that sandboxes of this process other than `except` (and its warm pool)
  // use — what spares reading every record in the common case.
  LayerUsage(image::LayerStore& store, image::LayerMounts& mounts, const SandboxDirs& dirs,
             std::function<std::set<std::string>(const std::string& except)> used_here)
      : store_(store), mounts_(mounts), dirs_(dirs), used_here_(std::move(used_here)) {}

  // Whether the spec names an environment, or a layer or toolkit of the store.
  static bool has_store_refs(const Spec& spec);
  // Resolves an environment and store references into mounted layer directories; fills rec.environment and
  // rec.layers. `holds` keep the layers mounted until the create is done (see LayerMounts::acquire).
  // With `images` (a backend with kCapLayerImages), nothing is mounted: each layer's verified images are
  // appended there instead (a host directory as such), and the spec's layers name the store's digests.
  Spec resolve(const Spec& spec, SandboxRecord& rec, std::vector<sys::UniqueFd>& holds,
               std::vector<LayerImage>* images = nullptr);
  // Store layers used by live sandboxes of this root (any process), from their records.
  std::set<std::string> in_use() const;
  // After a sandbox that used store layers is gone: unmounts those no live sandbox still uses. Never throws.
  void release_of(const SandboxRecord& rec) noexcept;
  // Unmounts every layer no live sandbox uses (close, gc). Never throws.
  void release_unused() noexcept;
  // Maps a spec's `environment` to the store's name for it (a registry image: pulled as the policy says).
  void set_environment_resolver(std::function<std::string(const std::string&)> fn) { env_resolver_ = std::move(fn); }

 private:
  image::LayerStore& store_;
  image::LayerMounts& mounts_;
  const SandboxDirs& dirs_;
  std::function<std::set<std::string>(const std::string&)> used_here_;
  std::function<std::string(const std::string&)> env_resolver_;
};

}  // namespace sandlet
