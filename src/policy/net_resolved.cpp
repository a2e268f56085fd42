#include "policy/net_resolved.hpp"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>

namespace sandlet::policy {
namespace {

bool covers(const NetTrieKey& outer, const NetTrieKey& inner) {
  if (outer.prefixlen > inner.prefixlen) return false;
  const uint32_t bytes = outer.prefixlen / 8, bits = outer.prefixlen % 8;
  if (std::memcmp(outer.addr, inner.addr, bytes) != 0) return false;
  if (bits == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xFF << (8 - bits));
  return (outer.addr[bytes] & mask) == (inner.addr[bytes] & mask);
}

NetTrieKey key_of(const NetResolved& r) { return net_key_of(r.family, r.addr, r.family == 4 ? 32 : 128); }

bool same_grant(const NetResolved& a, const NetResolved& b) {
  return a.family == b.family && a.addr == b.addr && a.protos == b.protos && a.port_lo == b.port_lo &&
         a.port_hi == b.port_hi && a.rule_tag == b.rule_tag;
}

bool by_address(const NetResolved& a, const NetResolved& b) {
  if (a.family != b.family) return a.family < b.family;
  if (a.addr != b.addr) return a.addr < b.addr;
  return a.expires > b.expires;  // within an address, the longest-lived first
}

// Drops the soonest to expire until at most `max` remain (by_address order is restored by the caller).
void keep_latest(std::vector<NetResolved>& v, size_t max) {
  if (v.size() <= max) return;
  std::stable_sort(v.begin(), v.end(), [](const NetResolved& a, const NetResolved& b) { return a.expires > b.expires; });
  v.resize(max);
}

}  // namespace

uint32_t net_rule_tag(const NetAllowRule& rule) {
  const std::string id = rule.host + "|" + std::to_string(rule.protocols) + "|" + std::to_string(rule.port_lo) + "-" +
                         std::to_string(rule.port_hi);
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : id) h = (h ^ c) * 16777619u;
  return h == 0 ? 1 : h;
}

uint32_t net_clock_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint32_t>(ts.tv_sec);
}

uint32_t net_resolved_expiry(uint32_t now, uint32_t ttl) {
  return now + std::clamp(ttl, kNetResolvedTtlFloor, kNetResolvedTtlCap);
}

std::vector<NetResolved> merge_resolved_set(const std::vector<NetResolved>& current, const std::vector<NetResolved>& add,
                                            uint32_t now, const std::vector<uint32_t>* keep_tags) {
  std::vector<NetResolved> all;
  for (const auto* list : {&current, &add}) {
    for (const NetResolved& r : *list) {
      if (r.expires <= now || r.protos == 0 || (r.family != 4 && r.family != 6)) continue;
      if (keep_tags && std::find(keep_tags->begin(), keep_tags->end(), r.rule_tag) == keep_tags->end()) continue;
      all.push_back(r);
    }
  }
  // One record per grant, the latest expiry: sorted so that equal grants are adjacent, longest-lived first.
  std::sort(all.begin(), all.end(), [](const NetResolved& a, const NetResolved& b) {
    return std::tie(a.family, a.addr, a.protos, a.port_lo, a.port_hi, a.rule_tag, b.expires) <
           std::tie(b.family, b.addr, b.protos, b.port_lo, b.port_hi, b.rule_tag, a.expires);
  });
  all.erase(std::unique(all.begin(), all.end(), same_grant), all.end());
  std::sort(all.begin(), all.end(), by_address);
  // Per address: the longest-lived kNetResolvedPerAddress (they are first in by_address order).
  std::vector<NetResolved> bounded;
  for (size_t i = 0; i < all.size(); ++i) {
    size_t run = 0;
    for (size_t j = bounded.size(); j > 0 && bounded[j - 1].family == all[i].family && bounded[j - 1].addr == all[i].addr; --j) ++run;
    if (run < kNetResolvedPerAddress) bounded.push_back(all[i]);
  }
  keep_latest(bounded, kNetMaxResolved);
  std::sort(bounded.begin(), bounded.end(), by_address);
  return bounded;
}

