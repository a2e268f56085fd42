#include "policy/net_rules.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace sandlet::policy {
namespace {

struct Range {
  NetTrieKey key;
  int rule = -1;  // index into allow, -1 for fixed and protected ranges
};

bool bit(const uint8_t* a, uint32_t i) { return (a[i / 8] >> (7 - i % 8)) & 1; }

// Whether range `outer` contains range `inner`.
bool contains(const NetTrieKey& outer, const NetTrieKey& inner) {
  if (outer.prefixlen > inner.prefixlen) return false;
  for (uint32_t i = 0; i < outer.prefixlen; ++i)
    if (bit(outer.addr, i) != bit(inner.addr, i)) return false;
  return true;
}

bool same(const NetTrieKey& a, const NetTrieKey& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

NetPortEntry entry_of(const NetAllowRule& r) {
  NetPortEntry e;
  e.protos = r.protocols;
  e.lo = r.port_lo;
  e.hi = r.port_hi;
  // Ports restrict TCP and UDP; a rule for "any" protocol with ports does not open ICMP.
  if (!(r.port_lo == 0 && r.port_hi == 65535)) e.protos &= static_cast<uint8_t>(~kNetIcmp);
  if (e.protos == kNetIcmp) e.lo = 0, e.hi = 65535;
  return e;
}

void add(NetTrieValue& v, const NetPortEntry& e, const std::string& field) {
  for (auto& slot : v.e) {
    if (slot.protos == e.protos && slot.lo == e.lo && slot.hi == e.hi) return;
    if (slot.protos == 0) {
      slot = e;
      return;
    }
  }
  throw_invalid(field, "more than " + std::to_string(kNetEntriesPerPrefix) +
                           " protocol/port ranges apply to one address range (merge port ranges or split the CIDR)");
}

}  // namespace

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

std::vector<NetTrieEntry> compile_net_rules(const std::vector<NetAllowRule>& user_rules,
                                            const std::vector<NetProtectedRange>& protect,
                                            const std::string& field) {
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
  for (size_t i = 0; i < allow.size(); ++i) {
    if (allow[i].family == 0) continue;
    ranges.push_back({net_key_of(allow[i].family, allow[i].addr, allow[i].prefix), static_cast<int>(i)});
  }
  std::vector<NetTrieKey> protected_keys;
  for (const auto& p : protect) protected_keys.push_back(net_key_of(p.family, p.addr, p.prefix));
  for (const auto& k : protected_keys) ranges.push_back({k, -1});

  std::vector<NetTrieEntry> out;
  auto find_or_add = [&](const NetTrieKey& k) -> NetTrieValue& {
    for (auto& e : out)
      if (same(e.key, k)) return e.value;
    out.push_back({k, {}});
    return out.back().value;
  };
  for (const Range& r : ranges) {
    NetTrieValue& value = find_or_add(r.key);
    // The innermost protected range holding this one, if any: only rules inside it apply.
    const NetTrieKey* guard = nullptr;
    for (const auto& p : protected_keys)
      if (contains(p, r.key) && (!guard || p.prefixlen > guard->prefixlen)) guard = &p;
    for (size_t i = 0; i < allow.size(); ++i) {
      if (allow[i].family == 0) continue;
      const NetTrieKey rk = net_key_of(allow[i].family, allow[i].addr, allow[i].prefix);
      if (!contains(rk, r.key)) continue;
      if (guard && !contains(*guard, rk)) continue;
      const size_t named = r.rule >= 0 && static_cast<size_t>(r.rule) < user_rules.size() ? static_cast<size_t>(r.rule) : i;
      add(value, entry_of(allow[i]), field + "[" + std::to_string(std::min(named, user_rules.size())) + "]");
    }
  }
  return out;
}

}  // namespace sandlet::policy
