// DNS messages on the wire (RFC 1035): a strict, bounded parser and the few builders the name gate needs.
// Every byte comes from a sandbox (hostile) or an upstream resolver (untrusted): the parser never reads past
// the message, follows compression pointers only backwards, and rejects anything malformed instead of guessing.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sandlet::net {

// UDP carries one message per datagram; TCP prefixes each with its 2-byte length (RFC 1035 4.2.2).
enum class DnsTransport { kUdp, kTcp };
constexpr size_t kDnsMaxUdp = 4096;
constexpr size_t kDnsMaxTcp = 65535;
constexpr size_t kDnsHeaderSize = 12;
constexpr size_t kDnsMaxName = 255;         // octets on the wire, length octets included
constexpr size_t kDnsMaxRecords = 1024;     // over all sections; more is refused as abuse
constexpr size_t kDnsMaxAnswersKept = 128;  // answer records a message may carry

enum DnsType : uint16_t { kDnsA = 1, kDnsCname = 5, kDnsAaaa = 28, kDnsOpt = 41 };
constexpr uint16_t kDnsClassIn = 1;
enum DnsRcode : uint8_t {
  kDnsNoError = 0,
  kDnsFormErr = 1,
  kDnsServFail = 2,
  kDnsNxDomain = 3,
  kDnsNotImp = 4,
  kDnsRefused = 5,
};

struct DnsHeader {
  uint16_t id = 0, flags = 0, qdcount = 0, ancount = 0, nscount = 0, arcount = 0;
  bool response() const { return flags & 0x8000; }
  uint8_t opcode() const { return (flags >> 11) & 0xf; }
  bool truncated() const { return flags & 0x0200; }
  bool recursion_desired() const { return flags & 0x0100; }
  uint8_t rcode() const { return flags & 0xf; }
};

// A name as text: labels joined by '.', lower case, no trailing dot ("" is the root). Bytes other than
// [a-z0-9_-] are written "\DDD", so such a name can never equal a host name of the rules.
struct DnsQuestion {
  std::string name;
  std::vector<uint8_t> wire;  // the name's labels as sent (case kept, uncompressed), for the mirrored reply
  uint16_t type = 0;
  uint16_t klass = 0;
};

struct DnsRecord {
  std::string owner;  // as DnsQuestion::name
  uint16_t type = 0;
  uint16_t klass = 0;
  uint32_t ttl = 0;                 // seconds; a value with the top bit set reads as 0 (RFC 2181 8)
  std::array<uint8_t, 16> addr{};   // A: the first 4 bytes; AAAA: all 16
  std::string target;               // CNAME
};

struct DnsMessage {
  DnsHeader header;
  std::vector<DnsQuestion> questions;  // 0 or 1 (more is refused)
  std::vector<DnsRecord> answers;      // A, AAAA, CNAME of class IN; other types are checked and skipped
  uint16_t edns_udp_size = 0;          // the OPT record's payload size; 0 without EDNS
};

struct DnsParse {
  DnsMessage message;
  bool header_ok = false;  // the 12-byte header was read: a reply can mirror its id
  std::string error;       // empty when the whole message is well formed
  bool ok() const { return error.empty(); }
};

// `bytes` is one UDP datagram (<= kDnsMaxUdp) or, for kTcp, one message with its length prefix.
DnsParse parse_dns(std::span<const uint8_t> bytes, DnsTransport transport = DnsTransport::kUdp);

// Whether `name` (DnsQuestion::name form) is a host name: 1..63-octet labels of [a-z0-9_-], not the root.
bool dns_is_host_name(std::string_view name);

// A recursive query (RD set, no other flag) for `q` with id `id`, asking for UDP replies up to
// `edns_udp_size` (an EDNS0 OPT of our own, no options, no DO bit; 0 = no OPT record). The name goes out in
// canonical form, lower case (dns_canonical_wire): nothing of the letter case a sender chose is passed on.
// Nothing else of any message is taken: the question's name, type and class are the whole of it.
std::vector<uint8_t> build_dns_query(uint16_t id, const DnsQuestion& q, uint16_t edns_udp_size);

// `wire` (a name's labels as on the wire, uncompressed) with every ASCII capital letter lowered.
std::vector<uint8_t> dns_canonical_wire(std::span<const uint8_t> wire);

// The reply to `query` (its id, opcode, RD and question mirrored; RA set) with `rcode` and `answers`
// (A, AAAA, CNAME; names must be host names). Answers that do not fit the client's limit (UDP: 512, or its
// EDNS size up to kDnsMaxUdp; TCP: kDnsMaxTcp) are left out and TC is set. For kTcp the length prefix is
// included. A query without a question gets a header-only reply.
std::vector<uint8_t> build_dns_reply(const DnsMessage& query, uint8_t rcode, const std::vector<DnsRecord>& answers,
                                     DnsTransport transport = DnsTransport::kUdp);

}  // namespace sandlet::net
