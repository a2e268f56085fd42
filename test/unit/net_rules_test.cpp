// Unit tests for compiling an allowlist into LPM trie entries (src/policy/net_rules.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "common/error.hpp"
#include "policy/net_rules.hpp"
#include "spec/network_spec.hpp"

using namespace sandlet;
using namespace sandlet::policy;

namespace {

std::vector<NetAllowRule> rules_of(const char* json) { return parse_network_text(json).allow; }

NetTrieKey key_v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, int prefix) {
  std::array<uint8_t, 16> addr{};
  addr[0] = a, addr[1] = b, addr[2] = c, addr[3] = d;
  return net_key_of(4, addr, prefix);
}

NetTrieKey key_v6(std::initializer_list<uint8_t> head, int prefix) {
  std::array<uint8_t, 16> addr{};
  size_t i = 0;
  for (uint8_t b : head) addr[i++] = b;
  return net_key_of(6, addr, prefix);
}

// The user-space mirror of what the kernel program does: whether a protected range holds the address
// (then an entry needs reach kNetProtectReach), the longest prefix of the rules, then any entry matching.
bool allows(const std::vector<NetTrieEntry>& trie, const NetTrieKey& addr, uint8_t proto, uint16_t port,
            const std::vector<NetProtectedRange>& protect = {}) {
  uint32_t inside = 0;
  for (const auto& p : protect) {
    const NetTrieKey k = net_key_of(p.family, p.addr, p.prefix);
    if (net_key_contains(k, addr)) inside = kNetProtectReach;
  }
  const NetTrieEntry* best = nullptr;
  for (const auto& e : trie)
    if (net_key_contains(e.key, addr) && (!best || e.key.prefixlen > best->key.prefixlen)) best = &e;
  if (!best) return false;
  for (const auto& p : best->value.e)
    if ((p.protos & proto) && p.reach >= inside && p.lo <= port && port <= p.hi) return true;
  return false;
}

}  // namespace

TEST_CASE("net rules: longest prefix carries the rules of the ranges around it", "[policy][network]") {
  const auto trie = compile_net_rules(rules_of(R"({"allow": [
      {"cidr": "10.0.0.0/8", "ports": "443", "protocol": "tcp"},
      {"cidr": "10.1.0.0/16", "ports": "80", "protocol": "tcp"},
      {"cidr": "fd00::/8", "protocol": "udp", "ports": "53"},
      {"cidr": "192.0.2.0/24", "protocol": "icmp"}]})"));
  const auto in10_1 = key_v4(10, 1, 2, 3, 32);
  CHECK(allows(trie, in10_1, kNetTcp, 443));  // the /8 rule still applies inside the /16
  CHECK(allows(trie, in10_1, kNetTcp, 80));
  CHECK_FALSE(allows(trie, in10_1, kNetUdp, 80));
  CHECK_FALSE(allows(trie, key_v4(10, 2, 0, 1, 32), kNetTcp, 80));
  CHECK(allows(trie, key_v4(10, 2, 0, 1, 32), kNetTcp, 443));
  CHECK_FALSE(allows(trie, key_v4(11, 0, 0, 1, 32), kNetTcp, 443));
  CHECK(allows(trie, key_v4(192, 0, 2, 9, 32), kNetIcmp, 0));
  CHECK_FALSE(allows(trie, key_v4(192, 0, 2, 9, 32), kNetTcp, 1));
  std::array<uint8_t, 16> v6{};
  v6[0] = 0xfd, v6[15] = 7;
  CHECK(allows(trie, net_key_of(6, v6, 128), kNetUdp, 53));
  CHECK_FALSE(allows(trie, net_key_of(6, v6, 128), kNetTcp, 53));
  // Loopback of the sandbox's own namespace: always, every protocol.
  CHECK(allows(trie, key_v4(127, 0, 0, 1, 32), kNetUdp, 9));
  std::array<uint8_t, 16> lo6{};
  lo6[15] = 1;
  CHECK(allows(trie, net_key_of(6, lo6, 128), kNetTcp, 1));
  // An IPv4 rule does not open the same bits as IPv6 (mapped keys differ).
  std::array<uint8_t, 16> v6_10{};
  v6_10[0] = 10;
  CHECK_FALSE(allows(trie, net_key_of(6, v6_10, 128), kNetTcp, 443));
}

