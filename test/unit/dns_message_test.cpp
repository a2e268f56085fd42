// Unit tests for the DNS wire-format parser and builders (src/network/dns/dns_message.cpp): golden messages,
// compression, every error path, the reply builders' mirroring and truncation.
#include <catch2/catch.hpp>

#include <algorithm>

#include "network/dns/dns_message.hpp"
#include "dns_test_support.hpp"

using namespace sandlet::net;
using namespace dns_test;

namespace {

DnsParse parse(const Bytes& b, DnsTransport t = DnsTransport::kUdp) { return parse_dns(b, t); }

// An answer to "www.example.com A": a CNAME (owner compressed to the question) to cdn.example.net, its A.
Bytes golden_answer() {
  Bytes b = header(0xBEEF, 0x8180, 1, 2);
  question(b, "www.Example.COM", kDnsA);
  Bytes target = {3, 'c', 'd', 'n'};
  append(target, wire("example.net"));
  rr(b, ptr(12), kDnsCname, 300, target);
  rr(b, ptr(12 + 17 + 4 + 12), kDnsA, 60, v4("192.0.2.10"));  // owner: the CNAME's target
  return b;
}

}  // namespace

TEST_CASE("dns message: a golden answer with compression", "[net][dns]") {
  const DnsParse p = parse(golden_answer());
  REQUIRE(p.ok());
  const DnsMessage& m = p.message;
  CHECK(m.header.id == 0xBEEF);
  CHECK(m.header.response());
  CHECK(m.header.rcode() == kDnsNoError);
  REQUIRE(m.questions.size() == 1);
  CHECK(m.questions[0].name == "www.example.com");  // lower case
  CHECK(m.questions[0].wire == wire("www.Example.COM"));  // as sent
  REQUIRE(m.answers.size() == 2);
  CHECK(m.answers[0].owner == "www.example.com");
  CHECK(m.answers[0].type == kDnsCname);
  CHECK(m.answers[0].target == "cdn.example.net");
  CHECK(m.answers[0].ttl == 300);
  CHECK(m.answers[1].owner == "cdn.example.net");
  CHECK(text_of(4, m.answers[1].addr) == "192.0.2.10");
  CHECK(m.edns_udp_size == 0);
}

TEST_CASE("dns message: AAAA, OPT, skipped types, classes and TTLs", "[net][dns]") {
  Bytes b = header(1, 0x8180, 1, 3, 1, 1);
  question(b, "a.b", kDnsAaaa);
  rr(b, ptr(12), kDnsAaaa, 0x80000001u, v6("2001:db8::1"));  // top bit set: reads as 0
  rr(b, ptr(12), 16, 5, {3, 'x', 'y', 'z'});                   // TXT: checked, not kept
  rr(b, ptr(12), kDnsA, 5, v4("192.0.2.1"), 3);                // class CHAOS: not kept
  rr(b, wire("b"), 6, 5, {1, 2, 3});                           // authority: SOA-ish bytes, skipped
  Bytes opt = {0};
  u16(opt, kDnsOpt), u16(opt, 1232), u32(opt, 0), u16(opt, 0);
  append(b, opt);
  const DnsParse p = parse(b);
  REQUIRE(p.ok());
  REQUIRE(p.message.answers.size() == 1);
  CHECK(p.message.answers[0].ttl == 0);
  CHECK(text_of(6, p.message.answers[0].addr) == "2001:db8::1");
  CHECK(p.message.edns_udp_size == 1232);
}

TEST_CASE("dns message: names with odd bytes never read as host names", "[net][dns]") {
  Bytes b = header(1, 0x0100, 1, 0);
  append(b, Bytes{5, 'a', '.', 'b', 0, 'C', 0});  // one label holding a dot and a NUL
  u16(b, kDnsA), u16(b, 1);
  const DnsParse p = parse(b);
  REQUIRE(p.ok());
  CHECK(p.message.questions[0].name == "a\\046b\\000c");
  CHECK_FALSE(dns_is_host_name(p.message.questions[0].name));
  CHECK(dns_is_host_name("pypi-mirror.internal"));
  CHECK(dns_is_host_name("_srv.x1"));
  CHECK_FALSE(dns_is_host_name(""));
  CHECK_FALSE(dns_is_host_name("a..b"));
  CHECK_FALSE(dns_is_host_name("a.b."));
  CHECK_FALSE(dns_is_host_name("A.b"));
  CHECK_FALSE(dns_is_host_name(std::string(64, 'a')));
}

