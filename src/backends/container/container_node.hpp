// What the container backend keeps per runtime for all its sandboxes: the host's cgroup layout, the
// network namespaces made ahead, the node-wide uid slot table and where the init binary is cached. Shared
// (by shared_ptr) between the backend and every sandbox object, which may outlive the backend object.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include <mutex>

#include "backends/host/net_gateway_client.hpp"
#include "backends/host/netns_pool.hpp"
#include "backends/host/slots.hpp"
#include "backends/container/sysv_probe.hpp"
#include "sys/cgroup.hpp"

namespace sandlet::container {

// The container backend is built on the shared host jail (src/backends/host): uid slots, the sandbox
// cgroup, network namespaces and the egress filter and gateway, which every backend's jail uses.
using namespace sandlet::host;

struct ContainerNode {
  sys::CgroupSystem cgroups;
  NetnsPool netns{4};
  std::unique_ptr<SlotTable> slots;
  std::string init_cache_dir;  // "" = the init runs from a sealed memfd
  std::function<void(std::function<void()>)> in_background;
  std::string root;
  // The node's network gateway, for sandboxes with a network policy (made on first use).
  std::string net_uplink_netns;
  std::mutex netgw_mutex;
  std::unique_ptr<NetGatewayClient> netgw;
  NetGatewayClient& gateway();
  // FnCall's check for SysV objects left in a sandbox (one thread for the node, started at first use).
  SysvProbe sysv;
};

}  // namespace sandlet::container