std::vector<NetTrieEntry> merge_resolved_entries(const std::vector<NetTrieEntry>& static_entries,
                                                 const std::vector<NetResolved>& resolved,
                                                 const std::vector<NetProtectedRange>& protect, size_t* dropped) {
  std::vector<NetTrieEntry> out = static_entries;
  std::vector<NetTrieKey> guards;
  for (const auto& p : protect) guards.push_back(net_key_of(p.family, p.addr, p.prefix));
  size_t lost = 0;
  out.reserve(static_entries.size() + resolved.size());  // `entry` points into it
  NetTrieEntry* entry = nullptr;
  NetTrieKey entry_key;
  std::vector<NetResolved> sorted = resolved;
  std::sort(sorted.begin(), sorted.end(), by_address);
  for (const NetResolved& r : sorted) {
    const NetTrieKey k = key_of(r);
    if (std::any_of(guards.begin(), guards.end(), [&](const NetTrieKey& g) { return covers(g, k); })) {
      ++lost;
      continue;
    }
    // Records of one address are adjacent: the entry made for the previous one, a static
    // /32 or /128 of the same address, or a new one starting from what the longest static prefix holding
    // it allows.
    if (!entry || std::memcmp(&entry_key, &k, sizeof k) != 0) {
      entry_key = k;
      const NetTrieEntry* best = nullptr;
      size_t exact = out.size();
      for (size_t i = 0; i < static_entries.size(); ++i) {
        const NetTrieEntry& s = static_entries[i];
        if (std::memcmp(&s.key, &k, sizeof k) == 0) exact = i;
        if (covers(s.key, k) && (!best || s.key.prefixlen > best->key.prefixlen)) best = &s;
      }
      if (exact == out.size()) {
        out.push_back({k, best ? best->value : NetTrieValue{}});
        entry = &out.back();
      } else {
        entry = &out[exact];
      }
    }
    NetPortEntry pe;  // reach 0: an address a name resolved to opens no protected range
    pe.protos = r.protos;
    pe.lo = r.port_lo;
    pe.hi = r.port_hi;
    if (!(r.port_lo == 0 && r.port_hi == 65535)) pe.protos &= static_cast<uint8_t>(~kNetIcmp);  // as rules do
    if (pe.protos == kNetIcmp) pe.lo = 0, pe.hi = 65535;
    if (pe.protos == 0) continue;
    bool placed = false;
    for (auto& slot : entry->value.e) {
      if (slot.protos == 0) slot = pe;
      if (slot.protos == pe.protos && slot.lo == pe.lo && slot.hi == pe.hi) {
        placed = true;
        break;
      }
    }
    if (!placed) ++lost;
  }
  if (dropped) *dropped = lost;
  return out;
}

std::vector<std::pair<NetTrieKey, NetResolvedValue>> resolved_to_store(const std::vector<NetResolved>& set) {
  std::vector<std::pair<NetTrieKey, NetResolvedValue>> out;
  for (const NetResolved& r : set) {
    const NetTrieKey k = key_of(r);
    if (out.empty() || std::memcmp(&out.back().first, &k, sizeof k) != 0) out.push_back({k, {}});
    for (auto& slot : out.back().second.r) {
      if (slot.protos != 0) continue;
      slot.lo = r.port_lo;
      slot.hi = r.port_hi;
      slot.protos = r.protos;
      slot.expires = r.expires;
      slot.rule_tag = r.rule_tag;
      break;
    }
  }
  return out;
}

std::vector<NetResolved> resolved_from_store(const NetTrieKey& key, const NetResolvedValue& value) {
  std::vector<NetResolved> out;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  NetResolved base;
  if (key.prefixlen == 128 && std::memcmp(key.addr, kMapped, 12) == 0) {
    base.family = 4;
    std::memcpy(base.addr.data(), key.addr + 12, 4);
  } else if (key.prefixlen == 128) {
    base.family = 6;
    std::memcpy(base.addr.data(), key.addr, 16);
  } else {
    return out;  // not ours
  }
  for (const auto& slot : value.r) {
    if (slot.protos == 0) continue;
    NetResolved r = base;
    r.protos = slot.protos;
    r.port_lo = slot.lo;
    r.port_hi = slot.hi;
    r.expires = slot.expires;
    r.rule_tag = slot.rule_tag;
    out.push_back(r);
  }
  return out;
}

}  // namespace sandlet::policy
