// The sandbox's resolver under attack (issue 33, docs/NETWORK.md "DNS by name"): what reaches the upstream
// resolver is the canonical question only — not the letter case the sandbox chose, nor its flags, EDNS
// options or extra records (a covert channel out through an allowed name) — and sandboxes flooding names
// whose upstream never answers wait on themselves, not on the node: another sandbox's lookups stay fast.
// Fake upstreams in the fake uplink (gateway_world.hpp) log the exact bytes they receive.
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "integration/security/gateway_world.hpp"
#include "unit/dns_test_support.hpp"

using namespace gateway_world;
using namespace dns_test;
using net_world::create_with;
using net_world::probe;
using sandlet::net::kDnsA;
using sandlet::net::kDnsOpt;

namespace {

// The zone: mirror.test is 198.19.0.1; names under slow.test are never answered (the query is dropped);
// others do not exist. Every query's bytes are kept.
class Zone {
 public:
  std::vector<Bytes> answer(const Bytes& q) {
    std::string name;
    size_t p = 12;
    while (p < q.size() && q[p] != 0 && p + 1 + q[p] <= q.size()) {
      if (!name.empty()) name += '.';
      name.append(q.begin() + static_cast<long>(p + 1), q.begin() + static_cast<long>(p + 1 + q[p]));
      p += 1 + q[p];
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      seen_.push_back(q);
      if (name.size() > 10 && name.substr(name.size() - 10) == ".slow.test") ++slow_;
    }
    if (p + 5 > q.size() || name.find(".slow.test") != std::string::npos) return {};
    const uint16_t type = static_cast<uint16_t>(q[p + 1] << 8 | q[p + 2]);
    const bool known = name == "mirror.test";
    const bool a = known && type == kDnsA;
    Bytes out = header(static_cast<uint16_t>(q[0] << 8 | q[1]), known ? 0x8180 : 0x8183, 1, a ? 1 : 0);
    out.insert(out.end(), q.begin() + 12, q.begin() + static_cast<long>(p + 5));
    if (a) rr(out, ptr(12), kDnsA, 30, v4("198.19.0.1"));
    return {out};
  }
  std::vector<Bytes> seen() {
    std::lock_guard<std::mutex> lk(mu_);
    return seen_;
  }
  int slow() {
    std::lock_guard<std::mutex> lk(mu_);
    return slow_;
  }

 private:
  std::mutex mu_;
  std::vector<Bytes> seen_;
  int slow_ = 0;
};

std::string hex(const Bytes& b) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t c : b) out += {digits[c >> 4], digits[c & 15]};
  return out;
}

// "KEY n KEY n ..." -> the number after `key`.
long field(const std::string& line, const std::string& key) {
  std::istringstream in(line);
  for (std::string word; in >> word;) {
    long v = 0;
    if (word == key && in >> v) return v;
  }
  return -1;
}

}  // namespace

TEST_CASE("network by name: the upstream sees only the canonical question, whatever the sandbox sends", "[network][gateway][dns]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  auto zone = std::make_shared<Zone>();
  FakeDns upstream([zone](const Bytes& q) { return zone->answer(q); }, up.elsewhere_netns(), "198.19.0.53", 53);
  Harness h;
  auto sb = create_with(h, R"({"allow": [{"host": "mirror.test", "ports": 443, "protocol": "tcp"}],
                               "dns": ["198.19.0.53"]})");

  CHECK(probe(sb, {"dns", "conf", "MiRrOr.TeSt"}) == "OK 198.19.0.1");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"dns", "conf", "MIRROR.TEST", "tcp"}) == "OK 198.19.0.1");
  // Every flag, a record in each section, an OPT with options: the answer still comes, to the question as
  // the sandbox wrote it.
  CHECK(probe(sb, {"dns-wire", "conf", hex(hostile_query(0x1234, "mIrRoR.tEsT"))}) == "RCODE 0 QNAME mIrRoR.tEsT");

  // What the upstream received, byte for byte but for the gateway's own random id: RD only, the name in
  // lower case, type A class IN, the gateway's own OPT without options. Nothing else.
  const std::vector<Bytes> seen = zone->seen();
  CHECK(seen.size() == 3);
  for (const Bytes& got : seen) {
    REQUIRE(got.size() > 2);
    Bytes want = header(static_cast<uint16_t>(got[0] << 8 | got[1]), 0x0100, 1, 0, 0, 1);
    question(want, "mirror.test", kDnsA);
    rr(want, {0}, kDnsOpt, 0, {}, 1232);
    CHECK(hex(got) == hex(want));
    const std::string text(got.begin(), got.end());
    CHECK(text.find("ecret") == std::string::npos);
    CHECK(text.find("ECRET") == std::string::npos);
  }
  sb.destroy();
  expect_clean_end(h);
}

