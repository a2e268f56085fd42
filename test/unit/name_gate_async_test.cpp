// Unit tests for what the name gate forwards (only the canonical question) and for its non-blocking form
// (NameGate::begin and GateExchange, src/network/dns/name_gate.cpp), which the gateway drives from its event loop:
// the same decisions as the blocking handle(), the retry rounds and the total deadline step by step, and
// many exchanges waiting at once without holding each other up. Real UDP resolvers on loopback.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "network/dns/name_gate.hpp"
#include "spec/network_spec.hpp"
#include "dns_test_support.hpp"

using namespace sandlet;
using namespace sandlet::net;
using namespace dns_test;
using namespace std::chrono_literals;

namespace {

// The question of a query as received (uncompressed name), with its end offset.
std::string name_in(const Bytes& q, size_t& end) {
  std::string name;
  size_t p = 12;
  while (p < q.size() && q[p] != 0) {
    if (!name.empty()) name += '.';
    name.append(q.begin() + static_cast<long>(p + 1), q.begin() + static_cast<long>(p + 1 + q[p]));
    p += 1 + q[p];
  }
  end = p + 5;
  return name;
}

// Answers every A question with 192.0.2.7, mirroring the question exactly as received.
Bytes a_answer(const Bytes& q) {
  size_t end = 0;
  (void)name_in(q, end);
  Bytes out = header(static_cast<uint16_t>(q[0] << 8 | q[1]), 0x8180, 1, 1);
  out.insert(out.end(), q.begin() + 12, q.begin() + static_cast<long>(end));
  rr(out, ptr(12), kDnsA, 60, v4("192.0.2.7"));
  return out;
}

// A resolver that logs the exact bytes of every query it receives.
struct LoggingDns {
  std::mutex mu;
  std::vector<Bytes> seen;
  FakeDns dns{[this](const Bytes& q) {
    {
      std::lock_guard<std::mutex> lk(mu);
      seen.push_back(q);
    }
    return std::vector<Bytes>{a_answer(q)};
  }};
  std::vector<Bytes> log() {
    std::lock_guard<std::mutex> lk(mu);
    return seen;
  }
};

FakeDns silent_dns() {
  return FakeDns([](const Bytes&) { return std::vector<Bytes>{}; });
}

std::string at(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

NameGate gate_of(std::vector<std::string> upstreams, NameGateOptions o) {
  NetworkPolicy p = parse_network_text(R"({"allow": [{"host": "*.example.com", "ports": 443, "protocol": "tcp"},
                                                    {"host": "mirror.internal"}], "dns": ["127.0.0.1"]})");
  p.dns = std::move(upstreams);
  return NameGate::for_policy(p, o);
}

NameGateOptions timing(std::chrono::milliseconds attempt, int rounds, std::chrono::milliseconds total) {
  NameGateOptions o;
  o.attempt_timeout = attempt;
  o.rounds = rounds;
  o.total_timeout = total;
  return o;
}

// Drives exchanges the way an event loop does: one poll over all their sockets, deadlines in between.
void drive(std::vector<GateExchange*> xs, std::function<bool()> stop = [] { return false; }) {
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<GateExchange*> live;
    GateClock::time_point next = GateClock::time_point::max();
    for (GateExchange* x : xs) {
      if (x->done()) continue;
      live.push_back(x);
      fds.push_back({x->fd(), POLLIN, 0});
      next = std::min(next, x->deadline());
    }
    if (live.empty() || stop()) return;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - GateClock::now());
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(wait.count(), 50))));
    const GateClock::time_point now = GateClock::now();
    for (size_t i = 0; i < live.size(); ++i) {
      if (fds[i].revents & POLLIN) live[i]->on_readable(now);
      else if (now >= live[i]->deadline()) live[i]->on_deadline(now);
    }
  }
}

uint8_t rcode_of(const GateResult& r) {
  const DnsParse p = parse_dns(r.reply);
  INFO(r.outcome << " / " << p.error);
  REQUIRE(p.ok());
  return p.message.header.rcode();
}

