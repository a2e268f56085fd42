// The microvm backend: the factory of MicrovmSandbox objects and the owner of what they share.
#include "backends/microvm/microvm_backend.hpp"

#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "backends/microvm/guest_kit.hpp"
#include "backends/microvm/microvm_node.hpp"
#include "backends/microvm/microvm_sandbox.hpp"
#include "backends/host/net_gateway_reattach.hpp"
#include "backends/vm_accel.hpp"
#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::microvm {
namespace {

// Lets a gateway restarted by any backend's client re-attach this backend's sandboxes (each backend
// registers its reader when it starts, so that either client restores all).
void register_vm_gateway_members() {
  host::register_gateway_members("microvm", [](const boost::json::object& o) -> std::optional<host::GatewayMember> {
    const MicrovmState st = MicrovmState::from_json(o);
    if (!st.net_gateway) return std::nullopt;
    return host::GatewayMember{st.mux_pid, st.mux_start, st.cgroups.v2};
  });
}

class MicrovmBackend final : public Backend {
 public:
  explicit MicrovmBackend(std::string root) : node_(std::make_shared<MicrovmNode>()) { node_->root = std::move(root); }

  const char* name() const override { return "microvm"; }
  // A warm pool's VM is launched at prepare when the pool stages an environment (its disks depend on the
  // layers): the boot overlaps the wait, and a create only configures it. A generic one launches at
  // finish. Networks go through the node gateway, as a container's (vm_network.hpp).
  uint32_t capabilities() const override { return kCapPrepareAhead | kCapPause | kCapLayerImages; }

  // Every runtime open starts every backend (the CLI opens one per command): the set-up waits for the
  // first microVM (or record of one) this runtime sees.
  void start(const BackendContext& context) override {
    context_ = context;
    // Where the node gateway connects out from (as for containers): $SANDLET_NET_UPLINK_NETNS, else the
    // host's namespace.
    if (const char* up = std::getenv("SANDLET_NET_UPLINK_NETNS"); up && *up) node_->net_uplink_netns = up;
    register_vm_gateway_members();
  }

  std::unique_ptr<BackendSandbox> prepare(const PrepareRequest& request) override {
    ready();
    auto sb = std::make_unique<MicrovmSandbox>(node_, request.id, request.dir, MicrovmState());
    sb->mark_prepared();
    if (request.stage_for && request.images) sb->launch_ahead(*request.stage_for, request.shape, *request.images);
    return sb;
  }

  std::unique_ptr<BackendSandbox> adopt(const std::string& id, const std::string& dir,
                                        const boost::json::object& state) override {
    ready();
    return std::make_unique<MicrovmSandbox>(node_, id, dir, MicrovmState::from_json(state));
  }

  void sweep(bool release_idle) override {
    if (node_->slots) node_->slots->sweep();
  }

 private:
  void ready() {
    std::call_once(started_, [this] {
      node_->cgroups = sys::CgroupSystem::detect();
      node_->cgroups.prepare();
      // One slot table for the node (containers' and microVMs' uid ranges never overlap).
      std::string slots = context_.node_state.empty() ? SlotTable::default_dir(context_.root + "/slots")
                                                      : context_.node_state + "/slots";
      sys::mkdir_p(slots, 0700);
      node_->slots = std::make_unique<SlotTable>(slots);
      node_->cache_dir = context_.root + "/microvm";
      node_->bin_dir = (context_.node_state.empty() ? context_.root + "/microvm" : context_.node_state) + "/bin";
    });
  }

  std::shared_ptr<MicrovmNode> node_;
  BackendContext context_;
  std::once_flag started_;
};

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& root) { return std::make_unique<MicrovmBackend>(root); }

BackendProbe probe() {
  const vm_accel::Probe accel = vm_accel::probe();
  boost::json::object details = accel.json();
  details["kernel"] = kernel_kit_location("");
  if (::geteuid() != 0) return BackendProbe::no("the microvm backend needs root on the host (it jails QEMU)", details);
  if (accel.qemu.empty()) return BackendProbe::no("qemu-system-x86_64 is not on PATH", details);
  if (!accel_setting().empty()) {
    details["accelerator_setting"] = accel_setting();
    try {
      details["accelerator"] = vm_accel::choose(accel, accel_setting(), "$SANDLET_MICROVM_ACCEL");
      details["accelerator_reason"] = "$SANDLET_MICROVM_ACCEL=" + accel_setting() + "; the host: " + accel.why;
    } catch (const Error& e) {
      return BackendProbe::no(e.what(), details);
    }
  }
  try {
    const KernelKit kit = find_kernel_kit("", /*modules=*/false);
    details["kernel_release"] = kit.release;
  } catch (const Error& e) {
    return BackendProbe::no(e.what(), details);
  }
  return BackendProbe::yes(details);
}

}  // namespace sandlet::microvm
