// The files of a RUN step's secret mounts, staged on the host where nothing can persist them: one detached
// tmpfs per directory holding secrets, in no mount namespace (not the host's, not the step's until its init
// attaches a read-only, idmapped copy), gone when the last descriptor closes — a crashed build leaves nothing.
// The step's sandbox gets each as a read-only `mounts` entry; the snapshot leaves those directories out.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "recipe/secrets.hpp"
#include "spec/spec.hpp"
#include "sys/fd.hpp"

namespace sandlet::build {

class SecretStage final {
 public:
  // `values`: id -> value (load_secrets). Mounts whose id has no value are skipped (the builder refused
  // the build earlier when one was required). Errors name the step (`where`) and the target, never a value.
  SecretStage(const std::vector<SecretMount>& mounts, const std::map<std::string, std::string>& values,
              const std::string& where);
  // Adds one read-only mount per directory (source: this process's descriptor of the tmpfs).
  void add_mounts(Spec& spec) const;
  // The directories to leave out of the step's layer (the mount points the init made for them).
  std::vector<std::string> excludes() const;
  bool empty() const { return dirs_.empty(); }

 private:
  struct Dir {
    std::string target;
    sys::UniqueFd mnt;
  };
  std::vector<Dir> dirs_;
};

}  // namespace sandlet::build
