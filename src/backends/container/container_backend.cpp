// The container backend: the factory of ContainerSandbox objects and the owner of what they share.
#include "backends/container/container_backend.hpp"

#include <unistd.h>

#include <cstdlib>

#include "backends/container/container_node.hpp"
#include "backends/container/container_sandbox.hpp"
#include "backends/container/kernel_support.hpp"
#include "backends/container/container_state.hpp"
#include "backends/host/net_gateway_reattach.hpp"
#include "common/error.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::container {
namespace {

class ContainerBackend final : public Backend {
 public:
  explicit ContainerBackend(std::string root) : root_(std::move(root)), node_(std::make_shared<ContainerNode>()) {}

  const char* name() const override { return "container"; }
  uint32_t capabilities() const override { return kCapPrepareAhead | kCapOneShot | kCapPause | kCapSnapshot | kCapStoreLayers | kCapSetLimits |
                                                 kCapReuseCheck; }

  void start(const BackendContext& context) override {
    node_->cgroups = sys::CgroupSystem::detect();
    node_->cgroups.prepare();
    // The uid slot table is node-wide: runtimes with different roots must not hand out the same range.
    std::string slots =
        context.node_state.empty() ? SlotTable::default_dir(context.root + "/slots") : context.node_state + "/slots";
    sys::mkdir_p(slots, 0700);
    node_->slots = std::make_unique<SlotTable>(slots);
    node_->init_cache_dir = context.node_state;
    node_->in_background = context.in_background;
    node_->root = context.root;
    // Where the node gateway connects out from: $SANDLET_NET_UPLINK_NETNS (a network namespace file), else
    // the host's namespace. Read when the runtime opens; a gateway already running keeps its own.
    if (const char* up = std::getenv("SANDLET_NET_UPLINK_NETNS"); up && *up) node_->net_uplink_netns = up;
    // A gateway restarted by any backend's client attaches this backend's sandboxes again too.
    register_gateway_members("container", [](const boost::json::object& o) -> std::optional<GatewayMember> {
      const ContainerState st = ContainerState::from_json(o);
      if (!st.net_gateway) return std::nullopt;
      return GatewayMember{st.init_pid, st.init_start, st.cgroups.v2};
    });
  }

  // The network namespace is the costliest part of a create and needs nothing else: made on a side thread.
  void expect_create() override {
    if (::geteuid() == 0) node_->netns.prefetch_first();
  }

  std::unique_ptr<BackendSandbox> prepare(const PrepareRequest& request) override {
    auto sb = std::make_unique<ContainerSandbox>(node_, request.id, request.dir, ContainerState());
    sb->prepare(request.stage_for, request.limits);
    return sb;
  }

  std::unique_ptr<BackendSandbox> adopt(const std::string& id, const std::string& dir,
                                        const boost::json::object& state) override {
    return std::make_unique<ContainerSandbox>(node_, id, dir, ContainerState::from_json(state));
  }

  void sweep(bool release_idle) override {
    if (node_->slots) node_->slots->sweep();
    if (release_idle) node_->cgroups.release();
    if (release_idle && !node_->root.empty()) sweep_stale_gateway(node_->root);
  }

 private:
  const std::string root_;
  std::shared_ptr<ContainerNode> node_;
};

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& root) { return std::make_unique<ContainerBackend>(root); }

BackendProbe probe() {
  auto max_userns = sys::read_file_if_exists("/proc/sys/user/max_user_namespaces", 64);
  if (max_userns && std::atol(max_userns->c_str()) == 0)
    return BackendProbe::no("user namespaces are disabled (user.max_user_namespaces = 0)");
  if (std::string why = kernel_unsupported(); !why.empty()) return BackendProbe::no(why);
  if (::geteuid() != 0) return BackendProbe::no("the container backend needs root (CAP_SYS_ADMIN) on the host");
  try {
    const auto cgroups = sys::CgroupSystem::detect();
    return BackendProbe::yes({{"cgroups", cgroups.unified ? "v2" : "hybrid"}});
  } catch (const Error& e) {
    return BackendProbe::no(e.what());
  }
}

}  // namespace sandlet::container
