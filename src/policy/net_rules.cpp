#include "policy/net_rules.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace sandlet::policy {
namespace {

struct Range {
  NetTrieKey key;
  int rule = -1;  // index into allow, -1 for the fixed ranges
};

bool same(const NetTrieKey& a, const NetTrieKey& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

NetTrieKey v6_key(std::initializer_list<uint8_t> head, uint32_t prefix) {
  NetTrieKey k;
  size_t i = 0;
  for (uint8_t b : head) k.addr[i++] = b;
  k.prefixlen = prefix;
  return k;
}

// Ranges of IPv6 that carry IPv4 (net_rules.hpp): only the rules inside them apply there.
const std::vector<NetTrieKey>& family_guards() {
  static const std::vector<NetTrieKey> guards = {
      v6_key({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96),  // IPv4-mapped: where IPv4 keys live
      v6_key({0x00, 0x64, 0xff, 0x9b}, 96),                     // NAT64, well-known prefix
      v6_key({0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48),         // NAT64, local-use prefix
      v6_key({0x20, 0x02}, 16),                                 // 6to4
      v6_key({0x20, 0x01, 0x00, 0x00}, 32),                     // Teredo
  };
  return guards;
}

NetPortEntry entry_of(const NetAllowRule& r, uint32_t reach) {
  NetPortEntry e;
  e.protos = r.protocols;
  e.lo = r.port_lo;
  e.hi = r.port_hi;
  e.reach = static_cast<uint8_t>(reach);
  // Ports restrict TCP and UDP; a rule for "any" protocol with ports does not open ICMP.
  if (!(r.port_lo == 0 && r.port_hi == 65535)) e.protos &= static_cast<uint8_t>(~kNetIcmp);
  if (e.protos == kNetIcmp) e.lo = 0, e.hi = 65535;
  return e;
}

void add(NetTrieValue& v, const NetPortEntry& e, const std::string& field) {
  for (auto& slot : v.e) {
    if (slot.protos == e.protos && slot.lo == e.lo && slot.hi == e.hi) {
      slot.reach = std::max(slot.reach, e.reach);  // the narrower rule opens more protected ranges
      return;
    }
    if (slot.protos == 0) {
      slot = e;
      return;
    }
  }
  throw_invalid(field, "more than " + std::to_string(kNetEntriesPerPrefix) +
                           " protocol/port ranges apply to one address range (merge port ranges or split the CIDR)");
}

}  // namespace

bool net_key_contains(const NetTrieKey& outer, const NetTrieKey& inner) {
  if (outer.prefixlen > inner.prefixlen || outer.prefixlen > 128) return false;
  const uint32_t bytes = outer.prefixlen / 8, bits = outer.prefixlen % 8;
  if (std::memcmp(outer.addr, inner.addr, bytes) != 0) return false;
  if (bits == 0) return true;
  const auto mask = static_cast<uint8_t>(0xFF << (8 - bits));
  return (outer.addr[bytes] & mask) == (inner.addr[bytes] & mask);
}

NetTrieKey net_key_of(int family, const std::array<uint8_t, 16>& addr, int prefix) {
  NetTrieKey k;
  if (family == 4) {
    k.addr[10] = k.addr[11] = 0xff;
    std::memcpy(k.addr + 12, addr.data(), 4);
    k.prefixlen = static_cast<uint32_t>(96 + prefix);
  } else {
    std::memcpy(k.addr, addr.data(), 16);
    k.prefixlen = static_cast<uint32_t>(prefix);
  }
  return k;
}

std::vector<NetTrieEntry> compile_net_rules(const std::vector<NetAllowRule>& user_rules, const std::string& field,
                                            const std::vector<NetProtectedRange>& inline_protect) {
  // The sandbox's own loopback, in its own namespace: every protocol and port, as if two more rules.
  std::vector<NetAllowRule> allow = user_rules;
  NetAllowRule lo;
  lo.family = 4;
  lo.addr[0] = 127;
  lo.prefix = 8;
  allow.push_back(lo);
  lo.family = 6;
  lo.addr = {};
  lo.addr[15] = 1;
  lo.prefix = 128;
  allow.push_back(lo);
  std::vector<Range> ranges;
  std::vector<NetTrieKey> rule_keys(allow.size());
  for (size_t i = 0; i < allow.size(); ++i) {
    if (allow[i].family == 0) continue;
    rule_keys[i] = net_key_of(allow[i].family, allow[i].addr, allow[i].prefix);
    ranges.push_back({rule_keys[i], static_cast<int>(i)});
  }
  // The guards are keys of their own, so that a destination inside one never falls through to a wider
  // IPv6 prefix around it.
  std::vector<NetTrieKey> guards = family_guards();
  const size_t first_protect = guards.size();  // those after it: protected ranges, opened by exact rules only
  for (const auto& p : inline_protect) guards.push_back(net_key_of(p.family, p.addr, p.prefix));
  for (const auto& g : guards) ranges.push_back({g, -1});

  std::vector<NetTrieEntry> out;
  auto find_or_add = [&](const NetTrieKey& k) -> NetTrieValue& {
    for (auto& e : out)
      if (same(e.key, k)) return e.value;
    out.push_back({k, {}});
    return out.back().value;
  };
  for (const Range& r : ranges) {
    NetTrieValue& value = find_or_add(r.key);
    const NetTrieKey* guard = nullptr;  // the innermost guard holding this range
    bool exact_only = false;
    for (size_t gi = 0; gi < guards.size(); ++gi) {
      const NetTrieKey& g = guards[gi];
      if (net_key_contains(g, r.key) && (!guard || g.prefixlen > guard->prefixlen)) guard = &g, exact_only = gi >= first_protect;
    }
    for (size_t i = 0; i < allow.size(); ++i) {
      if (allow[i].family == 0) continue;
      const NetTrieKey& rk = rule_keys[i];
      if (!net_key_contains(rk, r.key)) continue;
      if (guard && !net_key_contains(*guard, rk)) continue;
      if (exact_only && rk.prefixlen != kNetProtectReach) continue;
      const size_t named = r.rule >= 0 && static_cast<size_t>(r.rule) < user_rules.size() ? static_cast<size_t>(r.rule) : i;
      add(value, entry_of(allow[i], rk.prefixlen),
          field + "[" + std::to_string(std::min(named, user_rules.size())) + "]");
    }
  }
  return out;
}

}  // namespace sandlet::policy
