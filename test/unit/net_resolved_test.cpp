// Unit tests for the resolved part of the allowlist (src/policy/net_resolved.cpp): merging with the
// rules' compile, bounds, expiry, what an update keeps, and the stored form.
#include <catch2/catch.hpp>

#include <cstring>

#include "policy/net_resolved.hpp"
#include "policy/net_rules.hpp"
#include "spec/network_spec.hpp"

using namespace sandlet;
using namespace sandlet::policy;

namespace {

NetResolved v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint16_t port, uint32_t expires, uint32_t tag = 7,
               uint8_t protos = kNetTcp) {
  NetResolved r;
  r.family = 4;
  r.addr = {a, b, c, d};
  r.protos = protos;
  r.port_lo = r.port_hi = port;
  r.expires = expires;
  r.rule_tag = tag;
  return r;
}

NetTrieKey key_v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, int prefix) {
  std::array<uint8_t, 16> addr{};
  addr[0] = a, addr[1] = b, addr[2] = c, addr[3] = d;
  return net_key_of(4, addr, prefix);
}

// The kernel program's decision, in user space: longest prefix, then any entry matching.
bool allows(const std::vector<NetTrieEntry>& trie, const NetTrieKey& addr, uint8_t proto, uint16_t port) {
  const NetTrieEntry* best = nullptr;
  for (const auto& e : trie) {
    bool in = true;
    for (uint32_t i = 0; in && i < e.key.prefixlen; ++i)
      in = ((e.key.addr[i / 8] ^ addr.addr[i / 8]) & (0x80 >> (i % 8))) == 0;
    if (in && (!best || e.key.prefixlen > best->key.prefixlen)) best = &e;
  }
  if (!best) return false;
  for (const auto& p : best->value.e)
    if ((p.protos & proto) && p.lo <= port && port <= p.hi) return true;
  return false;
}

size_t keys_equal_to(const std::vector<NetTrieEntry>& trie, const NetTrieKey& k) {
  size_t n = 0;
  for (const auto& e : trie) n += std::memcmp(&e.key, &k, sizeof k) == 0;
  return n;
}

}  // namespace

TEST_CASE("net resolved: a resolved address keeps the rules around it and adds its own ports", "[policy][network][dns]") {
  const auto rules = compile_net_rules(
      parse_network_text(R"({"allow": [{"cidr": "192.0.2.0/24", "ports": 53, "protocol": "udp"},
                                      {"cidr": "198.51.100.7", "ports": 22, "protocol": "tcp"}]})").allow);
  size_t dropped = 9;
  const auto live = merge_resolved_entries(rules, {v4(192, 0, 2, 10, 443, 100), v4(192, 0, 2, 10, 80, 100),
                                                   v4(198, 51, 100, 7, 443, 100), v4(203, 0, 113, 5, 443, 100)},
                                           {}, &dropped);
  CHECK(dropped == 0);
  const NetTrieKey a = key_v4(192, 0, 2, 10, 32), b = key_v4(198, 51, 100, 7, 32), c = key_v4(203, 0, 113, 5, 32);
  CHECK(allows(live, a, kNetTcp, 443));
  CHECK(allows(live, a, kNetTcp, 80));
  CHECK(allows(live, a, kNetUdp, 53));  // the /24 rule still applies to the resolved address
  CHECK_FALSE(allows(live, a, kNetTcp, 22));
  CHECK_FALSE(allows(live, key_v4(192, 0, 2, 11, 32), kNetTcp, 443));  // a neighbour: only the /24's rule
  CHECK(allows(live, key_v4(192, 0, 2, 11, 32), kNetUdp, 53));
  CHECK(allows(live, b, kNetTcp, 22));  // a static /32 and a resolved one for the same address merge
  CHECK(allows(live, b, kNetTcp, 443));
  CHECK(keys_equal_to(live, b) == 1);
  CHECK(allows(live, c, kNetTcp, 443));
  CHECK_FALSE(allows(live, c, kNetUdp, 443));
  CHECK(allows(live, key_v4(127, 0, 0, 1, 32), kNetTcp, 1));  // loopback as ever
  // The rules' own entries are untouched.
  CHECK(live.size() == rules.size() + 2);
}

