#include "backends/registry.hpp"

#include "backends/container/container_backend.hpp"
#include "backends/microvm/microvm_backend.hpp"
#include "backends/vm_accel.hpp"

namespace sandlet {
namespace {

BackendProbe probe_fncall() { return BackendProbe::yes({{"api", "sandlet_call"}}); }

// The full-VM backend is not built into this version yet; what it would run on is probed all the same.
BackendProbe probe_fullvm() {
  return BackendProbe::no("not built into this version of sandlet", vm_accel::probe().json());
}

}  // namespace

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> table = {
      {"container", "namespaces, cgroups and OverlayFS over the store's EROFS layers: the general case",
       &container::make_backend, &container::probe},
      {"fncall", "short stateless calls in pooled, reused sandboxes of another backend", nullptr, &probe_fncall,
       "it serves calls (sandlet_call, `sandlet call`), not sandboxes of its own: a call's pool runs on the "
       "backend its spec names (container by default)"},
      {"microvm", "a QEMU microVM per sandbox: a kernel of its own", &microvm::make_backend, &microvm::probe},
      {"fullvm", "a complete operating system in a VM", nullptr, &probe_fullvm},
  };
  return table;
}

const BackendEntry* find_backend_entry(std::string_view name) {
  for (const auto& e : backend_registry())
    if (name == e.name) return &e;
  return nullptr;
}

std::string backend_names() {
  std::string out;
  for (const auto& e : backend_registry()) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

}  // namespace sandlet
