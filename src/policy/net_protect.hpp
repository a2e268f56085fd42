// What only a rule naming the address exactly opens (net_rules.hpp, "Protected ranges"): the node's own —
// the uplink's addresses and local routes, which change while sandboxes live — and fixed ranges every host
// has: link-local (where clouds put their metadata services) and the usual metadata endpoints.
// The library reads them at create and update, the node gateway whenever the uplink's addresses change.
#pragma once
#include <vector>

#include "policy/net_rules.hpp"
#include "sys/rtnetlink.hpp"

namespace sandlet::policy {

// Link-local (169.254.0.0/16, fe80::/10) and, as /32 or /128 of their own, the cloud metadata endpoints
// (169.254.169.254, 169.254.170.2, 169.254.0.23, 100.100.100.200, 168.63.129.16, fd00:ec2::254).
const std::vector<NetProtectedRange>& fixed_protected_ranges();

// The fixed ranges, then one range per distinct address or local route of `addresses` (a /32 or /128 for an
// address), loopback left out: loopback is the sandbox's own (its namespace's), always allowed and never
// relayed.
std::vector<NetProtectedRange> protected_ranges_of(const std::vector<sys::NetnsAddress>& addresses);

// Whether `r` is one of the IPv6 forms protected_ranges_of adds for an IPv4 range (NAT64, 6to4).
bool is_translated_form(const NetProtectedRange& r);

}  // namespace sandlet::policy
