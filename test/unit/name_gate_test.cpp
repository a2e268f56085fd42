// Unit tests for the name gate (src/network/dns/name_gate.cpp) against real UDP resolvers the test runs on
// loopback: allowed and refused names, wildcards, CNAME chains, an upstream adding addresses it must not,
// spoofed and late replies, silence, failover, and what reaches the allowlist.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "network/dns/gate_allowlist.hpp"
#include "network/dns/name_gate.hpp"
#include "spec/network_spec.hpp"
#include "dns_test_support.hpp"

using namespace sandlet;
using namespace sandlet::net;
using namespace dns_test;

namespace {

// The id and the question of a query as the gate sends it (uncompressed name, then type and class).
struct Asked {
  uint16_t id = 0;
  std::string name;  // lower case, dotted
  uint16_t type = 0;
  Bytes question;    // wire bytes of name, type, class
};

Asked asked(const Bytes& q) {
  Asked a;
  a.id = static_cast<uint16_t>(q[0] << 8 | q[1]);
  size_t p = 12;
  while (q[p] != 0) {
    if (!a.name.empty()) a.name += '.';
    for (size_t i = p + 1; i <= p + q[p]; ++i) a.name += static_cast<char>(std::tolower(q[i]));
    p += 1 + q[p];
  }
  a.type = static_cast<uint16_t>(q[p + 1] << 8 | q[p + 2]);
  a.question.assign(q.begin() + 12, q.begin() + static_cast<long>(p + 5));
  return a;
}

// The test's zone. www.example.com -> CNAME edge.cdn.test -> CNAME e1.cdn.test -> A 192.0.2.10, .11
// (and AAAA); api.example.com A 192.0.2.20; evil.example.com answers with its own A and an unrelated A
// (203.0.113.66) and an unrelated CNAME chain; gone.example.com is NXDOMAIN.
Bytes zone_answer(const Bytes& query, uint16_t flags_extra = 0) {
  const Asked a = asked(query);
  uint16_t rcode = 0;
  Bytes body;
  int count = 0;
  auto add = [&](const std::string& owner, uint16_t type, uint32_t ttl, const Bytes& rdata) {
    rr(body, wire(owner), type, ttl, rdata);
    ++count;
  };
  if (a.name == "www.example.com") {
    add("www.example.com", kDnsCname, 300, wire("edge.cdn.test"));
    add("edge.cdn.test", kDnsCname, 120, wire("e1.cdn.test"));
    if (a.type == kDnsA) {
      add("e1.cdn.test", kDnsA, 3600, v4("192.0.2.10"));
      add("e1.cdn.test", kDnsA, 3600, v4("192.0.2.11"));
    } else if (a.type == kDnsAaaa) {
      add("e1.cdn.test", kDnsAaaa, 50, v6("2001:db8::10"));
    }
  } else if (a.name == "api.example.com" || a.name == "x.api.example.com" || a.name == "mirror.internal") {
    if (a.type == kDnsA) add(a.name, kDnsA, 200000, v4("192.0.2.20"));
  } else if (a.name == "evil.example.com") {
    add("evil.example.com", kDnsA, 60, v4("192.0.2.30"));
    add("unrelated.test", kDnsA, 60, v4("203.0.113.66"));
    add("evil.example.com", kDnsAaaa, 60, v6("2001:db8::66"));  // of another type than asked
    add("other.test", kDnsCname, 60, wire("evil.example.com"));  // a chain into the name, not from it
    add("evil.example.com", kDnsA, 60, v4("127.0.0.1"));         // loopback: never added
  } else if (a.name == "loop.example.com") {
    add("loop.example.com", kDnsCname, 60, wire("loop2.example.com"));
    add("loop2.example.com", kDnsCname, 60, wire("loop.example.com"));
    add("loop2.example.com", kDnsA, 60, v4("192.0.2.40"));
  } else {
    rcode = kDnsNxDomain;
  }
  Bytes out = header(a.id, static_cast<uint16_t>(0x8180 | rcode | flags_extra), 1, static_cast<uint16_t>(count));
  append(out, a.question);
  append(out, body);
  return out;
}

NetworkPolicy policy_with(uint16_t port) {
  NetworkPolicy p = parse_network_text(R"({"allow": [
      {"host": "www.example.com", "ports": 443, "protocol": "tcp"},
      {"host": "*.example.com", "ports": "80", "protocol": "tcp"},
      {"host": "mirror.internal"},
      {"cidr": "10.0.0.0/8"}], "dns": ["127.0.0.1"]})");
  p.dns = {"127.0.0.1:" + std::to_string(port)};
  return p;
}