TEST_CASE("dns message: every malformed input is an error naming what is wrong", "[net][dns]") {
  auto error_of = [](const Bytes& b, DnsTransport t = DnsTransport::kUdp) {
    const DnsParse p = parse_dns(b, t);
    return p.error;
  };
  CHECK(error_of({}) == "a message shorter than the 12-byte header");
  CHECK(error_of(Bytes(11, 0)) == "a message shorter than the 12-byte header");
  CHECK(error_of(Bytes(4097, 0)) == "a UDP message larger than 4096 bytes");
  CHECK(parse(Bytes(11, 0)).header_ok == false);

  Bytes two_q = header(1, 0, 2, 0);
  CHECK(error_of(two_q) == "more than one question");
  CHECK(parse(two_q).header_ok);
  CHECK(error_of(header(1, 0, 0, 700, 200, 200)) == "more than 1024 records");

  Bytes cut = header(1, 0, 1, 0);
  append(cut, Bytes{3, 'a', 'b'});
  CHECK(error_of(cut) == "a label runs past the end of the message");
  Bytes no_end = header(1, 0, 1, 0);
  append(no_end, Bytes{1, 'a'});
  CHECK(error_of(no_end) == "a name runs past the end of the message");
  Bytes no_type = header(1, 0, 1, 0);
  append(no_type, wire("a"));
  u16(no_type, 1);
  CHECK(error_of(no_type) == "the question runs past the end of the message");

  Bytes reserved = header(1, 0, 1, 0);
  append(reserved, Bytes{0x40, 0});
  CHECK(error_of(reserved) == "a label of a reserved type");

  // Pointers: into the header, to itself, forwards, a loop of two, cut short.
  Bytes to_header = header(1, 0, 1, 0);
  append(to_header, ptr(2));
  CHECK(error_of(to_header) == "a compression pointer points into the header");
  Bytes self = header(1, 0, 1, 0);
  append(self, ptr(12));
  CHECK(error_of(self) == "a compression pointer does not point backwards");
  Bytes forward = header(1, 0, 1, 0);
  append(forward, ptr(14));
  append(forward, wire("a"));
  CHECK(error_of(forward) == "a compression pointer does not point backwards");
  Bytes loop = header(1, 0x8000, 1, 1);
  question(loop, "a", kDnsA);               // name at 12..14
  append(loop, Bytes{1, 'b'});              // 19: label b then a pointer back to 19 (itself, via a jump)
  append(loop, ptr(19));
  CHECK(error_of(loop) == "a compression pointer does not point backwards");
  Bytes half_ptr = header(1, 0, 1, 0);
  half_ptr.push_back(0xC0);
  CHECK(error_of(half_ptr) == "a compression pointer runs past the end of the message");

  // Length: 255 octets is the most; one label more is refused.
  std::string name;
  for (int i = 0; i < 4; ++i) name += (i ? "." : "") + std::string(i < 3 ? 63 : 61, 'a');  // 255 on the wire
  CHECK(parse(query(1, name, kDnsA)).ok());
  CHECK(error_of(query(1, name + "a", kDnsA)) == "a name longer than 255 octets");

  // Records.
  Bytes rr_cut = header(1, 0x8000, 1, 1);
  question(rr_cut, "a", kDnsA);
  append(rr_cut, ptr(12));
  u16(rr_cut, kDnsA);
  CHECK(error_of(rr_cut) == "a record header runs past the end of the message");
  Bytes data_cut = header(1, 0x8000, 1, 1);
  question(data_cut, "a", kDnsA);
  rr(data_cut, ptr(12), kDnsA, 1, v4("192.0.2.1"));
  data_cut.pop_back();
  CHECK(error_of(data_cut) == "a record's data runs past the end of the message");
  Bytes bad_a = header(1, 0x8000, 1, 1);
  question(bad_a, "a", kDnsA);
  rr(bad_a, ptr(12), kDnsA, 1, {1, 2, 3, 4, 5});
  CHECK(error_of(bad_a) == "an address record with 5 bytes of data");
  Bytes bad_aaaa = header(1, 0x8000, 1, 1);
  question(bad_aaaa, "a", kDnsAaaa);
  rr(bad_aaaa, ptr(12), kDnsAaaa, 1, v4("192.0.2.1"));
  CHECK(error_of(bad_aaaa) == "an address record with 4 bytes of data");
  Bytes cname_short = header(1, 0x8000, 1, 1);
  question(cname_short, "a", kDnsA);
  Bytes t = wire("b");
  t.push_back(9);
  rr(cname_short, ptr(12), kDnsCname, 1, t);
  CHECK(error_of(cname_short) == "a CNAME whose name does not fill its data");
  Bytes two_opt = header(1, 0, 1, 0, 0, 2);
  question(two_opt, "a", kDnsA);
  for (int i = 0; i < 2; ++i) rr(two_opt, {0}, kDnsOpt, 0, {}, 1232);
  CHECK(error_of(two_opt) == "more than one OPT record");
  Bytes opt_owner = header(1, 0, 1, 0, 0, 1);
  question(opt_owner, "a", kDnsA);
  rr(opt_owner, wire("x"), kDnsOpt, 0, {}, 1232);
  CHECK(error_of(opt_owner) == "an OPT record not owned by the root");
  Bytes many = header(1, 0x8000, 1, 129);
  question(many, "a", kDnsA);
  for (int i = 0; i < 129; ++i) rr(many, ptr(12), kDnsA, 1, v4("192.0.2.1"));
  CHECK(error_of(many) == "more than 128 answer records");
  Bytes trailing = query(1, "a", kDnsA);
  trailing.push_back(0);
  CHECK(error_of(trailing) == "bytes after the last record");
  Bytes missing = header(1, 0x8000, 1, 1);
  question(missing, "a", kDnsA);
  CHECK(error_of(missing) == "a name runs past the end of the message");

  // TCP framing.
  CHECK(error_of({0}, DnsTransport::kTcp) == "a TCP message shorter than its length prefix");
  Bytes framed = {0, 40};
  append(framed, query(1, "a", kDnsA));
  CHECK(error_of(framed, DnsTransport::kTcp) == "a TCP length prefix that does not match the message");
}

