// libFuzzer target: DNS messages as a sandbox (queries) or an upstream (answers) may send them, through
// the parser, the chain follower and the reply builder the name gate uses. Input: one byte choosing UDP
// or TCP framing, then the message. A parse error is the expected outcome; a crash, undefined behaviour,
// a reply the parser itself rejects, or an address off the asked name's chain is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "net/dns_answer.hpp"
#include "net/dns_message.hpp"

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
  return 0;
}
