// The sandbox's resolver policy: which DNS queries are answered, and which addresses an answer opens.
// A query for a name of the sandbox's host rules (exact, or under a "*.domain" rule), of type A, AAAA or
// CNAME, class IN, is forwarded to the policy's upstreams; its answer is reduced to the asked name's CNAME
// chain and addresses (dns_answer.hpp), sent back with the sandbox's id and question, and the addresses are
// returned with each matching rule's protocols and ports for the caller to add to the sandbox's allowlist.
// Every other query gets REFUSED (the policy refuses to say: it does not claim the name does not exist).
//
// Threading: handle() is const and blocks (up to the options' total timeout) on its own socket: call it
// from worker threads, any number at a time.
#pragma once
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/dns_answer.hpp"
#include "net/dns_message.hpp"
#include "net/dns_upstream.hpp"
#include "spec/network_spec.hpp"

namespace sandlet::net {

struct NameGateOptions {
  std::chrono::milliseconds attempt_timeout{1000};  // one upstream, one try
  int rounds = 2;                                   // passes over the upstream list
  std::chrono::milliseconds total_timeout{4000};    // the whole query, whatever is left of the rounds
};

// An address the sandbox may now reach, as the rule that allowed its name says.
struct NameGateAllow {
  int family = 4;
  std::array<uint8_t, 16> addr{};
  uint8_t protocols = kNetAllProtos;
  uint16_t port_lo = 0, port_hi = 65535;
  uint32_t ttl = 0;   // from the answer (lowest on the CNAME chain); the allowlist applies its floor and cap
  size_t rule = 0;    // index of the rule in the list the gate was made with
};

struct GateResult {
  std::vector<uint8_t> reply;        // to send back on the same transport; empty: send nothing
  std::vector<NameGateAllow> allow;  // addresses to add (empty unless the reply carries addresses)
  std::string outcome;               // one line for logs and the audit: what was decided and why
  std::string name;                  // the question, when the query was well formed ("" and 0 otherwise)
  uint16_t type = 0;
};

class NameGate final {
 public:
  // `rules`: the policy's allow rules (those by address are ignored); `upstreams`: tried in order.
  NameGate(std::vector<NetAllowRule> rules, std::vector<DnsUpstream> upstreams, NameGateOptions options = {});
  // The gate of a policy: its host rules and its `dns` resolvers on port 53.
  static NameGate for_policy(const NetworkPolicy& policy, NameGateOptions options = {});

  // One query as the sandbox sent it (for kTcp with its length prefix). Never throws.
  GateResult handle(std::span<const uint8_t> query, DnsTransport transport = DnsTransport::kUdp) const;
  // Indexes of the rules whose name matches `name` (DnsQuestion::name form).
  std::vector<size_t> rules_for(std::string_view name) const;

 private:
  GateResult decide(const DnsParse& parsed, DnsTransport transport) const;
  std::vector<NetAllowRule> rules_;
  std::vector<DnsUpstream> upstreams_;
  NameGateOptions options_;
};

// Whether host rule `pattern` ("mirror.internal" or "*.example.com") matches `name`. A wildcard matches
// names with one or more labels in front of its domain, never the domain itself.
bool dns_name_matches(std::string_view pattern, std::string_view name);

}  // namespace sandlet::net