TEST_CASE("dns message: TCP allows large messages behind the length prefix", "[net][dns]") {
  Bytes big = header(7, 0x8180, 1, 128, 0, 200);
  question(big, "a", kDnsA);
  for (int i = 0; i < 128; ++i) rr(big, ptr(12), kDnsA, 1, v4("192.0.2.1"));
  for (int i = 0; i < 200; ++i) rr(big, ptr(12), 16, 1, Bytes(20, 'x'));
  REQUIRE(big.size() > kDnsMaxUdp);
  Bytes framed = {static_cast<uint8_t>(big.size() >> 8), static_cast<uint8_t>(big.size())};
  append(framed, big);
  const DnsParse p = parse(framed, DnsTransport::kTcp);
  REQUIRE(p.ok());
  CHECK(p.message.answers.size() == 128);
  CHECK_FALSE(parse(big).ok());  // too large for UDP
}

TEST_CASE("dns message: replies mirror the query and are parseable", "[net][dns]") {
  const DnsParse q = parse(query(0x1234, "WWW.example.com", kDnsA));
  REQUIRE(q.ok());
  const Bytes refused = build_dns_reply(q.message, kDnsRefused, {});
  const DnsParse r = parse(refused);
  REQUIRE(r.ok());
  CHECK(r.message.header.id == 0x1234);
  CHECK(r.message.header.response());
  CHECK(r.message.header.recursion_desired());
  CHECK(r.message.header.rcode() == kDnsRefused);
  REQUIRE(r.message.questions.size() == 1);
  CHECK(r.message.questions[0].wire == wire("WWW.example.com"));  // case kept for 0x20 checks
  // Golden bytes: header, question, nothing else.
  Bytes want = header(0x1234, 0x8185, 1, 0);
  question(want, "WWW.example.com", kDnsA);
  CHECK(refused == want);
  CHECK(parse(build_dns_reply(q.message, kDnsNxDomain, {})).message.header.rcode() == kDnsNxDomain);
  CHECK(parse(build_dns_reply(q.message, kDnsServFail, {})).message.header.rcode() == kDnsServFail);

  DnsRecord cname{"www.example.com", kDnsCname, kDnsClassIn, 30, {}, "cdn.example.net"};
  DnsRecord a{"cdn.example.net", kDnsA, kDnsClassIn, 20, {}, ""};
  a.addr = {192, 0, 2, 9};
  DnsRecord odd{"a\\000b", kDnsA, kDnsClassIn, 20, {}, ""};  // not a host name: never written
  const Bytes ok = build_dns_reply(q.message, kDnsNoError, {cname, a, odd});
  const DnsParse o = parse(ok);
  REQUIRE(o.ok());
  REQUIRE(o.message.answers.size() == 2);
  CHECK(o.message.answers[0].owner == "www.example.com");
  CHECK(o.message.answers[0].target == "cdn.example.net");
  CHECK(o.message.answers[1].owner == "cdn.example.net");
  CHECK(o.message.answers[1].ttl == 20);
  CHECK(ok[12 + 17 + 4] == 0xC0);  // the owner points at the question

  // TCP: length prefix.
  const Bytes tcp = build_dns_reply(q.message, kDnsNoError, {cname, a}, DnsTransport::kTcp);
  CHECK(tcp.size() == ok.size() + 2);
  CHECK(parse(tcp, DnsTransport::kTcp).ok());

  // A query that failed to parse past its header: a header-only reply.
  DnsMessage bare = q.message;
  bare.questions.clear();
  const DnsParse f = parse(build_dns_reply(bare, kDnsFormErr, {}));
  REQUIRE(f.ok());
  CHECK(f.message.header.qdcount == 0);
  CHECK(f.message.header.rcode() == kDnsFormErr);
}

