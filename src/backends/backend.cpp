#include "backends/backend.hpp"

#include "common/error.hpp"

namespace sandlet {

std::string capability_names(uint32_t caps) {
  static const std::pair<uint32_t, const char*> kNames[] = {
      {kCapPrepareAhead, "prepare_ahead"}, {kCapOneShot, "one_shot"}, {kCapPause, "pause"},
      {kCapSnapshot, "snapshot"},          {kCapFork, "fork"},        {kCapStoreLayers, "store_layers"},
      {kCapLayerImages, "layer_images"},   {kCapSetLimits, "set_limits"}, {kCapReuseCheck, "reuse_check"},
      {kCapMachineState, "machine_state"},
  };
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (!(caps & bit)) continue;
    if (!out.empty()) out += ",";
    out += name;
  }
  return out;
}

void BackendSandbox::unimplemented(const char* what) const {
  throw Error(Code::kUnimplemented, std::string(what) + " is not supported by the " + backend_ + " backend");
}

void BackendSandbox::pause() { unimplemented("pause"); }
void BackendSandbox::resume() { unimplemented("resume"); }
uint64_t BackendSandbox::snapshot(const std::function<void(const WritableLayer&)>&,
                                  const std::function<void(const WritableLayer&)>&) {
  unimplemented("snapshot");
}
MachineState BackendSandbox::save_machine(const std::string&) { unimplemented("a machine-state snapshot"); }
void BackendSandbox::set_limits(const Limits&) { unimplemented("changing a running sandbox's limits"); }
std::unique_ptr<BackendSandbox::ReuseMark> BackendSandbox::reuse_mark() const { unimplemented("a reuse check"); }
bool BackendSandbox::unchanged_since(const ReuseMark&) const { unimplemented("a reuse check"); }
void BackendSandbox::net_update(const NetworkPolicy&) { unimplemented("network update"); }
boost::json::object BackendSandbox::net_stats() const { unimplemented("network counters"); }
boost::json::object BackendSandbox::seccomp_stats(uint64_t) const { unimplemented("seccomp denial counters"); }

}  // namespace sandlet
