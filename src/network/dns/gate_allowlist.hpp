// From the name gate's decisions to the allowlist's resolved set: what the node's resolver hands to
// host::add_resolved_addresses after answering a sandbox.
#pragma once
#include <cstdint>
#include <vector>

#include "network/dns/name_gate.hpp"
#include "policy/net_resolved.hpp"

namespace sandlet::net {

// One record per allowed (address, rule): the rule's protocols and ports, its tag (so an update that keeps
// the rule keeps the address), and the expiry of the answer's TTL from `now` (net_resolved_expiry).
// `rules` is the list the gate was made with.
std::vector<policy::NetResolved> resolved_of(const GateResult& result, const std::vector<NetAllowRule>& rules,
                                             uint32_t now);

}  // namespace sandlet::net
