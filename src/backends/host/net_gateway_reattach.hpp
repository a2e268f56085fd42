// After a gateway restart (the previous one was killed): every live sandbox of the root whose network goes
// through the gateway is attached again, from its record, whichever backend's client restarted it. Each
// backend registers how to read its own record section (GatewayMember); nothing else reads it.
#pragma once
#include <boost/json/object.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>

namespace sandlet::host {

class NetGatewayClient;

// What the re-attach needs of a sandbox: the process whose network namespace is the sandbox's and whose
// end is the sandbox's (a container's init, a microVM's multiplexer), and the sandbox's cgroup2 directory.
struct GatewayMember {
  pid_t pid = 0;
  uint64_t start = 0;  // the process's start time, against pid reuse
  std::string cgroup_v2;
};
// Reads a record's backend section: the member, or nothing for a sandbox without the gateway.
using GatewayMemberOf = std::function<std::optional<GatewayMember>(const boost::json::object& backend_state)>;

// Once per backend name (a later call replaces the reader).
void register_gateway_members(const std::string& backend, GatewayMemberOf member_of);

void reattach_gateway_sandboxes(NetGatewayClient& gateway, const std::string& root) noexcept;

// A backend node's client of the root's gateway: one that restarts a killed gateway re-attaches every
// live sandbox of every registered backend.
std::unique_ptr<NetGatewayClient> make_node_gateway(const std::string& root, const std::string& uplink_netns);

}  // namespace sandlet::host
