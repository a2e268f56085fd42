// The host's side of the node gateway's counters (proto/netgw_counters.hpp): each sandbox with a policy has a
// file in its directory, made at create and handed to the gateway at attach; the node's is under
// `<root>/netgw/`. Read by `net stats`, the audit at a sandbox's end, and the metrics.
#pragma once
#include <boost/json/object.hpp>
#include <string>

#include "sys/fd.hpp"

namespace sandlet::host {

// `<dir>/netgw-counters`, emptied when `fresh`, else the existing one opened again (made if missing).
sys::UniqueFd open_netgw_counters(const std::string& dir, bool fresh);

// The counters of the file `path` by name ({"refused_policy": N, ...}); `node` includes the node-wide ones.
// A missing, short or foreign file reads as zeros.
boost::json::object read_netgw_counters(const std::string& path, bool node);

inline std::string netgw_counters_path(const std::string& sandbox_dir) { return sandbox_dir + "/netgw-counters"; }

}  // namespace sandlet::host
