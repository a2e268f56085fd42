// Addresses resolved for rules by name: the dynamic part of a sandbox's allowlist. Each is one /32 or /128
// with the ports and protocols of the rule whose name resolved to it, and an expiry. The kernel's trie is
// always rebuilt from two sets — the static compile of the rules (net_rules.hpp) and this one — so adding,
// expiring or updating never loses the other part. Pure functions here; net_filter.hpp keeps both sets
// in the sandbox's own maps, where any process (the resolver after a restart, the CLI's update) finds them.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "policy/net_rules.hpp"
#include "spec/network_spec.hpp"

namespace sandlet::policy {

struct NetResolved {
  int family = 4;                  // 4 or 6
  std::array<uint8_t, 16> addr{};  // network order, IPv4 in the first 4 bytes
  uint8_t protos = kNetAllProtos;
  uint16_t port_lo = 0, port_hi = 65535;
  uint32_t expires = 0;            // CLOCK_BOOTTIME seconds (one clock for every process on the node)
  uint32_t rule_tag = 0;           // net_rule_tag of the rule that allowed the name
  bool operator==(const NetResolved&) const = default;
};

// Stored per address in the sandbox's resolved-set map (the same LPM trie type as the rules, so the one
// array-of-maps holds it): up to kNetResolvedPerAddress records.
constexpr int kNetResolvedPerAddress = 4;
#pragma pack(push, 1)
struct NetResolvedRecord {
  uint16_t lo = 0, hi = 0;
  uint8_t protos = 0;  // 0: unused slot
  uint8_t pad[3] = {};
  uint32_t expires = 0;
  uint32_t rule_tag = 0;
};
#pragma pack(pop)
struct NetResolvedValue {
  NetResolvedRecord r[kNetResolvedPerAddress];
};
static_assert(sizeof(NetResolvedValue) == sizeof(NetTrieValue), "stored in a map of the trie's type");

// A rule's identity across updates: its name, protocols and ports (a hash; 0 is never returned).
uint32_t net_rule_tag(const NetAllowRule& rule);

// Now, on CLOCK_BOOTTIME, in seconds.
uint32_t net_clock_now();

// The expiry of an address answered with `ttl`: now + ttl held between kNetResolvedTtlFloor and the cap.
uint32_t net_resolved_expiry(uint32_t now, uint32_t ttl);

// `current` with `add` merged in (the same address, protocols, ports and rule: the later expiry wins), and
// without what expired by `now` or whose rule_tag is not in `keep_tags` (when given). Bounded: at most
// kNetResolvedPerAddress per address (more: the one expiring first goes) and kNetMaxResolved in all
// (likewise). Sorted by address, so equal sets compare equal.
std::vector<NetResolved> merge_resolved_set(const std::vector<NetResolved>& current, const std::vector<NetResolved>& add,
                                            uint32_t now, const std::vector<uint32_t>* keep_tags = nullptr);

// The trie's entries: `static_entries` (compile_net_rules) plus each resolved address as a full-length
// prefix carrying the entries of the longest static prefix that holds it and its own. A resolved address
// inside a protected range, or whose entries would overflow kNetEntriesPerPrefix, is left out (counted
// in *dropped when given).
std::vector<NetTrieEntry> merge_resolved_entries(const std::vector<NetTrieEntry>& static_entries,
                                                 const std::vector<NetResolved>& resolved,
                                                 const std::vector<NetProtectedRange>& protect = {},
                                                 size_t* dropped = nullptr);

// The stored form, per address (sorted input: merge_resolved_set's output).
std::vector<std::pair<NetTrieKey, NetResolvedValue>> resolved_to_store(const std::vector<NetResolved>& set);
std::vector<NetResolved> resolved_from_store(const NetTrieKey& key, const NetResolvedValue& value);

}  // namespace sandlet::policy
