// Unit tests for the spec's `network` policy (src/spec/spec_network.cpp).
#include <catch2/catch.hpp>

#include <string>

#include "common/error.hpp"
#include "spec/network_spec.hpp"
#include "spec/spec.hpp"
#include "unit_helpers.hpp"

using namespace sandlet;
using unit::expect_error;

namespace {

std::string message_of(const char* json) {
  return expect_error([&] { parse_spec_json(json); }).what();
}

}  // namespace

TEST_CASE("network: none is the default and round-trips", "[spec][network]") {
  const Spec d;
  CHECK(d.network.none);
  CHECK_FALSE(d.network.egress());
  CHECK(parse_spec_json(R"({"network": "none"})").network == NetworkPolicy{});
  CHECK(network_to_json(NetworkPolicy{}) == "\"none\"");
  Spec s;
  spec_set_network(s, "none");
  CHECK(s.network.none);
  CHECK_THROWS_AS(spec_set_network(s, "host"), Error);
}

TEST_CASE("network: a policy object parses IPv4, IPv6, ports, protocols and round-trips", "[spec][network]") {
  const Spec s = parse_spec_json(R"({"network": {
      "allow": [{"cidr": "10.0.0.0/8", "ports": "443", "protocol": "tcp"},
                {"cidr": "fd00::/8", "ports": "8000-8100", "protocol": "udp"},
                {"cidr": "192.0.2.7"},
                {"cidr": "2001:db8::1", "protocol": "icmp"},
                {"host": "Pypi-Mirror.internal", "ports": 443}],
      "dns": ["10.0.0.53", "fd00::0:53"],
      "publish": [{"host_port": 8080, "port": 80}, {"port": 9000, "address": "::1"}],
      "egress_rate": "10M"}})");
  const NetworkPolicy& p = s.network;
  REQUIRE_FALSE(p.none);
  CHECK(p.egress());
  REQUIRE(p.allow.size() == 5);
  CHECK(p.allow[0].family == 4);
  CHECK(p.allow[0].prefix == 8);
  CHECK(p.allow[0].addr[0] == 10);
  CHECK(p.allow[0].protocols == kNetTcp);
  CHECK(p.allow[0].port_lo == 443);
  CHECK(p.allow[0].port_hi == 443);
  CHECK(p.allow[1].family == 6);
  CHECK(p.allow[1].addr[0] == 0xfd);
  CHECK(p.allow[1].port_lo == 8000);
  CHECK(p.allow[1].port_hi == 8100);
  CHECK(p.allow[2].prefix == 32);
  CHECK(p.allow[2].protocols == kNetAllProtos);
  CHECK(p.allow[3].prefix == 128);
  CHECK(p.allow[4].family == 0);
  CHECK(p.allow[4].host == "pypi-mirror.internal");
  CHECK(p.dns == std::vector<std::string>{"10.0.0.53", "fd00::53"});
  REQUIRE(p.publish.size() == 2);
  CHECK(p.publish[0].address == "127.0.0.1");
  CHECK(p.publish[0].host_port == 8080);
  CHECK(p.publish[1].host_port == 9000);
  CHECK(p.publish[1].address == "::1");
  CHECK(p.egress_rate == 10ull << 20);

  const Spec back = parse_spec_json(spec_to_json(s));
  CHECK(back.network == s.network);
  CHECK(parse_network_text(network_to_json(p)) == p);
  CHECK_NOTHROW(validate_network(p));
  // An empty object: a policy with no egress at all.
  const NetworkPolicy empty = parse_network_text("{}");
  CHECK_FALSE(empty.none);
  CHECK_FALSE(empty.egress());
}

