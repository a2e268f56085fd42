// Unit tests for the gateway's resolver scheduling (src/network/gateway/dns_service.cpp) on an event loop of the
// test's own, against real UDP resolvers on loopback: a sandbox whose upstream never answers waits on
// itself (its own bound), not the others; answers are handed out from the loop, never from inside submit();
// what an answer cannot put in the allowlist is SERVFAIL; every decision and drop is in the sandbox's DNS
// log; the descriptors held follow the queries waiting on an upstream.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "network/gateway/dns_service.hpp"
#include "network/gateway/event_loop.hpp"
#include "network/gateway/limits.hpp"
#include "proto/dns_log.hpp"
#include "dns_test_support.hpp"

using namespace sandlet;
using namespace sandlet::netgw;
using namespace dns_test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Answers every query: A 192.0.2.9 for names under answer.test, NXDOMAIN for the others.
Bytes answer_of(const Bytes& q) {
  const std::string name = name_of(q);
  size_t p = 12;
  while (p < q.size() && q[p] != 0) p += 1 + q[p];
  const bool a = name.size() > 12 && name.substr(name.size() - 12) == ".answer.test";
  Bytes out = header(static_cast<uint16_t>(q[0] << 8 | q[1]), a ? 0x8180 : 0x8183, 1, a ? 1 : 0);
  out.insert(out.end(), q.begin() + 12, q.begin() + static_cast<long>(p + 5));
  if (a) rr(out, ptr(12), net::kDnsA, 60, v4("192.0.2.9"));
  return out;
}

// A sandbox's side: its policy (every name under .test, on port 443), no cgroup (the allowlist cannot be
// opened), and its DNS log in a memfd the test reads back.
struct Sandbox {
  int log_fd = -1;
  std::shared_ptr<DnsContext> ctx;
  Sandbox(const std::string& id, uint16_t upstream_port) {
    log_fd = ::memfd_create("dns-log", MFD_CLOEXEC);
    REQUIRE(log_fd >= 0);
    REQUIRE(::ftruncate(log_fd, proto::kDnsLogSize) == 0);
    ctx = std::make_shared<DnsContext>(id, sys::UniqueFd(), sys::UniqueFd(::dup(log_fd)));
    NetAllowRule rule;
    rule.host = "*.test";
    rule.protocols = kNetTcp;
    rule.port_lo = rule.port_hi = 443;
    ctx->set_policy(std::make_shared<const DnsPolicy>(std::vector<NetAllowRule>{rule},
                                                      std::vector<net::DnsUpstream>{*net::dns_upstream_of(
                                                          "127.0.0.1:" + std::to_string(upstream_port))}),
                    {});
  }
  ~Sandbox() { ::close(log_fd); }
  proto::DnsLog log() const {
    proto::DnsLog l{};
    REQUIRE(::pread(log_fd, &l, sizeof l, 0) == static_cast<ssize_t>(sizeof l));
    return l;
  }
};

struct Answer {
  bool done = false;
  std::vector<uint8_t> reply;
  Clock::time_point at{};
};

DnsService::Done into(Answer& a) {
  return [&a](std::vector<uint8_t> reply) {
    a.done = true;
    a.reply = std::move(reply);
    a.at = Clock::now();
  };
}

bool run_until(EventLoop& loop, const std::function<bool()>& f, std::chrono::milliseconds limit) {
  const Clock::time_point end = Clock::now() + limit;
  while (!f() && Clock::now() < end) loop.run_once(10);
  return f();
}

int rcode(const Answer& a) {
  const net::DnsParse p = net::parse_dns(a.reply);
  REQUIRE(p.ok());
  return p.message.header.rcode();
}

}  // namespace