bool eventually(const std::function<bool()>& f) {
  for (int i = 0; i < 100; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("name gate: the upstream is asked the lower-case name and nothing else of the sandbox's query", "[net][dns]") {
  LoggingDns up;
  const NameGate gate = gate_of({at(up.dns.port())}, timing(1000ms, 1, 2000ms));

  // Every flag, a record in each section, an OPT with options (dns_test_support.hpp): a name's letter case
  // and all of these could carry data.
  const Bytes q = hostile_query(0x5151, "WwW.ExAmPlE.CoM");
  REQUIRE(parse_dns(q).ok());

  const GateResult r = gate.handle(q);
  INFO(r.outcome);
  const DnsParse reply = parse_dns(r.reply);
  REQUIRE(reply.ok());
  CHECK(reply.message.header.id == 0x5151);
  CHECK(reply.message.header.rcode() == kDnsNoError);
  REQUIRE(reply.message.questions.size() == 1);
  CHECK(reply.message.questions[0].wire == wire("WwW.ExAmPlE.CoM"));  // the sandbox's own question, as sent
  CHECK(r.allow.size() == 1);

  const std::vector<Bytes> seen = up.log();
  REQUIRE(seen.size() == 1);
  const Bytes& got = seen[0];
  REQUIRE(got.size() > 2);
  // Byte for byte, but for our random id: RD only, one question in lower case, our OPT without options.
  Bytes want = header(static_cast<uint16_t>(got[0] << 8 | got[1]), 0x0100, 1, 0, 0, 1);
  question(want, "www.example.com", kDnsA);
  rr(want, {0}, kDnsOpt, 0, {}, 1232);
  CHECK(got == want);
  const std::string text(got.begin(), got.end());
  CHECK(text.find("secret") == std::string::npos);
  CHECK(text.find("SECRET") == std::string::npos);

  // Whatever the case, over UDP and TCP, and through begin(): the same canonical question.
  for (const char* name : {"MIRROR.INTERNAL", "mIrRoR.iNtErNaL", "mirror.internal"}) {
    CHECK(rcode_of(gate.handle(query(1, name, kDnsA))) == kDnsNoError);
    Bytes framed = {0, 0};
    append(framed, query(2, name, kDnsA));
    framed[1] = static_cast<uint8_t>(framed.size() - 2);
    const GateResult tcp = gate.handle(framed, DnsTransport::kTcp);
    const DnsParse tp = parse_dns(tcp.reply, DnsTransport::kTcp);
    REQUIRE(tp.ok());
    CHECK(tp.message.questions.at(0).wire == wire(name));
    GateStart s = gate.begin(query(3, name, kDnsA));
    REQUIRE(s.exchange);
    CHECK(s.exchange->forwarded().wire == wire("mirror.internal"));
    CHECK(s.exchange->forwarded().klass == kDnsClassIn);
  }
  // (begin()'s queries went out without waiting for their answers.)
  REQUIRE(eventually([&] { return up.log().size() == 1 + 3 * 3; }));
  for (const Bytes& b : up.log()) {
    size_t end = 0;
    const std::string n = name_in(b, end);
    CHECK((n == "mirror.internal" || n == "www.example.com"));
  }
}

TEST_CASE("name gate: begin() decides at once what handle() decides, without asking", "[net][dns]") {
  LoggingDns up;
  const NameGate gate = gate_of({at(up.dns.port())}, timing(1000ms, 1, 2000ms));
  for (const Bytes& q : {query(1, "other.test", kDnsA), query(2, "www.example.com", 16), Bytes{1, 2, 3},
                         header(3, 0x0100, 0, 0)}) {
    GateStart s = gate.begin(q);
    CHECK_FALSE(s.exchange);
    const GateResult blocking = gate.handle(q);
    CHECK(s.result.reply == blocking.reply);
    CHECK(s.result.outcome == blocking.outcome);
  }
  CHECK(up.log().empty());
}

TEST_CASE("name gate: an exchange driven by a poller gives handle()'s answer", "[net][dns]") {
  LoggingDns up;
  const NameGate gate = gate_of({at(up.dns.port())}, timing(1000ms, 2, 4000ms));
  const Bytes q = query(0x77, "Api.Example.com", kDnsA);
  const GateClock::time_point t0 = GateClock::now();
  GateStart s = gate.begin(q, DnsTransport::kUdp, t0);
  REQUIRE(s.exchange);
  GateExchange& x = *s.exchange;
  CHECK_FALSE(x.done());
  CHECK(x.fd() >= 0);
  CHECK(x.tries() == 1);
  CHECK(x.deadline() == t0 + 1000ms);
  CHECK(x.result().name == "api.example.com");
  CHECK(x.result().type == kDnsA);
  drive({&x});
  REQUIRE(x.done());
  CHECK(x.fd() == -1);  // its socket is closed once done
  const GateResult blocking = gate.handle(q);
  CHECK(x.result().reply == blocking.reply);
  CHECK(x.result().name == blocking.name);
  REQUIRE(x.result().allow.size() == 1);
  CHECK(x.result().allow[0].port_lo == 443);
  CHECK(text_of(4, x.result().allow[0].addr) == "192.0.2.7");
}

TEST_CASE("name gate: retry rounds and the total deadline, step by step", "[net][dns]") {
  FakeDns a = silent_dns(), b = silent_dns();
  // Three rounds over two upstreams would be six tries of 300 ms; the total of 1000 ms cuts it at four.
  const NameGate gate = gate_of({at(a.port()), at(b.port())}, timing(300ms, 3, 1000ms));
  const GateClock::time_point t0 = GateClock::now();
  GateStart s = gate.begin(query(9, "www.example.com", kDnsA), DnsTransport::kUdp, t0);
  REQUIRE(s.exchange);
  GateExchange& x = *s.exchange;
  CHECK(x.tries() == 1);
  CHECK(x.deadline() == t0 + 300ms);
  x.on_deadline(t0 + 299ms);  // early: nothing happens
  CHECK(x.tries() == 1);
  x.on_deadline(t0 + 300ms);
  CHECK(x.tries() == 2);
  CHECK(x.deadline() == t0 + 600ms);
  x.on_deadline(t0 + 600ms);
  CHECK(x.tries() == 3);
  CHECK(x.deadline() == t0 + 900ms);
  x.on_deadline(t0 + 900ms);
  CHECK(x.tries() == 4);
  CHECK(x.deadline() == t0 + 1000ms);  // the total's end, not a whole try
  CHECK_FALSE(x.done());
  x.on_deadline(t0 + 1000ms);
  REQUIRE(x.done());
  CHECK(x.tries() == 4);
  CHECK(rcode_of(x.result()) == kDnsServFail);
  CHECK(count_of(x.result().outcome, "timed out") == 4);
  CHECK(x.result().allow.empty());
  CHECK(eventually([&] { return a.queries() == 2 && b.queries() == 2; }));  // each upstream, in turn

  // The blocking form keeps the same budget in real time.
  const auto start = std::chrono::steady_clock::now();
  const GateResult r = gate.handle(query(9, "www.example.com", kDnsA));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(rcode_of(r) == kDnsServFail);
  CHECK(took >= 990ms);
  CHECK(took < 2500ms);  // (a loaded host's scheduling on top of the 1 s budget)
}

TEST_CASE("name gate: an unreachable upstream ends its try at once", "[net][dns]") {
  // A port nothing listens on: the ICMP port unreachable ends the try, long before its 2 s.
  uint16_t closed = 0;
  {
    FakeDns gone = silent_dns();
    closed = gone.port();
  }
  LoggingDns good;
  const NameGate gate = gate_of({at(closed), at(good.dns.port())}, timing(2000ms, 1, 4000ms));
  const auto start = std::chrono::steady_clock::now();
  const GateResult r = gate.handle(query(4, "www.example.com", kDnsA));
  INFO(r.outcome);
  CHECK(std::chrono::steady_clock::now() - start < 1000ms);
  CHECK(rcode_of(r) == kDnsNoError);
  CHECK(r.outcome.find("answered by " + at(good.dns.port())) != std::string::npos);
}

TEST_CASE("name gate: many exchanges wait at once, none holds up another", "[net][dns]") {
  FakeDns slow = silent_dns();
  LoggingDns fast;
  const NameGate slow_gate = gate_of({at(slow.port())}, timing(400ms, 2, 800ms));
  const NameGate fast_gate = gate_of({at(fast.dns.port())}, timing(400ms, 2, 800ms));
  std::vector<std::unique_ptr<GateExchange>> waiting;
  for (int i = 0; i < 32; ++i) {
    GateStart s = slow_gate.begin(query(static_cast<uint16_t>(i), "www.example.com", kDnsA));
    REQUIRE(s.exchange);
    waiting.push_back(std::move(s.exchange));
  }
  const auto start = std::chrono::steady_clock::now();
  GateStart quick = fast_gate.begin(query(100, "www.example.com", kDnsA));
  REQUIRE(quick.exchange);
  std::vector<GateExchange*> all{quick.exchange.get()};
  for (auto& x : waiting) all.push_back(x.get());
  drive(all, [&] { return quick.exchange->done(); });
  const auto fast_took = std::chrono::steady_clock::now() - start;
  CHECK(fast_took < 700ms);  // before the slow ones' first 400 ms try could even end twice
  CHECK(rcode_of(quick.exchange->result()) == kDnsNoError);
  for (auto& x : waiting) CHECK_FALSE(x->done());
  drive(all);
  const auto all_took = std::chrono::steady_clock::now() - start;
  // 32 queries of 800 ms each, all waiting at once: about 800 ms, not 32 times that (25.6 s).
  CHECK(all_took < 4000ms);
  for (auto& x : waiting) {
    REQUIRE(x->done());
    CHECK(rcode_of(x->result()) == kDnsServFail);
  }
  CHECK(eventually([&] { return slow.queries() == 64; }));
}
