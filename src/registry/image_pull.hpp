// Pulling an image from a registry into the layer store: the manifest (through an index, for the configured
// platform), the config, then each layer blob downloaded (several at once, resumable, digest-checked before it
// is imported) and imported as a store layer while later ones still download. The result is an environment
// named by the image's canonical reference (or the name asked for), with the image config's env / workdir / user,
// and its entrypoint / cmd recorded. A second pull of the same image fetches the manifest only (a digest
// reference: nothing at all); a layer blob pulled before is not fetched again while its layer is in the store.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "image/layer_store.hpp"
#include "registry/image_ref.hpp"
#include "registry/registry_config.hpp"

namespace sandlet::registry {

struct PullProgress {
  std::string phase;   // "manifest", "download", "import", "done"
  size_t layer = 0;    // index of the layer (download, import), lowest first
  size_t layers = 0;   // how many the image has
  uint64_t bytes = 0;  // download: bytes of this blob so far
  uint64_t total = 0;  // download: the blob's size
};

struct ImagePullOptions {
  std::string name;  // the environment's name ("" = the canonical reference)
  std::function<void(const PullProgress&)> progress;  // called on the pulling threads, one call at a time
  size_t parallel_downloads = 3;
};

struct ImagePullResult {
  std::string reference;        // canonical
  std::string environment;      // its name
  uint32_t version = 0;
  bool new_version = false;     // false: the store already had this image under that name
  std::string manifest_digest;  // what the reference resolved to (an index or a manifest)
  std::string platform;
  std::string endpoint;         // the mirror or registry that served the manifest
  std::vector<std::string> layers;  // store digests, lowest first
  size_t blobs_fetched = 0, layers_reused = 0;
  uint64_t bytes_fetched = 0;   // every byte received from registries, manifests and tokens included
  double seconds = 0;
};

ImagePullResult pull_image(image::LayerStore& store, const RegistryConfig& config, const ImageRef& ref,
                           const ImagePullOptions& options);

// What an `environment` (spec, FROM, a harness's image field) names, with pulls as the policy allows:
// "docker://REF" is always a registry image; otherwise a local environment of that exact name wins, then an image
// pulled before under the reference's canonical name, then (policy "missing") a pull. A bare word ("ubuntu")
// stays a local name unless `bare_names_are_images` (a recipe's FROM). Returns the environment name to resolve
// in the store ("@N" kept for local names). kNotFound when nothing matches and the policy forbids a pull, or when
// a name that may be local could not be pulled either (the message gives both readings).
std::string resolve_environment(image::LayerStore& store, const RegistryConfig& config, const std::string& text,
                                bool bare_names_are_images, const ImagePullOptions& options = {});

}  // namespace sandlet::registry
