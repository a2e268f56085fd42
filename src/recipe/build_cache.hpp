// The build cache: which layer a step made, keyed by everything the step's result depends on (the layers
// it ran on, the instruction after substitution, the env/workdir/user it ran with, the ARG values and the
// network a RUN has, a COPY's input files). Entries are files <root>/layers/build-cache/<key>.json, written atomically;
// an entry is only a hint: the builder uses it only while the store still has the layer.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "recipe/plan.hpp"

namespace sandlet::build {

// The key of a step run on `layers` (digests, lowest first); `inputs` = CopyInputs::digest ("" for RUN).
// `secrets_given`: the ids of the step's secret mounts that had a value (a step run without an optional
// secret is not the same step as one run with it); values never enter the key. `network`: a RUN's
// network_key (what it could reach: the same command with another network is another step); ignored for
// the other kinds.
std::string cache_key(const std::vector<std::string>& layers, const Step& step, const std::string& inputs,
                      const std::vector<std::string>& secrets_given = {}, const std::string& network = "none");

class BuildCache final {
 public:
  explicit BuildCache(std::string dir) : dir_(std::move(dir)) {}
  // The layer digest recorded for `key`, if any (a malformed entry counts as none).
  std::optional<std::string> get(const std::string& key) const;
  void put(const std::string& key, const std::string& layer, const std::string& instruction);
  void remove(const std::string& key) noexcept;
  // Removes every entry that names `layer` (the layer is gone); returns how many.
  size_t forget_layer(const std::string& layer) noexcept;
  const std::string& dir() const { return dir_; }

 private:
  std::string path(const std::string& key) const { return dir_ + "/" + key + ".json"; }
  std::string dir_;
};

}  // namespace sandlet::build