TEST_CASE("network by name: sandboxes whose names are never answered do not slow another's lookups", "[network][gateway][dns]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  auto zone = std::make_shared<Zone>();
  // Two upstreams: a name neither answers takes the whole budget, two rounds of 1 s tries, 4 s.
  FakeDns first([zone](const Bytes& q) { return zone->answer(q); }, up.elsewhere_netns(), "198.19.0.53", 53);
  FakeDns second([zone](const Bytes& q) { return zone->answer(q); }, up.elsewhere_netns(), "198.19.0.54", 53);
  const std::string policy = R"({"allow": [{"host": "mirror.test", "ports": 443, "protocol": "tcp"},
                                           {"host": "*.slow.test", "ports": 443, "protocol": "tcp"}],
                                 "dns": ["198.19.0.53", "198.19.0.54"]})";
  Harness h;
  auto innocent = create_with(h, policy);
  std::vector<sandlet::Sandbox> flooders;
  for (int i = 0; i < 3; ++i) flooders.push_back(create_with(h, policy));
  CHECK(probe(innocent, {"dns", "conf", "mirror.test"}) == "OK 198.19.0.1");  // the gateway is up

  // Each flooder asks 16 slow names at once: 8 are taken (the per-sandbox bound), 8 dropped (the probe
  // gives up on those after 6.5 s).
  std::vector<std::string> floods(flooders.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < flooders.size(); ++i)
    threads.emplace_back([&, i] {
      floods[i] = probe(flooders[i], {"dns-flood", "conf", "f" + std::to_string(i) + ".slow.test", "16", "6500"}, 30);
    });
  // Once the upstream holds the flood (old design: every worker of the node waiting on it).
  CHECK(wait_until([&] { return zone->slow() >= 8; }, 10));
  std::vector<long> latency;
  for (int i = 0; i < 3; ++i) {
    const std::string out = probe(innocent, {"dns-time", "conf", "mirror.test"});
    CHECK(out.rfind("OK 198.19.0.1\n", 0) == 0);
    latency.push_back(field(out, "MS"));
  }
  for (std::thread& t : threads) t.join();
  const long worst = *std::max_element(latency.begin(), latency.end());
  std::cout << "innocent sandbox's lookups during the flood: " << latency[0] << ", " << latency[1] << ", "
            << latency[2] << " ms (bound 2000 ms)" << std::endl;
  CHECK(worst >= 0);
  // Half the 4 s that a lookup queued behind the flood waited before (room for emulated guests).
  CHECK(worst < 2000);

  for (size_t i = 0; i < flooders.size(); ++i) {
    INFO("flooder " << i << ": " << floods[i]);
    // Its own queries waited for the whole budget and failed; those over its bound were never answered.
    CHECK(field(floods[i], "SERVFAIL") == 8);
    CHECK(field(floods[i], "NONE") == 8);
    CHECK(field(floods[i], "MIN_MS") >= 3500);
    CHECK(field(floods[i], "MAX_MS") <= 9000);
    const boost::json::object stats = boost::json::parse(flooders[i].net_stats_json()).as_object();
    const boost::json::object& dns = stats.at("dns").as_object();
    CHECK(dns.at("failed").to_number<int>() == 8);
    CHECK(dns.at("dropped").to_number<int>() == 8);
  }
  const boost::json::object stats = boost::json::parse(innocent.net_stats_json()).as_object();
  CHECK(stats.at("dns").as_object().at("answered").to_number<int>() == 4);
  CHECK(stats.at("dns").as_object().at("dropped").to_number<int>() == 0);

  // The drops reach the audit log when the sandbox ends.
  const std::string id = flooders[0].id();
  flooders[0].destroy();
  auto reader = sandlet::AuditReader::open(h.rt().audit_path(), sandlet::AuditFilter{id});
  int dropped = 0;
  while (auto line = reader.next())
    if (line->find(R"("verdict":"dropped")") != std::string::npos && line->find("too many queries in flight") != std::string::npos)
      ++dropped;
  CHECK(dropped == 8);
  for (size_t i = 1; i < flooders.size(); ++i) flooders[i].destroy();
  innocent.destroy();
  expect_clean_end(h);
}
