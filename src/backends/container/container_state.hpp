// The container backend's section of a sandbox record: everything another process (or gc after a crash)
// needs to reach, kill and reclaim the sandbox. Only this backend reads it.
#pragma once
#include <sys/types.h>

#include <boost/json/object.hpp>
#include <cstdint>
#include <string>

#include "sys/cgroup.hpp"

namespace sandlet::container {

struct ContainerState {
  int slot = -1;            // uid range slot (slots.hpp)
  uint32_t uid_base = 0;    // host uid of root inside
  pid_t init_pid = 0;       // the init (PID 1 inside) as seen from the host
  uint64_t init_start = 0;  // its start time (clock ticks), to tell a reused pid
  sys::CgroupPaths cgroups;
  std::string agent_socket;  // host path of the agent's listening socket
  uint64_t upper_mnt_id = 0;  // mount id of the writable layer's tmpfs, kept by the init (0: none)
  // The network filter's bpf map ids (0: network "none"). For diagnostics: the filter itself is found
  // from the cgroup (sandbox_net.hpp), and goes with it.
  uint32_t net_rules_map = 0, net_stats_map = 0;
  bool net_gateway = false;  // attached to the node's network gateway (docs/NETWORK.md)

  boost::json::object to_json() const;
  // Throws DATA_LOSS on a damaged section; an empty object gives the defaults (a crash came before the
  // record held the section).
  static ContainerState from_json(const boost::json::object& o);
};

}  // namespace sandlet::container