TEST_CASE("dns service: a sandbox whose names are never answered waits on itself, not on the others", "[netgw][dns]") {
  FakeDns silent([](const Bytes&) { return std::vector<Bytes>{}; });
  FakeDns good([](const Bytes& q) { return std::vector<Bytes>{answer_of(q)}; });
  EventLoop loop;
  DnsService dns(loop);
  Sandbox slow("slow", silent.port()), fast("fast", good.port());
  CHECK(dns.descriptors() == 2);

  std::vector<Answer> waiting(kDnsPerSandbox);
  for (size_t i = 0; i < waiting.size(); ++i)
    REQUIRE(dns.submit(slow.ctx, query(static_cast<uint16_t>(i), "w" + std::to_string(i) + ".test", net::kDnsA),
                       net::DnsTransport::kUdp, into(waiting[i])));
  // Its bound: the next one is dropped (and logged), nothing else of it waits.
  Answer over;
  CHECK_FALSE(dns.submit(slow.ctx, query(99, "over.test", net::kDnsA), net::DnsTransport::kUdp, into(over)));
  CHECK(dns.in_flight() == kDnsPerSandbox);
  CHECK(dns.upstream_sockets() == kDnsPerSandbox);  // one socket per query waiting on an upstream
  CHECK(dns.descriptors() == 2 + kDnsPerSandbox);

  // Another sandbox's lookup is answered at once, while the slow ones wait.
  const Clock::time_point start = Clock::now();
  Answer quick;
  REQUIRE(dns.submit(fast.ctx, query(7, "gone.test", net::kDnsA), net::DnsTransport::kUdp, into(quick)));
  CHECK_FALSE(quick.done);  // never from inside submit()
  REQUIRE(run_until(loop, [&] { return quick.done; }, 3000ms));
  CHECK(quick.at - start < 1500ms);  // well before the slow ones' 2 s (a loaded host: room to spare)
  CHECK(rcode(quick) == net::kDnsNxDomain);
  for (const Answer& a : waiting) CHECK_FALSE(a.done);

  // The slow ones fail after the gate's budget (one upstream: two tries of 1 s).
  REQUIRE(run_until(loop, [&] { return std::all_of(waiting.begin(), waiting.end(), [](const Answer& x) { return x.done; }); },
                    6000ms));
  CHECK(dns.in_flight() == 0);
  for (const Answer& a : waiting) {
    REQUIRE(a.done);
    CHECK(rcode(a) == net::kDnsServFail);
    CHECK(a.at - start > 1900ms);
    CHECK(a.at - start < 4500ms);
  }
  CHECK_FALSE(over.done);
  CHECK(dns.descriptors() == 2);
  CHECK(slow.log().failed == kDnsPerSandbox);
  CHECK(slow.log().dropped == 1);
  CHECK(fast.log().answered == 1);
  CHECK(dns.totals().failed == kDnsPerSandbox);
  CHECK(dns.totals().dropped == 1);
  CHECK(dns.totals().answered == 1);
  // Its bound is free again.
  Answer again;
  CHECK(dns.submit(slow.ctx, query(1, "other", net::kDnsA), net::DnsTransport::kUdp, into(again)));
  REQUIRE(run_until(loop, [&] { return again.done; }, 1000ms));
  CHECK(rcode(again) == net::kDnsRefused);
  CHECK(slow.log().refused == 1);
}

TEST_CASE("dns service: an answer the allowlist cannot take is SERVFAIL, and logged", "[netgw][dns]") {
  FakeDns good([](const Bytes& q) { return std::vector<Bytes>{answer_of(q)}; });
  EventLoop loop;
  DnsService dns(loop);
  Sandbox sb("sb", good.port());  // no cgroup: the allowlist cannot be opened
  Answer a, tcp;
  REQUIRE(dns.submit(sb.ctx, query(3, "Host.Answer.Test", net::kDnsA), net::DnsTransport::kUdp, into(a)));
  Bytes framed = {0, 0};
  append(framed, query(4, "host.answer.test", net::kDnsA));
  framed[1] = static_cast<uint8_t>(framed.size() - 2);
  REQUIRE(dns.submit(sb.ctx, framed, net::DnsTransport::kTcp, into(tcp)));
  REQUIRE(run_until(loop, [&] { return a.done && tcp.done; }, 5000ms));
  CHECK(rcode(a) == net::kDnsServFail);
  const net::DnsParse p = net::parse_dns(a.reply);
  CHECK(p.message.questions.at(0).wire == wire("Host.Answer.Test"));  // the sandbox's own question
  const net::DnsParse t = net::parse_dns(tcp.reply, net::DnsTransport::kTcp);
  REQUIRE(t.ok());
  CHECK(t.message.header.rcode() == net::kDnsServFail);
  const proto::DnsLog log = sb.log();
  CHECK(log.failed == 2);
  CHECK(std::string(log.ring[0].outcome).find("the allowlist could not take the answer") != std::string::npos);
  CHECK(std::string(log.ring[0].name) == "host.answer.test");
  CHECK(dns.in_flight() == 0);
  CHECK(dns.descriptors() == 2);
  // A prune of a sandbox without an allowlist is harmless.
  dns.prune(sb.ctx);
  run_until(loop, [] { return false; }, 100ms);
  CHECK(sb.log().failed == 2);
}
