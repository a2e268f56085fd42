// The gateway's half of a container sandbox's network (sandbox_net.hpp): the uplink's addresses as
// protected ranges, and the sandbox's attach to the node gateway. Apart from sandbox_net.cpp so that the
// allowlist alone links without the gateway client (the rules-by-name test links it that way).
#include <fcntl.h>

#include "backends/container/net_gateway_client.hpp"
#include "backends/container/sandbox_net.hpp"
#include "common/error.hpp"
#include "policy/net_sk_lookup.hpp"
#include "policy/net_uplink.hpp"
#include "sys/fd.hpp"
#include "sys/rtnetlink.hpp"

namespace sandlet::container {

std::vector<policy::NetProtectedRange> uplink_protected_ranges(const std::string& uplink_netns) {
  sys::UniqueFd ns;
  if (!uplink_netns.empty()) {
    ns.reset(::open(uplink_netns.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) throw_errno("open the network uplink namespace " + uplink_netns);
  }
  return policy::protected_ranges_of(sys::netns_addresses(ns ? ns.get() : -1));
}

void attach_network_gateway(NetGatewayClient& gw, const std::string& id, int netns_fd, int pidfd, int cgroup_fd,
                            const NetworkPolicy& policy, int dns_log_fd) {
  sys::add_anyip_routes(netns_fd, policy::kSandboxSource4, policy::kSandboxSource6);
  gw.attach(id, netns_fd, pidfd, cgroup_fd, policy, dns_log_fd);
}

}  // namespace sandlet::container
