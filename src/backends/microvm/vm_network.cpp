#include "backends/microvm/vm_network.hpp"

#include <boost/json.hpp>
#include <set>

#include "backends/host/dns_log.hpp"
#include "backends/host/net_gateway_client.hpp"
#include "backends/host/net_gateway_reattach.hpp"
#include "backends/host/netgw_counters.hpp"
#include "backends/host/netns_pool.hpp"
#include "backends/host/sandbox_net.hpp"
#include "backends/microvm/microvm_node.hpp"

namespace sandlet::microvm {

std::vector<std::string> nic_args(const NetworkPolicy& policy) {
  // The guest's own addresses (10.0.2.0/24, fec0::/64) are QEMU's defaults; its DNS proxy and its TFTP
  // and SMB services stay unused (the guest's resolver is the gateway's, reached like any destination).
  std::string netdev = "user,id=net0";
  std::set<uint16_t> inside;  // two host ports may publish one port inside: one forward
  for (const NetPublish& p : policy.publish)
    if (inside.insert(p.port).second)
      netdev += ",hostfwd=tcp:127.0.0.1:" + std::to_string(p.port) + "-:" + std::to_string(p.port);
  return {"-netdev", netdev, "-device", "virtio-net-device,netdev=net0"};
}

sys::UniqueFd prepare_vm_network(int cgroup_fd, const NetworkPolicy& policy) {
  sys::UniqueFd netns = host::NetnsPool::make();
  host::attach_network_policy(cgroup_fd, policy);
  return netns;
}

void attach_vm_gateway(MicrovmNode& node, const std::string& id, const std::string& dir, int netns_fd, int pidfd,
                       int cgroup_fd, const NetworkPolicy& policy) {
  const sys::UniqueFd dns_log = policy.dns.empty() ? sys::UniqueFd() : host::open_dns_log(dir, true);
  const sys::UniqueFd counters = host::open_netgw_counters(dir, true);
  host::attach_network_gateway(node.gateway(), id, netns_fd, pidfd, cgroup_fd, policy, dns_log ? dns_log.get() : -1,
                               counters.get());
}

host::NetGatewayClient& MicrovmNode::gateway() {
  std::lock_guard<std::mutex> lk(netgw_mutex);
  if (!netgw) netgw = host::make_node_gateway(root, net_uplink_netns);
  return *netgw;
}

}  // namespace sandlet::microvm