NameGateOptions quick() {
  NameGateOptions o;
  o.attempt_timeout = std::chrono::milliseconds(300);
  o.rounds = 2;
  o.total_timeout = std::chrono::milliseconds(1500);
  return o;
}

DnsMessage reply_of(const GateResult& r, DnsTransport t = DnsTransport::kUdp) {
  const DnsParse p = parse_dns(r.reply, t);
  INFO(r.outcome << " / " << p.error);
  REQUIRE(p.ok());
  return p.message;
}

std::vector<std::string> addresses(const GateResult& r) {
  std::vector<std::string> out;
  for (const auto& a : r.allow) out.push_back(text_of(a.family, a.addr) + " " + std::to_string(a.port_lo) + "-" +
                                              std::to_string(a.port_hi) + " p" + std::to_string(a.protocols) +
                                              " ttl " + std::to_string(a.ttl));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("name gate: wildcard rules match names under the domain only", "[net][dns]") {
  CHECK(dns_name_matches("mirror.internal", "mirror.internal"));
  CHECK_FALSE(dns_name_matches("mirror.internal", "a.mirror.internal"));
  CHECK(dns_name_matches("*.example.com", "a.example.com"));
  CHECK(dns_name_matches("*.example.com", "a.b.example.com"));
  CHECK_FALSE(dns_name_matches("*.example.com", "example.com"));
  CHECK_FALSE(dns_name_matches("*.example.com", "badexample.com"));
  CHECK_FALSE(dns_name_matches("*.example.com", "a.example.com.evil"));
  CHECK(dns_name_matches("*", "deb.debian.org"));  // "*": every name
}

TEST_CASE("name gate: an allowed name through a CNAME chain opens its addresses with the rules' ports", "[net][dns]") {
  FakeDns up([](const Bytes& q) { return std::vector<Bytes>{zone_answer(q)}; });
  const NetworkPolicy pol = policy_with(up.port());
  const NameGate gate = NameGate::for_policy(pol, quick());

  const GateResult r = gate.handle(query(0x4242, "WWW.Example.com", kDnsA));
  INFO(r.outcome);
  const DnsMessage m = reply_of(r);
  CHECK(m.header.id == 0x4242);
  CHECK(m.header.rcode() == kDnsNoError);
  CHECK(m.questions[0].wire == wire("WWW.Example.com"));
  REQUIRE(m.answers.size() == 4);  // two CNAMEs, two A
  CHECK(m.answers[0].target == "edge.cdn.test");
  CHECK(m.answers[1].target == "e1.cdn.test");
  CHECK(m.answers[2].ttl == 120);  // the lowest on the chain
  // Both rules matching the name: tcp 443 (exact) and tcp 80 (the wildcard).
  CHECK(addresses(r) == std::vector<std::string>{"192.0.2.10 443-443 p1 ttl 120", "192.0.2.10 80-80 p1 ttl 120",
                                                 "192.0.2.11 443-443 p1 ttl 120", "192.0.2.11 80-80 p1 ttl 120"});

  const GateResult six = gate.handle(query(7, "www.example.com", kDnsAaaa));
  CHECK(addresses(six) == std::vector<std::string>{"2001:db8::10 443-443 p1 ttl 50", "2001:db8::10 80-80 p1 ttl 50"});

  // What reaches the allowlist: expiry with the floor, the rule's tag.
  const auto set = resolved_of(r, pol.allow, 1000);
  REQUIRE(set.size() == 4);
  CHECK(set[0].expires == 1000 + kNetResolvedTtlFloor);
  CHECK(set[0].rule_tag == policy::net_rule_tag(pol.allow[r.allow[0].rule]));
  // A TTL above the cap: the allowlist keeps it for the cap, the sandbox is told no more than the cap.
  const GateResult mirror = gate.handle(query(8, "mirror.internal", kDnsA));
  CHECK(addresses(mirror) == std::vector<std::string>{"192.0.2.20 0-65535 p7 ttl 200000"});
  CHECK(reply_of(mirror).answers.at(0).ttl == kNetResolvedTtlCap);
  CHECK(resolved_of(mirror, pol.allow, 5).at(0).expires == 5 + kNetResolvedTtlCap);
}

TEST_CASE("name gate: an upstream cannot add addresses outside the asked name's chain", "[net][dns]") {
  FakeDns up([](const Bytes& q) { return std::vector<Bytes>{zone_answer(q)}; });
  const NameGate gate = NameGate::for_policy(policy_with(up.port()), quick());
  const GateResult r = gate.handle(query(1, "evil.example.com", kDnsA));
  INFO(r.outcome);
  CHECK(addresses(r) == std::vector<std::string>{"192.0.2.30 80-80 p1 ttl 60"});
  const DnsMessage m = reply_of(r);
  REQUIRE(m.answers.size() == 1);  // only what was accepted reaches the sandbox
  CHECK(text_of(4, m.answers[0].addr) == "192.0.2.30");
  // A CNAME loop ends the chain; the address on it counts once.
  const GateResult loop = gate.handle(query(2, "loop.example.com", kDnsA));
  CHECK(addresses(loop) == std::vector<std::string>{"192.0.2.40 80-80 p1 ttl 60"});
}

TEST_CASE("name gate: names outside the rules, other types and broken queries are not forwarded", "[net][dns]") {
  FakeDns up([](const Bytes& q) { return std::vector<Bytes>{zone_answer(q)}; });
  const NameGate gate = NameGate::for_policy(policy_with(up.port()), quick());
  auto rcode = [&](const Bytes& q) {
    const GateResult r = gate.handle(q);
    INFO(r.outcome);
    CHECK(r.allow.empty());
    return reply_of(r).header.rcode();
  };
  CHECK(rcode(query(1, "example.com", kDnsA)) == kDnsRefused);  // the wildcard's domain itself
  CHECK(rcode(query(1, "unrelated.test", kDnsA)) == kDnsRefused);
  CHECK(rcode(query(1, "10.0.0.1", kDnsA)) == kDnsRefused);
  CHECK(rcode(query(1, "www.example.com", 16)) == kDnsRefused);  // TXT
  CHECK(rcode(query(1, "www.example.com", 255)) == kDnsRefused);  // ANY
  Bytes chaos = header(1, 0x0100, 1, 0);
  question(chaos, "www.example.com", kDnsA, 3);
  CHECK(rcode(chaos) == kDnsRefused);
  Bytes odd = header(1, 0x0100, 1, 0);
  append(odd, Bytes{5, 'a', '.', 'b', 'c', 'd', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0});
  u16(odd, kDnsA), u16(odd, 1);
  CHECK(rcode(odd) == kDnsRefused);  // one label with a dot in it is not "a.bcd.example.com"
  Bytes notify = query(1, "www.example.com", kDnsA);
  notify[2] = 0x20;  // opcode 4
  CHECK(rcode(notify) == kDnsNotImp);
  Bytes broken = query(1, "www.example.com", kDnsA);
  broken.push_back(1);
  CHECK(rcode(broken) == kDnsFormErr);
  CHECK(rcode(header(1, 0x0100, 0, 0)) == kDnsFormErr);
  CHECK(up.queries() == 0);  // none of these reached the upstream
  // Nothing at all for what is not even a header, or a response.
  CHECK(gate.handle(Bytes{1, 2, 3}).reply.empty());
  CHECK(gate.handle(zone_answer(query(1, "www.example.com", kDnsA))).reply.empty());
  // NXDOMAIN from the upstream reaches the sandbox.
  CHECK(rcode(query(1, "gone.example.com", kDnsA)) == kDnsNxDomain);
}

TEST_CASE("name gate: spoofed and mismatched replies are ignored, the real one is taken", "[net][dns]") {
  FakeDns up([](const Bytes& q) {
    Bytes wrong_id = zone_answer(q);
    wrong_id[0] ^= 0xFF;
    Bytes wrong_q = zone_answer(query(static_cast<uint16_t>(q[0] << 8 | q[1]), "api.example.com", kDnsA));
    Bytes garbage = {q[0], q[1], 0x81};
    return std::vector<Bytes>{wrong_id, wrong_q, garbage, zone_answer(q)};
  });
  const NameGate gate = NameGate::for_policy(policy_with(up.port()), quick());
  const GateResult r = gate.handle(query(5, "www.example.com", kDnsA));
  INFO(r.outcome);
  CHECK(addresses(r).size() == 4);
  CHECK(up.queries() == 1);
}

TEST_CASE("name gate: a silent upstream times out into SERVFAIL; a second one is tried", "[net][dns]") {
  FakeDns silent([](const Bytes&) { return std::vector<Bytes>{}; });
  FakeDns failing([](const Bytes& q) {
    Bytes b = zone_answer(q);
    b[3] = static_cast<uint8_t>((b[3] & 0xF0) | kDnsServFail);
    return std::vector<Bytes>{b};
  });
  FakeDns good([](const Bytes& q) { return std::vector<Bytes>{zone_answer(q)}; });
  NetworkPolicy pol = policy_with(silent.port());
  {
    const NameGate gate = NameGate::for_policy(pol, quick());
    const GateResult r = gate.handle(query(9, "www.example.com", kDnsA));
    INFO(r.outcome);
    CHECK(reply_of(r).header.rcode() == kDnsServFail);
    CHECK(r.allow.empty());
    CHECK(silent.queries() == 2);  // two rounds
    CHECK(r.outcome.find("timed out") != std::string::npos);
  }
  pol.dns = {"127.0.0.1:" + std::to_string(silent.port()), "127.0.0.1:" + std::to_string(failing.port()),
             "127.0.0.1:" + std::to_string(good.port())};
  NameGateOptions o = quick();
  o.rounds = 1;
  const NameGate gate = NameGate::for_policy(pol, o);
  const GateResult r = gate.handle(query(9, "www.example.com", kDnsA));
  INFO(r.outcome);
  CHECK(addresses(r).size() == 4);
  CHECK(failing.queries() == 1);
  // A truncated answer is incomplete: the next upstream is asked, and with none left it is SERVFAIL.
  FakeDns truncating([](const Bytes& q) { return std::vector<Bytes>{zone_answer(q, 0x0200)}; });
  pol.dns = {"127.0.0.1:" + std::to_string(truncating.port())};
  const GateResult t = NameGate::for_policy(pol, o).handle(query(9, "www.example.com", kDnsA));
  CHECK(reply_of(t).header.rcode() == kDnsServFail);
  CHECK(t.allow.empty());
}

TEST_CASE("name gate: queries over TCP framing get framed replies", "[net][dns]") {
  FakeDns up([](const Bytes& q) { return std::vector<Bytes>{zone_answer(q)}; });
  const NameGate gate = NameGate::for_policy(policy_with(up.port()), quick());
  Bytes q = query(11, "api.example.com", kDnsA);
  Bytes framed = {0, static_cast<uint8_t>(q.size())};
  append(framed, q);
  const GateResult r = gate.handle(framed, DnsTransport::kTcp);
  const DnsMessage m = reply_of(r, DnsTransport::kTcp);
  CHECK(m.header.id == 11);
  CHECK(addresses(r) == std::vector<std::string>{"192.0.2.20 80-80 p1 ttl 200000"});
}

TEST_CASE("name gate: upstream addresses parse with and without ports", "[net][dns]") {
  CHECK(dns_upstream_text(*dns_upstream_of("10.0.0.53")) == "10.0.0.53:53");
  CHECK(dns_upstream_text(*dns_upstream_of("127.0.0.1:5353")) == "127.0.0.1:5353");
  CHECK(dns_upstream_text(*dns_upstream_of("fd00::53")) == "[fd00::53]:53");
  CHECK(dns_upstream_text(*dns_upstream_of("[::1]:5353")) == "[::1]:5353");
  CHECK_FALSE(dns_upstream_of("mirror.internal"));
  CHECK_FALSE(dns_upstream_of("10.0.0.1:"));
  CHECK_FALSE(dns_upstream_of("10.0.0.1:0"));
  CHECK_FALSE(dns_upstream_of("10.0.0.1:70000"));
  CHECK_FALSE(dns_upstream_of("[::1]"));
}
