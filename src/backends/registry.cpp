#include "backends/registry.hpp"

#include <unistd.h>

#include "backends/container/container_backend.hpp"

namespace sandlet {
namespace {

std::string probe_microvm() {
  if (::access("/dev/kvm", R_OK | W_OK) != 0) return "no usable /dev/kvm on this host";
  return "not implemented in this version of sandlet";
}
std::string probe_not_yet() { return "not implemented in this version of sandlet"; }
std::unique_ptr<Backend> not_built(const std::string&) { return nullptr; }

}  // namespace

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> table = {
      {"container", &container::make_backend, &container::probe},
      {"fncall", &not_built, &probe_not_yet},
      {"microvm", &not_built, &probe_microvm},
      {"fullvm", &not_built, &probe_microvm},
  };
  return table;
}

}  // namespace sandlet
