// Unit tests for compiling an allowlist into LPM trie entries (src/policy/net_rules.cpp).
#include <catch2/catch.hpp>

#include <cstring>

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

// The user-space mirror of what the kernel program does: longest prefix, then any entry matching.
bool allows(const std::vector<NetTrieEntry>& trie, const NetTrieKey& addr, uint8_t proto, uint16_t port) {
  const NetTrieEntry* best = nullptr;
  for (const auto& e : trie) {
    bool in = e.key.prefixlen <= 128;
    for (uint32_t i = 0; in && i < e.key.prefixlen; ++i)
      in = ((e.key.addr[i / 8] ^ addr.addr[i / 8]) & (0x80 >> (i % 8))) == 0;
    if (in && (!best || e.key.prefixlen > best->key.prefixlen)) best = &e;
  }
  if (!best) return false;
  for (const auto& p : best->value.e)
    if ((p.protos & proto) && p.lo <= port && port <= p.hi) return true;
  return false;
}

}  // namespace

TEST_CASE("net rules: longest prefix carries the rules of the ranges around it", "[policy][network]") {
  const auto trie = compile_net_rules(rules_of(R"({"allow": [
      {"cidr": "10.0.0.0/8", "ports": "443", "protocol": "tcp"},
      {"cidr": "10.1.0.0/16", "ports": "80", "protocol": "tcp"},
      {"cidr": "fd00::/8", "protocol": "udp", "ports": "53"},
      {"cidr": "192.0.2.0/24", "protocol": "icmp"}]})"),
                                      {});
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
  auto trie = compile_net_rules(rules_of(R"({"allow": [{"cidr": "0.0.0.0/0"}]})"), {host});
  CHECK(allows(trie, key_v4(8, 8, 8, 8, 32), kNetTcp, 443));
  CHECK_FALSE(allows(trie, key_v4(10, 200, 0, 1, 32), kNetTcp, 443));
  trie = compile_net_rules(rules_of(R"({"allow": [{"cidr": "0.0.0.0/0"}, {"cidr": "10.200.0.1", "ports": "8080"}]})"),
                           {host});
  CHECK(allows(trie, key_v4(10, 200, 0, 1, 32), kNetTcp, 8080));
  CHECK_FALSE(allows(trie, key_v4(10, 200, 0, 1, 32), kNetTcp, 22));
}

TEST_CASE("net rules: ports restrict TCP and UDP, not ICMP; too many ranges are refused", "[policy][network]") {
  const auto trie = compile_net_rules(rules_of(R"({"allow": [{"cidr": "10.0.0.0/8", "ports": "443"}]})"), {});
  CHECK(allows(trie, key_v4(10, 0, 0, 1, 32), kNetUdp, 443));
  CHECK_FALSE(allows(trie, key_v4(10, 0, 0, 1, 32), kNetIcmp, 0));
  std::string many = R"({"allow": [)";
  for (int i = 1; i <= 9; ++i) many += std::string(i > 1 ? "," : "") + R"({"cidr": "10.0.0.0/8", "ports": ")" + std::to_string(i) + "\"}";
  many += "]}";
  CHECK_THROWS_WITH(compile_net_rules(rules_of(many.c_str()), {}), Catch::Contains("network.allow["));
}