TEST_CASE("net rules: a protected range needs a rule of its own", "[policy][network]") {
  NetProtectedRange host;
  host.family = 4;
  host.addr = {10, 200, 0, 1};
  host.prefix = 32;
  NetProtectedRange link_local;
  link_local.family = 4;
  link_local.addr = {169, 254};
  link_local.prefix = 16;
  const std::vector<NetProtectedRange> protect{host, link_local};
  auto trie = compile_net_rules(rules_of(R"({"allow": [{"cidr": "0.0.0.0/0"}]})"));
  CHECK(allows(trie, key_v4(8, 8, 8, 8, 32), kNetTcp, 443, protect));
  CHECK_FALSE(allows(trie, key_v4(10, 200, 0, 1, 32), kNetTcp, 443, protect));
  CHECK(allows(trie, key_v4(10, 200, 0, 1, 32), kNetTcp, 443));  // unprotected, the same rule opens it
  CHECK_FALSE(allows(trie, key_v4(169, 254, 169, 254, 32), kNetTcp, 80, protect));
  trie = compile_net_rules(rules_of(R"({"allow": [{"cidr": "0.0.0.0/0"}, {"cidr": "10.200.0.1", "ports": "8080"},
                                                  {"cidr": "10.0.0.0/8", "ports": "22"}, {"cidr": "169.254.0.0/16", "ports": "80"}]})"));
  CHECK(allows(trie, key_v4(10, 200, 0, 1, 32), kNetTcp, 8080, protect));
  CHECK_FALSE(allows(trie, key_v4(10, 200, 0, 1, 32), kNetTcp, 22, protect));  // a /8 is wider than the host
  CHECK(allows(trie, key_v4(10, 1, 0, 1, 32), kNetTcp, 22, protect));
  CHECK_FALSE(allows(trie, key_v4(169, 254, 1, 1, 32), kNetTcp, 80, protect));  // not even the range itself
  trie = compile_net_rules(rules_of(R"({"allow": ["tcp:169.254.1.1:80"]})"));
  CHECK(allows(trie, key_v4(169, 254, 1, 1, 32), kNetTcp, 80, protect));  // the address named exactly
  CHECK_FALSE(allows(trie, key_v4(169, 254, 1, 1, 32), kNetTcp, 443, protect));
}

TEST_CASE("net rules: protection compiled in (a filter of an older version) opens to exact rules only", "[policy][network]") {
  NetProtectedRange host;
  host.family = 4;
  host.addr = {10, 200, 0, 0};
  host.prefix = 16;  // a local route of the uplink
  const auto trie = compile_net_rules(
      rules_of(R"({"allow": ["tcp:0.0.0.0/0:443", "tcp:10.0.0.0/8:22", "tcp:10.200.0.0/16:80", "tcp:10.200.1.1:8080"]})"),
      "network.allow", {host});
  CHECK(allows(trie, key_v4(8, 8, 8, 8, 32), kNetTcp, 443));
  CHECK_FALSE(allows(trie, key_v4(10, 200, 1, 1, 32), kNetTcp, 443));
  CHECK_FALSE(allows(trie, key_v4(10, 200, 1, 1, 32), kNetTcp, 22));
  CHECK_FALSE(allows(trie, key_v4(10, 200, 1, 1, 32), kNetTcp, 80));  // as wide as the range: not exact
  CHECK(allows(trie, key_v4(10, 200, 1, 1, 32), kNetTcp, 8080));
  CHECK(allows(trie, key_v4(10, 1, 0, 1, 32), kNetTcp, 22));
}

