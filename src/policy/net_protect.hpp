// The uplink's own addresses as protected ranges (net_rules.hpp): the one reading both the library (the
// rules' compile at create and update) and the node gateway (resolved addresses) give the allowlist.
#pragma once
#include <vector>

#include "policy/net_rules.hpp"
#include "sys/rtnetlink.hpp"

namespace sandlet::policy {

// One /32 or /128 per distinct address, loopback left out: loopback is the sandbox's own (its
// namespace's), always allowed and never relayed.
std::vector<NetProtectedRange> protected_ranges_of(const std::vector<sys::NetnsAddress>& addresses);

}  // namespace sandlet::policy
