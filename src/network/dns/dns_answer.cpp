#include "network/dns/dns_answer.hpp"

#include <algorithm>
#include <string>

namespace sandlet::net {
namespace {

// Addresses no rule by name should open: they mean "this host", a group, or everyone on the link; the
// sandbox's own loopback is always allowed anyway.
bool useless(int family, const std::array<uint8_t, 16>& a) {
  if (family == 4) {
    if (a[0] == 0 || a[0] == 127 || (a[0] & 0xF0) == 0xE0) return true;
    return a[0] == 255 && a[1] == 255 && a[2] == 255 && a[3] == 255;
  }
  if (a[0] == 0xFF) return true;
  bool zero_to_14 = std::all_of(a.begin(), a.begin() + 15, [](uint8_t b) { return b == 0; });
  return zero_to_14 && (a[15] == 0 || a[15] == 1);
}

}  // namespace

DnsChainAnswer follow_answer(std::string_view qname, uint16_t qtype, const std::vector<DnsRecord>& answers) {
  DnsChainAnswer out;
  struct Link {
    std::string name;
    uint32_t ttl;
  };
  std::vector<Link> chain{{std::string(qname), UINT32_MAX}};
  while (chain.size() <= kDnsMaxChain) {
    const DnsRecord* next = nullptr;
    for (const DnsRecord& r : answers) {
      if (r.type == kDnsCname && r.klass == kDnsClassIn && r.owner == chain.back().name) {
        next = &r;
        break;
      }
    }
    if (!next || !dns_is_host_name(next->target)) break;
    const bool loops = std::any_of(chain.begin(), chain.end(), [&](const Link& l) { return l.name == next->target; });
    out.records.push_back(*next);
    if (loops) break;
    chain.push_back({next->target, std::min(chain.back().ttl, next->ttl)});
    if (qtype == kDnsCname) break;  // the asked record itself
  }
  if (qtype != kDnsA && qtype != kDnsAaaa) return out;
  for (const DnsRecord& r : answers) {
    if (r.type != qtype || r.klass != kDnsClassIn) continue;
    const auto link = std::find_if(chain.begin(), chain.end(), [&](const Link& l) { return l.name == r.owner; });
    if (link == chain.end()) continue;
    const int family = qtype == kDnsA ? 4 : 6;
    if (useless(family, r.addr)) continue;
    const uint32_t ttl = std::min(link->ttl, r.ttl);
    auto same = std::find_if(out.addresses.begin(), out.addresses.end(),
                             [&](const DnsAddress& a) { return a.addr == r.addr; });
    if (same != out.addresses.end()) {
      same->ttl = std::max(same->ttl, ttl);
      continue;
    }
    if (out.addresses.size() >= kDnsMaxAddresses) break;
    out.addresses.push_back({family, r.addr, ttl});
    DnsRecord kept = r;
    kept.ttl = ttl;
    out.records.push_back(std::move(kept));
  }
  return out;
}

}  // namespace sandlet::net