TEST_CASE("net resolved: protected ranges and full address entries drop records, counted", "[policy][network][dns]") {
  NetProtectedRange host;
  host.addr = {10, 200, 0, 0};
  host.prefix = 16;
  std::vector<NetResolved> many;
  for (uint16_t p = 1; p <= 4; ++p) many.push_back(v4(192, 0, 2, 1, p, 100));
  const auto rules = compile_net_rules(parse_network_text(R"({"allow": ["tcp:192.0.2.0/24:1000",
      "tcp:192.0.2.0/24:1001", "tcp:192.0.2.0/24:1002", "tcp:192.0.2.0/24:1003", "tcp:192.0.2.0/24:1004"]})").allow);
  many.push_back(v4(10, 200, 0, 1, 443, 100));
  size_t dropped = 0;
  const auto live = merge_resolved_entries(rules, many, {host}, &dropped);
  CHECK(dropped == 2);  // the protected one, and one of four ports past the 8 entries
  CHECK_FALSE(allows(live, key_v4(10, 200, 0, 1, 32), kNetTcp, 443));
  CHECK(allows(live, key_v4(192, 0, 2, 1, 32), kNetTcp, 1000));
  CHECK(allows(live, key_v4(192, 0, 2, 1, 32), kNetTcp, 3));
}

TEST_CASE("net resolved: the set merges, expires, is bounded and keeps only tags asked for", "[policy][network][dns]") {
  const auto set = merge_resolved_set({v4(192, 0, 2, 1, 443, 100), v4(192, 0, 2, 2, 443, 50)},
                                      {v4(192, 0, 2, 1, 443, 300), v4(192, 0, 2, 3, 443, 10)}, 20);
  REQUIRE(set.size() == 2);  // .3 expired at 10 <= now
  CHECK(set[0].addr[3] == 1);
  CHECK(set[0].expires == 300);  // the later expiry of the same grant wins
  CHECK(set[1].addr[3] == 2);
  CHECK(merge_resolved_set(set, {}, 300).size() == 0);  // both expired by 300

  // Tags: an update keeps the records of the rules it still has.
  const std::vector<uint32_t> keep = {8};
  const auto kept = merge_resolved_set({v4(192, 0, 2, 1, 443, 100, 7), v4(192, 0, 2, 1, 80, 100, 8)}, {}, 1, &keep);
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].port_lo == 80);

  // Per address: the longest-lived four.
  std::vector<NetResolved> five;
  for (uint16_t p = 1; p <= 5; ++p) five.push_back(v4(192, 0, 2, 1, p, 100 + p));
  const auto four = merge_resolved_set({}, five, 1);
  REQUIRE(four.size() == kNetResolvedPerAddress);
  for (const auto& r : four) CHECK(r.port_lo != 1);

  // In all: kNetMaxResolved; the soonest to expire leave first.
  std::vector<NetResolved> lots;
  for (uint32_t i = 0; i < kNetMaxResolved + 10; ++i)
    lots.push_back(v4(10, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i), 443, 1000 + i));
  const auto bounded = merge_resolved_set({}, lots, 1);
  CHECK(bounded.size() == kNetMaxResolved);
  for (const auto& r : bounded) CHECK(r.expires >= 1010);
}

TEST_CASE("net resolved: expiry floor and cap, rule tags, the stored form", "[policy][network][dns]") {
  CHECK(net_resolved_expiry(1000, 0) == 1000 + kNetResolvedTtlFloor);
  CHECK(net_resolved_expiry(1000, 5000) == 6000);
  CHECK(net_resolved_expiry(1000, 4000000) == 1000 + kNetResolvedTtlCap);
  CHECK(net_clock_now() > 0);

  const auto rules = parse_network_text(R"({"allow": [{"host": "a.example", "ports": 443, "protocol": "tcp"},
      {"host": "a.example", "ports": 80, "protocol": "tcp"}, {"host": "A.example", "ports": 443, "protocol": "tcp"},
      {"host": "*.example", "ports": 443, "protocol": "tcp"}], "dns": ["10.0.0.53"]})").allow;
  CHECK(net_rule_tag(rules[0]) != net_rule_tag(rules[1]));
  CHECK(net_rule_tag(rules[0]) == net_rule_tag(rules[2]));  // the same rule (names are lower-cased)
  CHECK(net_rule_tag(rules[0]) != net_rule_tag(rules[3]));

  NetResolved six;
  six.family = 6;
  six.addr = {0x20, 0x01, 0x0d, 0xb8};
  six.addr[15] = 1;
  six.expires = 99;
  six.rule_tag = 3;
  const auto set = merge_resolved_set({}, {v4(192, 0, 2, 1, 443, 50), v4(192, 0, 2, 1, 80, 60), six}, 1);
  const auto stored = resolved_to_store(set);
  REQUIRE(stored.size() == 2);
  std::vector<NetResolved> back;
  for (const auto& [k, v] : stored)
    for (const auto& r : resolved_from_store(k, v)) back.push_back(r);
  CHECK(merge_resolved_set({}, back, 1) == set);
  // A key that is not a full address is not one of ours.
  CHECK(resolved_from_store(key_v4(10, 0, 0, 0, 8), stored[0].second).empty());
}
