// Where a node's network gateway (sandlet-netgw, docs/NETWORK.md "Connectivity") keeps its files, shared by
// the gateway and the library's client.
#pragma once
#include <string>

namespace sandlet::netgw {

inline std::string gateway_dir(const std::string& root) { return root + "/netgw"; }
inline std::string control_socket_path(const std::string& root) { return gateway_dir(root) + "/control.sock"; }
inline std::string lock_path(const std::string& root) { return gateway_dir(root) + "/lock"; }
inline std::string log_path(const std::string& root) { return gateway_dir(root) + "/netgw.log"; }

}  // namespace sandlet::netgw
