// The library's side of a node's network gateway (sandlet-netgw, src/network/gateway): finds it through its
// control socket under the runtime root, starts it from the copy embedded in the library when none
// answers, and attaches or detaches sandboxes. One connection per call: a gateway with no sandbox and no
// caller connected exits after its grace period.
#pragma once
#include <boost/json/object.hpp>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "spec/network_spec.hpp"

namespace sandlet::host {

class NetGatewayClient final {
 public:
  // `uplink_netns`: the namespace file the gateway connects out from ("" = the host's).
  NetGatewayClient(std::string root, std::string uplink_netns);

  // Hands the sandbox to the gateway (starting one if needed): its network namespace, its init's pidfd
  // (the gateway drops the sandbox when it ends) and its cgroup2 directory (where the gateway reads the
  // allowlist), for a policy with resolvers the sandbox's DNS log (dns_log.hpp; -1: none), and the file the
  // gateway counts the sandbox's refusals and bytes in (netgw_counters.hpp; -1: none). A published host
  // port in use is ALREADY_EXISTS naming the field; a gateway out of room for another sandbox UNAVAILABLE.
  void attach(const std::string& id, int netns_fd, int pidfd, int cgroup_fd, const NetworkPolicy& policy,
              int dns_log_fd = -1, int counters_fd = -1);
  // After a `net update` swapped the kernel rules: the gateway's copy of what it keeps of the policy (the
  // exactly named addresses, the resolver's rules by name and upstreams). Never starts a gateway.
  void update(const std::string& id, const NetworkPolicy& policy);
  // Starts the gateway if none answers (then on_restart runs).
  void ensure_running();
  // Best effort; never starts a gateway.
  void detach(const std::string& id) noexcept;
  // {"running": false} or the gateway's status.
  boost::json::object status();
  // Called (outside the client's lock) after this client had to start a gateway: the owner re-attaches
  // every live sandbox with egress, whose connectivity a killed gateway took with it.
  std::function<void()> on_restart;
  const std::string& uplink_netns() const { return uplink_; }

 private:
  boost::json::object call(const boost::json::object& request, const std::vector<int>& fds, bool start, bool* started);
  bool start_gateway();  // true: this call started it
  std::string root_, uplink_;
  std::mutex mu_;
};

// gc: when no gateway holds the root's lock, removes what a killed one left (its control socket).
void sweep_stale_gateway(const std::string& root) noexcept;

// Path of an executable copy of the embedded gateway (written once per node under `dir`, named by hash).
std::string netgw_executable(const std::string& dir);

}  // namespace sandlet::host