TEST_CASE("net rules: an IPv6 rule never opens IPv4, nor IPv4 carried in IPv6", "[policy][network]") {
  const auto trie = compile_net_rules(rules_of(R"({"allow": ["tcp:[::/0]:443", "udp:[2001:db8::/32]:53"]})"));
  CHECK_FALSE(allows(trie, key_v4(198, 51, 100, 1, 32), kNetTcp, 443));      // an IPv4 socket
  CHECK_FALSE(allows(trie, key_v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 1}, 128), kNetTcp, 443));
  CHECK_FALSE(allows(trie, key_v4(0, 0, 0, 0, 32), kNetTcp, 443));
  CHECK(allows(trie, key_v6({0x20, 0x01, 0x0d, 0xb8, 0, 1}, 128), kNetTcp, 443));
  CHECK(allows(trie, key_v6({0xfd, 0x00, 0x18}, 128), kNetTcp, 443));
  // NAT64, 6to4 and Teredo carry IPv4: ::/0 does not reach them either.
  CHECK_FALSE(allows(trie, key_v6({0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 198, 51, 100, 1}, 128), kNetTcp, 443));
  CHECK_FALSE(allows(trie, key_v6({0x00, 0x64, 0xff, 0x9b, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 198, 51, 100, 1}, 128), kNetTcp, 443));
  CHECK_FALSE(allows(trie, key_v6({0x20, 0x02, 198, 51, 100, 1}, 128), kNetTcp, 443));
  CHECK_FALSE(allows(trie, key_v6({0x20, 0x01, 0x00, 0x00, 1}, 128), kNetTcp, 443));
  // Loopback stays the sandbox's own.
  CHECK(allows(trie, key_v4(127, 0, 0, 1, 32), kNetTcp, 9));

  // IPv4 rules do not open IPv6 either; an IPv6 rule written inside ::ffff:0:0/96 is an IPv4 rule.
  const auto v4 = compile_net_rules(rules_of(R"({"allow": ["tcp:0.0.0.0/0:443", "tcp:[::ffff:10.0.0.0/104]:80",
                                                          "tcp:[64:ff9b::/96]:25"]})"));
  CHECK(allows(v4, key_v4(198, 51, 100, 1, 32), kNetTcp, 443));
  CHECK_FALSE(allows(v4, key_v6({0x20, 0x01, 0x0d, 0xb8, 0, 1}, 128), kNetTcp, 443));
  CHECK(allows(v4, key_v4(10, 9, 8, 7, 32), kNetTcp, 80));
  CHECK_FALSE(allows(v4, key_v4(11, 9, 8, 7, 32), kNetTcp, 80));
  CHECK(allows(v4, key_v6({0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 198, 51, 100, 1}, 128), kNetTcp, 25));
  CHECK_FALSE(allows(v4, key_v6({0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 198, 51, 100, 1}, 128), kNetTcp, 443));
}

TEST_CASE("net rules: each entry carries the prefix length of the narrowest rule granting it", "[policy][network]") {
  const auto trie = compile_net_rules(rules_of(R"({"allow": ["tcp:0.0.0.0/0:443", "tcp:10.0.0.0/8:443", "udp:10.1.2.3:53"]})"));
  const NetTrieKey own = key_v4(10, 1, 2, 3, 32);
  for (const auto& e : trie) {
    if (std::memcmp(&e.key, &own, sizeof own) != 0) continue;
    bool tcp = false, udp = false;
    for (const auto& p : e.value.e) {
      if (p.protos == kNetTcp) {
        tcp = true;
        CHECK(p.reach == 96 + 8);  // the /8 and /0 entries merge, the /8 wins
      }
      if (p.protos == kNetUdp) {
        udp = true;
        CHECK(p.reach == 128);
      }
    }
    CHECK((tcp && udp));
  }
}

TEST_CASE("net rules: ports restrict TCP and UDP, not ICMP; too many ranges are refused", "[policy][network]") {
  const auto trie = compile_net_rules(rules_of(R"({"allow": [{"cidr": "10.0.0.0/8", "ports": "443"}]})"));
  CHECK(allows(trie, key_v4(10, 0, 0, 1, 32), kNetUdp, 443));
  CHECK_FALSE(allows(trie, key_v4(10, 0, 0, 1, 32), kNetIcmp, 0));
  std::string many = R"({"allow": [)";
  for (int i = 1; i <= 9; ++i) many += std::string(i > 1 ? "," : "") + R"({"cidr": "10.0.0.0/8", "ports": ")" + std::to_string(i) + "\"}";
  many += "]}";
  CHECK_THROWS_WITH(compile_net_rules(rules_of(many.c_str())), Catch::Contains("network.allow["));
}
