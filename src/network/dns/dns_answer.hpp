// What an upstream's answer may add to a sandbox's allowlist: only the addresses of the asked name, or of
// the names its CNAME chain leads to, of the asked type. Anything else an upstream puts in (an unrelated A
// record, a CNAME off the chain, an address of another type) is ignored, so a lying or compromised upstream
// cannot open arbitrary addresses through a name the rules allow.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "network/dns/dns_message.hpp"

namespace sandlet::net {

constexpr size_t kDnsMaxChain = 8;       // CNAME hops followed
constexpr size_t kDnsMaxAddresses = 32;  // addresses taken from one answer

struct DnsAddress {
  int family = 4;                  // 4 or 6
  std::array<uint8_t, 16> addr{};  // network order, IPv4 in the first 4 bytes
  uint32_t ttl = 0;                // the lowest TTL on the way: the CNAMEs that led here and the record
};

struct DnsChainAnswer {
  std::vector<DnsRecord> records;       // the CNAMEs of the chain in order, then the address records kept
  std::vector<DnsAddress> addresses;    // distinct; no unspecified, loopback, multicast or broadcast address
};

// Follows `answers` from `qname` (a host name) for a question of type `qtype` (A, AAAA or CNAME).
DnsChainAnswer follow_answer(std::string_view qname, uint16_t qtype, const std::vector<DnsRecord>& answers);

}  // namespace sandlet::net
