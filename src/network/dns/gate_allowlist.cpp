#include "network/dns/gate_allowlist.hpp"

namespace sandlet::net {

std::vector<policy::NetResolved> resolved_of(const GateResult& result, const std::vector<NetAllowRule>& rules,
                                             uint32_t now) {
  std::vector<policy::NetResolved> out;
  for (const NameGateAllow& a : result.allow) {
    if (a.rule >= rules.size()) continue;
    policy::NetResolved r;
    r.family = a.family;
    r.addr = a.addr;
    r.protos = a.protocols;
    r.port_lo = a.port_lo;
    r.port_hi = a.port_hi;
    r.expires = policy::net_resolved_expiry(now, a.ttl);
    r.rule_tag = policy::net_rule_tag(rules[a.rule]);
    out.push_back(r);
  }
  return out;
}

}  // namespace sandlet::net
