// A sandbox's network allowlist compiled into the entries of an LPM trie keyed by destination address
// (IPv4 as IPv4-mapped IPv6, so one trie serves both families). The kernel programs
// (net_program.hpp) take the longest matching prefix and allow when one of its port entries matches the
// protocol and destination port: so every prefix's value already holds the entries of every rule whose
// prefix contains it.
//
// Families stay apart: the ranges that carry IPv4 inside IPv6 (the IPv4-mapped ::ffff:0:0/96 where IPv4
// keys live, NAT64's 64:ff9b::/96 and 64:ff9b:1::/48, 6to4's 2002::/16, Teredo's 2001::/32) take only the
// rules that lie inside them. So `::/0` opens no IPv4 destination; an IPv4 rule, or an IPv6 rule written
// inside one of those ranges (`::ffff:10.0.0.0/104` is 10.0.0.0/8), does.
//
// Protected ranges (the host's addresses and local routes, link-local, cloud metadata: net_protect.hpp)
// are not compiled in: they change while sandboxes live, so they sit in a map of their own that the
// programs read beside the rules, each range with the reach it asks for (kNetProtectReach). Each entry of
// the rules carries the prefix length of the rule that grants it (`reach`); a destination inside a
// protected range is allowed only by entries whose reach is at least that: a rule naming the address
// exactly (/32, /128).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "spec/network_spec.hpp"

namespace sandlet::policy {

#pragma pack(push, 1)
struct NetTrieKey {
  uint32_t prefixlen = 0;  // of the 128-bit address
  uint8_t addr[16] = {};
};
#pragma pack(pop)
static_assert(sizeof(NetTrieKey) == 20);

struct NetPortEntry {
  uint16_t lo = 0, hi = 0;  // destination ports, host order; ICMP entries span 0..65535
  uint8_t protos = 0;       // NetProto bits; 0 = unused slot
  uint8_t reach = 0;        // prefix length (of the 128-bit key) of the granting rule; 0 for resolved names
  uint8_t pad[2] = {};
};
static_assert(sizeof(NetPortEntry) == 8);
// The reach a protected range asks of a rule: its address exactly.
inline constexpr uint32_t kNetProtectReach = 128;
constexpr int kNetEntriesPerPrefix = 8;
struct NetTrieValue {
  NetPortEntry e[kNetEntriesPerPrefix];
};
static_assert(sizeof(NetTrieValue) == 64);

struct NetTrieEntry {
  NetTrieKey key;
  NetTrieValue value;
};

// An address range the sandbox reaches only through a rule whose own range lies inside it (the host's
// addresses, link-local, cloud metadata): a wider rule such as 0.0.0.0/0 does not open it.
struct NetProtectedRange {
  int family = 4;
  std::array<uint8_t, 16> addr{};
  int prefix = 32;
  bool operator==(const NetProtectedRange&) const = default;
  auto operator<=>(const NetProtectedRange&) const = default;
};

// Always allowed: the sandbox's own loopback (127.0.0.0/8, ::1) in its own network namespace.
// Rules by name (family 0) are skipped: their addresses come from the sandbox's resolver.
// Throws Error(kInvalidArgument) naming `field`[i] when more than kNetEntriesPerPrefix port ranges
// would apply to one address range.
// `inline_protect`: protected ranges compiled in as the family guards are, for a filter made by an older
// version (its programs have no protected-range map); empty otherwise.
std::vector<NetTrieEntry> compile_net_rules(const std::vector<NetAllowRule>& allow,
                                            const std::string& field = "network.allow",
                                            const std::vector<NetProtectedRange>& inline_protect = {});

// Whether `outer` contains `inner` (both keys of the 128-bit space).
bool net_key_contains(const NetTrieKey& outer, const NetTrieKey& inner);

// The key of one address (for tests and the resolver): IPv4 mapped, prefix 128.
NetTrieKey net_key_of(int family, const std::array<uint8_t, 16>& addr, int prefix);

}  // namespace sandlet::policy
