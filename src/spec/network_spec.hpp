// The spec's `network`: "none" (loopback only, the default) or a policy object (docs/NETWORK.md).
// Parsed and validated here; the backend turns it into kernel state (src/policy/net_rules.hpp).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/fwd.hpp>

namespace sandlet {

// Addresses resolved for rules by name live in the sandbox's allowlist for the answer's TTL, but at least
// the floor (a connection outlives a short TTL: every packet is checked) and at most the cap; the resolver
// never tells the sandbox a TTL above the cap. At most kNetMaxResolved of them per sandbox.
constexpr uint32_t kNetResolvedTtlFloor = 600;
constexpr uint32_t kNetResolvedTtlCap = 86400;
constexpr size_t kNetMaxResolved = 4096;

// Protocols a rule allows (bits).
enum NetProto : uint8_t { kNetTcp = 1, kNetUdp = 2, kNetIcmp = 4, kNetAllProtos = 7 };

struct NetAllowRule {
  // By address: family 4 or 6, `addr` in network order (IPv4 in the first 4 bytes), host bits zero.
  // By name: family 0 and `host` a DNS name (resolved through the sandbox's resolver), lower case; a
  // leading "*." ("*.example.com") matches every name under the domain but not the domain itself.
  int family = 0;
  std::array<uint8_t, 16> addr{};
  int prefix = 0;
  std::string host;
  uint8_t protocols = kNetAllProtos;  // ports restrict TCP and UDP; ICMP has none
  uint16_t port_lo = 0;               // 0..65535 = every port
  uint16_t port_hi = 65535;
  bool operator==(const NetAllowRule&) const = default;
};

struct NetPublish {
  uint16_t host_port = 0;          // on `address` of the host
  uint16_t port = 0;               // inside the sandbox
  std::string address = "127.0.0.1";  // an IP literal; non-loopback only when written explicitly
  bool operator==(const NetPublish&) const = default;
};

struct NetworkPolicy {
  bool none = true;                  // "none": loopback only, nothing below applies
  std::vector<NetAllowRule> allow;   // <= 256; an empty list with a policy object = no egress
  std::vector<std::string> dns;      // upstream resolvers (IP literals) for rules by name; <= 4
  std::vector<NetPublish> publish;   // <= 64; each (address, host_port) once
  uint64_t egress_rate = 0;          // bytes per second; 0 = unlimited
  bool operator==(const NetworkPolicy&) const = default;
  // Whether the sandbox needs an interface beyond loopback.
  bool egress() const { return !none && (!allow.empty() || !publish.empty()); }
};

// `v` is the value of the spec's "network" (or of a net update document): "none" or an object.
// Errors name the field under `field` ("network.allow[2].cidr").
NetworkPolicy parse_network_value(const boost::json::value& v, const std::string& field = "network");
// A JSON document (the C ABI's and CLI's form): "none" (quoted or bare) or an object.
NetworkPolicy parse_network_text(std::string_view text, const std::string& field = "network");
// Canonical JSON: "\"none\"" or an object; parse_network_text gives back the same policy.
std::string network_to_json(const NetworkPolicy& p);
// Checks a policy filled in directly (every field as the parser checks it).
void validate_network(const NetworkPolicy& p, const std::string& field = "network");
// One rule in the CLI's short form (also accepted as a string in "allow"): "[PROTO:]ADDR[/N][:PORTS]" or "[PROTO:]NAME[:PORTS]", IPv6 in
// brackets when ports follow ("tcp:[fd00::/8]:443"); PROTO tcp, udp, icmp or any.
NetAllowRule parse_net_rule_text(std::string_view text, const std::string& field);
// "10.0.0.0/8", "fd00::/8", or the name.
std::string net_rule_target(const NetAllowRule& r);

}  // namespace sandlet
