// libFuzzer target: DNS messages as a sandbox (queries) or an upstream (answers) may send them, through
// the parser, the chain follower and the reply builder the name gate uses. Input: one byte choosing UDP
// or TCP framing, then the message. A parse error is the expected outcome; a crash, undefined behaviour,
// a reply the parser itself rejects, an address off the asked name's chain, or an upstream query carrying
// anything of the message but its question's name in lower case, type and class is a finding.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <span>
#include <vector>

#include "network/dns/dns_answer.hpp"
#include "network/dns/dns_message.hpp"

using namespace sandlet::net;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const DnsTransport t = data[0] & 1 ? DnsTransport::kTcp : DnsTransport::kUdp;
  const DnsParse p = parse_dns(std::span<const uint8_t>(data + 1, size - 1), t);
  if (!p.ok()) return 0;
  const DnsMessage& m = p.message;
  for (const DnsRecord& r : m.answers) {
    if (r.type == kDnsCname && r.target.size() > 4 * 255) std::abort();  // names are bounded
  }
  if (m.questions.empty() || !dns_is_host_name(m.questions[0].name)) return 0;
  const DnsQuestion& q = m.questions[0];
  const DnsChainAnswer chain = follow_answer(q.name, q.type, m.answers);
  if (chain.addresses.size() > kDnsMaxAddresses) std::abort();
  // The reply built from what was kept must be a well-formed message to the same question.
  const std::vector<uint8_t> reply = build_dns_reply(m, kDnsNoError, chain.records, t);
  const DnsParse back = parse_dns(reply, t);
  if (!back.ok() || back.message.questions.size() != 1 || back.message.questions[0].name != q.name) std::abort();
  if (back.message.header.id != m.header.id) std::abort();
  // What would go upstream: our id and flags, the question in lower case, our OPT; nothing else.
  const std::vector<uint8_t> up = build_dns_query(0x5a5a, q, 1232);
  const std::vector<uint8_t> name = dns_canonical_wire(q.wire);
  if (up.size() != kDnsHeaderSize + name.size() + 4 + 11) std::abort();
  if (!std::equal(name.begin(), name.end(), up.begin() + kDnsHeaderSize)) std::abort();
  // No capital letter left (length octets are < 64, so a byte in 'A'..'Z' can only be a letter).
  if (std::any_of(name.begin(), name.end(), [](uint8_t c) { return c >= 'A' && c <= 'Z'; })) std::abort();
  const DnsParse asked = parse_dns(up);
  if (!asked.ok() || asked.message.header.flags != 0x0100 || asked.message.header.arcount != 1 ||
      asked.message.header.ancount != 0 || asked.message.header.nscount != 0 || !asked.message.answers.empty() ||
      asked.message.questions.size() != 1 || asked.message.questions[0].name != q.name ||
      asked.message.edns_udp_size != 1232)
    std::abort();
  return 0;
}
