// The gateway's half of a container sandbox's network (sandbox_net.hpp): the sandbox's attach to the node
// gateway (which also keeps its protected ranges current with the uplink's addresses). Apart from
// sandbox_net.cpp so that the allowlist alone links without the gateway client (the rules-by-name test links
// it that way).
#include <fcntl.h>

#include "backends/host/dns_log.hpp"
#include "backends/host/net_gateway_client.hpp"
#include "backends/host/netgw_counters.hpp"
#include "backends/host/sandbox_net.hpp"
#include "common/error.hpp"
#include "policy/net_sk_lookup.hpp"
#include "sys/fd.hpp"
#include "sys/rtnetlink.hpp"

namespace sandlet::host {

void attach_network_gateway(NetGatewayClient& gw, const std::string& id, int netns_fd, int pidfd, int cgroup_fd,
                            const NetworkPolicy& policy, int dns_log_fd, int counters_fd) {
  sys::add_anyip_routes(netns_fd, policy::kSandboxSource4, policy::kSandboxSource6);
  gw.attach(id, netns_fd, pidfd, cgroup_fd, policy, dns_log_fd, counters_fd);
}

void update_sandbox_network(NetGatewayClient* gw, const std::string& cgroup_v2, const std::string& id,
                            const NetworkPolicy& policy, const std::string& uplink_netns) {
  if (gw) gw->ensure_running();  // a killed gateway: back, with every sandbox
  update_network_policy(cgroup_v2, id, policy, uplink_netns);
  if (gw) gw->update(id, policy);
}

boost::json::object sandbox_network_stats(NetGatewayClient* gw, const std::string& cgroup_v2, const std::string& id,
                                          const std::string& dir) {
  if (gw) gw->ensure_running();
  boost::json::object o = network_counters(cgroup_v2, id);
  o["dns"] = read_dns_log(dir);
  if (gw) o["gateway"] = read_netgw_counters(netgw_counters_path(dir), false);
  return o;
}

}  // namespace sandlet::host
