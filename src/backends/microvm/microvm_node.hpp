// What the microVMs of one runtime share: the host jail's cgroups and uid slots, where the initramfs and
// the VM init's copy are kept, the kernel kit in use, and the node's network gateway.
#pragma once
#include <memory>
#include <mutex>
#include <string>

#include "backends/host/net_gateway_client.hpp"
#include "backends/host/slots.hpp"
#include "sys/cgroup.hpp"

namespace sandlet::microvm {

using sandlet::host::SlotTable;

struct MicrovmNode {
  sys::CgroupSystem cgroups;
  std::unique_ptr<SlotTable> slots;
  std::string root;         // the runtime root
  std::string cache_dir;    // root/microvm: initramfs files
  std::string bin_dir;      // where the VM init's executable copy lives
  std::string kernel;       // the configured kit ("" = the default, see guest_kit.hpp)
  // The node's network gateway, for microVMs with a network policy (made on first use; vm_network.cpp).
  std::string net_uplink_netns;
  std::mutex netgw_mutex;
  std::unique_ptr<host::NetGatewayClient> netgw;
  host::NetGatewayClient& gateway();
};

}  // namespace sandlet::microvm