TEST_CASE("dns message: replies beyond the client's size are truncated at a record", "[net][dns]") {
  const DnsParse q = parse(query(9, "many.example", kDnsA));
  REQUIRE(q.ok());
  std::vector<DnsRecord> records;
  for (int i = 0; i < 100; ++i) {
    DnsRecord a{"many.example", kDnsA, kDnsClassIn, 5, {}, ""};
    a.addr = {10, 0, 0, static_cast<uint8_t>(i)};
    records.push_back(a);
  }
  const Bytes classic = build_dns_reply(q.message, kDnsNoError, records);
  CHECK(classic.size() <= 512);
  const DnsParse c = parse(classic);
  REQUIRE(c.ok());
  CHECK(c.message.header.truncated());
  CHECK(c.message.answers.size() == (512 - 30) / 16);  // header+question 30 bytes, 16 per compressed A
  // With EDNS 4096 all fit.
  Bytes edns = header(9, 0x0100, 1, 0, 0, 1);
  question(edns, "many.example", kDnsA);
  rr(edns, {0}, kDnsOpt, 0, {}, 4096);
  const DnsParse qe = parse(edns);
  REQUIRE(qe.ok());
  const DnsParse all = parse(build_dns_reply(qe.message, kDnsNoError, records));
  REQUIRE(all.ok());
  CHECK_FALSE(all.message.header.truncated());
  CHECK(all.message.answers.size() == 100);
}

TEST_CASE("dns message: the upstream query carries the question and EDNS", "[net][dns]") {
  const DnsParse q = parse(query(3, "Mirror.internal", kDnsAaaa));
  REQUIRE(q.ok());
  const Bytes out = build_dns_query(0xABCD, q.message.questions[0], 1232);
  Bytes want = header(0xABCD, 0x0100, 1, 0, 0, 1);
  question(want, "mirror.internal", kDnsAaaa);  // canonical: the sender's letter case goes no further
  rr(want, {0}, kDnsOpt, 0, {}, 1232);
  CHECK(out == want);
  const DnsParse back = parse(out);
  REQUIRE(back.ok());
  CHECK(back.message.edns_udp_size == 1232);
  CHECK(build_dns_query(1, q.message.questions[0], 0).size() == 12 + 17 + 4);
}

TEST_CASE("dns message: the canonical form of a name lowers its letters only", "[net][dns]") {
  CHECK(dns_canonical_wire(wire("WwW.ExAmPlE.CoM")) == wire("www.example.com"));
  CHECK(dns_canonical_wire(wire("already.lower")) == wire("already.lower"));
  // Digits, '-', '_' and bytes other than ASCII capitals stay; length octets are never taken for letters.
  const Bytes odd = {3, 'A', 0xC3, '_', 2, 'Z', '9', 0};
  CHECK(dns_canonical_wire(odd) == Bytes{3, 'a', 0xC3, '_', 2, 'z', '9', 0});
  Bytes long_label = {63};
  for (int i = 0; i < 63; ++i) long_label.push_back('Q');
  long_label.push_back(0);
  const Bytes lowered = dns_canonical_wire(long_label);
  CHECK(lowered[0] == 63);
  CHECK(std::count(lowered.begin(), lowered.end(), 'q') == 63);
  CHECK(dns_canonical_wire(Bytes{}).empty());
}
