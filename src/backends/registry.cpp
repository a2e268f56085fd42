#include <unistd.h>

#include "backends/backend.hpp"
#include "backends/container/container_backend.hpp"

namespace sandlet {
namespace {

std::string probe_microvm() {
  if (::access("/dev/kvm", R_OK | W_OK) != 0) return "no usable /dev/kvm on this host";
  return "not implemented in this version of sandlet";
}
std::string probe_not_yet() { return "not implemented in this version of sandlet"; }
std::unique_ptr<Backend> no_factory(const HostContext&) { return nullptr; }

}  // namespace

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> table = {
      {"container", &make_container_backend, &probe_container},
      {"fncall", &no_factory, &probe_not_yet},
      {"microvm", &no_factory, &probe_microvm},
      {"fullvm", &no_factory, &probe_microvm},
  };
  return table;
}

}  // namespace sandlet