TEST_CASE("network: errors name the field and the reason", "[spec][network]") {
  const struct {
    const char* json;
    const char* message;
  } cases[] = {
      {R"({"network": "host"})", "'network': expected \"none\" or a policy object"},
      {R"({"network": 3})", "'network': expected an object, got a number"},
      {R"({"network": {"alow": []}})", "'network.alow': unknown field"},
      {R"({"network": {"allow": {}}})", "'network.allow': expected an array"},
      {R"({"network": {"allow": [{"cidr": "10.0.0.0/8"}, {"cidr": "10.0.0.0/8"}, {"cidr": "10.1.0.0/8"}]}})",
       "'network.allow[2].cidr': \"10.1.0.0/8\" has host bits set (the network is 10.0.0.0/8)"},
      {R"({"network": {"allow": [{"cidr": "10.0.0.0/33"}]}})", "'network.allow[0].cidr': \"10.0.0.0/33\": the prefix length must be 0..32"},
      {R"({"network": {"allow": [{"cidr": "fd00::/129"}]}})", "the prefix length must be 0..128"},
      {R"({"network": {"allow": [{"cidr": "10.0.0.256"}]}})", "'network.allow[0].cidr': \"10.0.0.256\" is not an IPv4 or IPv6"},
      {R"({"network": {"allow": [{"cidr": "fd00::/8", "host": "a.b"}]}})", "'network.allow[0]': needs exactly one of"},
      {R"({"network": {"allow": [{}]}})", "'network.allow[0]': needs exactly one of"},
      {R"({"network": {"allow": [{"cidr": "fd00::/8", "ports": "0"}]}})", "'network.allow[0].ports': \"0\" is not a port number"},
      {R"({"network": {"allow": [{"cidr": "fd00::/8", "ports": "90-80"}]}})", "first port is above its last"},
      {R"({"network": {"allow": [{"cidr": "fd00::/8", "ports": 70000}]}})", "'network.allow[0].ports': expected a port number"},
      {R"({"network": {"allow": [{"cidr": "fd00::/8", "protocol": "sctp"}]}})", "'network.allow[0].protocol': \"sctp\" is not a protocol"},
      {R"({"network": {"allow": [{"cidr": "fd00::/8", "protocol": "icmp", "ports": "1"}]}})", "'network.allow[0].ports': ICMP has no ports"},
      {R"({"network": {"allow": [{"host": "-bad.example"}], "dns": ["10.0.0.53"]}})", "'network.allow[0].host': \"-bad.example\" is not a DNS name"},
      {R"({"network": {"allow": [{"host": "mirror.internal"}]}})", "'network.allow[0].host': a rule by name needs resolvers"},
      {R"({"network": {"dns": ["resolver"]}})", "'network.dns[0]': \"resolver\" is not an IP address"},
      {R"({"network": {"publish": [{"host_port": 80}]}})", "'network.publish[0].port': required"},
      {R"({"network": {"publish": [{"port": 80}, {"port": 80}]}})", "'network.publish[1].host_port': published twice"},
      {R"({"network": {"publish": [{"port": 80, "protocol": "udp"}]}})", "'network.publish[0].protocol': only \"tcp\""},
      {R"({"network": {"egress_rate": "1k"}})", "'network.egress_rate': must be 0 (unlimited) or 8 KiB/s"},
      {R"({"network": {"egress_rate": true}})", "'network.egress_rate': expected bytes per second"},
      {R"({"network": {"allow": [], "allow": []}})", "'network.allow': duplicate key"},
  };
  for (const auto& c : cases) {
    INFO(c.json);
    CHECK_THAT(message_of(c.json), Catch::Contains(c.message));
  }
}

TEST_CASE("network: the CLI's short rule form", "[spec][network]") {
  NetAllowRule r = parse_net_rule_text("tcp:10.0.0.0/8:443", "--allow");
  CHECK(r.family == 4);
  CHECK(r.protocols == kNetTcp);
  CHECK(r.port_lo == 443);
  r = parse_net_rule_text("udp:[fd00::/8]:53-54", "--allow");
  CHECK(r.family == 6);
  CHECK(r.protocols == kNetUdp);
  CHECK(r.port_hi == 54);
  r = parse_net_rule_text("fd00::1", "--allow");
  CHECK(r.prefix == 128);
  CHECK(r.protocols == kNetAllProtos);
  r = parse_net_rule_text("mirror.internal:443", "--allow");
  CHECK(r.host == "mirror.internal");
  CHECK(r.port_lo == 443);
  CHECK_THROWS_AS(parse_net_rule_text("tcp:10.0.0.1/8", "--allow"), Error);
  CHECK_THROWS_AS(parse_net_rule_text("icmp:10.0.0.0/8:1", "--allow"), Error);
  CHECK_THROWS_AS(parse_net_rule_text("[fd00::/8:1", "--allow"), Error);
}

TEST_CASE("network: a policy filled in directly is validated", "[spec][network]") {
  NetworkPolicy p;
  p.none = false;
  NetAllowRule r;
  r.family = 4;
  r.prefix = 40;
  p.allow.push_back(r);
  CHECK_THAT(expect_error([&] { validate_network(p); }).what(), Catch::Contains("network.allow[0].cidr"));
  p.allow[0].prefix = 8;
  p.allow[0].addr[5] = 1;  // beyond IPv4's 4 bytes
  CHECK_THROWS_AS(validate_network(p), Error);
}

TEST_CASE("network: a rule by name may be a wildcard over one domain", "[spec][network][dns]") {
  const NetworkPolicy p = parse_network_text(R"({"allow": [{"host": "*.Example.com", "ports": 443}], "dns": ["10.0.0.53"]})");
  CHECK(p.allow[0].host == "*.example.com");
  CHECK(parse_network_text(network_to_json(p)) == p);
  CHECK(parse_net_rule_text("tcp:*.pypi.internal:443", "--allow").host == "*.pypi.internal");
  CHECK(parse_net_rule_text("*.internal", "--allow").host == "*.internal");
  // "*" alone is every name (a public network whose names resolve).
  CHECK(parse_network_text(R"({"allow": [{"host": "*"}], "dns": ["10.0.0.53"]})").allow[0].host == "*");
  for (const char* bad : {"*.", "*example.com", "a.*.example.com", "**.example.com", "*.-x.com", "x.*"}) {
    INFO(bad);
    try {
      parse_network_text(std::string(R"({"allow": [{"host": ")") + bad + R"("}], "dns": ["10.0.0.53"]})");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("'network.allow[0].host'") && Catch::Contains("is not a DNS name"));
    }
  }
}
