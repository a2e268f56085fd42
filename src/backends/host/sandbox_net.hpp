// A sandbox's network policy in the kernel (any backend: a container's init or a VM's QEMU sits in the cgroup): the allowlist filter (policy/net_filter.hpp)
// attached to the sandbox's cgroup2 directory at create, updated in place, counted. "none" sandboxes get
// no filter: their pooled namespace has loopback only.
#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "policy/net_resolved.hpp"
#include "policy/net_rules.hpp"
#include "spec/network_spec.hpp"

namespace sandlet::host {

class NetGatewayClient;

struct NetIds {
  uint32_t rules_map = 0;  // bpf map ids, for the record (diagnostics; the filter is found from the group)
  uint32_t stats_map = 0;
};
// Loads and attaches the filter for `policy` to the cgroup2 directory `cgroup_fd` (nothing for "none").
// Attached programs belong to the group: its removal (reclaim, gc) frees them and their maps. The
// protected ranges start as the fixed ones (policy/net_protect.hpp); the node gateway adds the uplink's
// addresses at attach, before anything of the sandbox runs, and keeps them current.
NetIds attach_network_policy(int cgroup_fd, const NetworkPolicy& policy);
// Swaps in the allowlist of `policy` (only `allow` and `dns` may change at run time) for the group at
// `cgroup_v2`, keeping resolved addresses of the rules by name the new policy still has. A filter made by
// an older version (no protected-range map) gets the protected ranges compiled in, with the addresses of
// the namespace file `uplink_netns` ("" = this process's).
// FAILED_PRECONDITION when the sandbox was created with "none".
void update_network_policy(const std::string& cgroup_v2, const std::string& id, const NetworkPolicy& policy,
                           const std::string& uplink_netns = "");
// Gives the sandbox whose init is `init_pid` (its pidfd `pidfd`) connectivity through the node gateway:
// AnyIP routes in its namespace `netns_fd`, then the gateway's attach (with the DNS log for a policy with
// resolvers, -1 for none; and the gateway's counters file, netgw_counters.hpp). Before anything of the
// sandbox runs.
void attach_network_gateway(NetGatewayClient& gw, const std::string& id, int netns_fd, int pidfd, int cgroup_fd,
                            const NetworkPolicy& policy, int dns_log_fd = -1, int counters_fd = -1);
// A running sandbox's `net update` (any backend): the kernel allowlist of its group `cgroup_v2`, then the
// gateway's copy when it is attached (`gw`, null otherwise; a killed gateway is started again first).
void update_sandbox_network(NetGatewayClient* gw, const std::string& cgroup_v2, const std::string& id,
                            const NetworkPolicy& policy, const std::string& uplink_netns);
// Its `net stats`: network_counters, the DNS log of its directory `dir`, and the gateway's counters when
// attached (`gw`).
boost::json::object sandbox_network_stats(NetGatewayClient* gw, const std::string& cgroup_v2, const std::string& id,
                                          const std::string& dir);
// Adds addresses resolved for the sandbox's rules by name (the node's resolver calls it; policy/net_resolved.hpp
// for the bounds and expiry) and swaps in the new allowlist; expired addresses leave at the same time (an
// empty `add` only prunes). Returns how many records could not be placed. Safe against concurrent updates
// and other resolver processes (a lock on the sandbox's cgroup directory); FAILED_PRECONDITION for "none".
size_t add_resolved_addresses(const std::string& cgroup_v2, const std::string& id,
                              const std::vector<policy::NetResolved>& add);
// The resolved set as stored (for diagnostics and tests).
std::vector<policy::NetResolved> resolved_addresses(const std::string& cgroup_v2, const std::string& id);
// {"filtered", "connect_denied", "sendmsg_denied", "egress_dropped", "denied": [records after
// `after_seq`, oldest first: {"seq", "address", "port", "protocol", "hook"}]}. For the audit log: keep
// the last seq seen and ask for what came after (at most the last 64 are kept).
boost::json::object network_counters(const std::string& cgroup_v2, const std::string& id, uint64_t after_seq = 0);

}  // namespace sandlet::host
