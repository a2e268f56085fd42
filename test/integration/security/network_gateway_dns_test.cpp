// Rules by DNS name end to end (docs/NETWORK.md, "DNS by name"): the sandbox resolves through its resolver
// address, the node gateway's name gate asks a fake upstream inside the fake uplink (gateway_world.hpp),
// and what it answers for an allowed name is in the sandbox's allowlist before the answer arrives.
#include <boost/json.hpp>

#include "integration/security/gateway_world.hpp"
#include "unit/dns_test_support.hpp"

using namespace gateway_world;
using namespace dns_test;
using net_world::create_with;
using net_world::probe;

namespace {

// The fake zone: mirror.test is 198.19.0.1 (routed by the uplink), host.test is 198.18.0.1 (one of the
// uplink's own addresses, which no answer may open); other names do not exist.
std::vector<Bytes> zone(const Bytes& q) {
  if (q.size() < 17) return {};
  const std::string name = name_of(q);
  size_t p = 12;
  while (p < q.size() && q[p] != 0) p += 1 + q[p];
  if (p + 5 > q.size()) return {};
  const uint16_t type = static_cast<uint16_t>(q[p + 1] << 8 | q[p + 2]);
  const bool known = name == "mirror.test" || name == "host.test";
  const bool a = known && type == 1;
  Bytes out = header(static_cast<uint16_t>(q[0] << 8 | q[1]), known ? 0x8180 : 0x8183, 1, a ? 1 : 0);
  out.insert(out.end(), q.begin() + 12, q.begin() + static_cast<long>(p + 5));
  if (a) rr(out, ptr(12), 1, 30, v4(name == "mirror.test" ? "198.19.0.1" : "198.18.0.1"));
  return {out};
}

constexpr const char* kPolicy = R"({"allow": [{"host": "mirror.test", "ports": 443, "protocol": "tcp"},
                                            {"host": "host.test", "ports": 443, "protocol": "tcp"}],
                                   "dns": ["198.19.0.53"]})";

// The fake uplink with the zone's upstream resolver in it, a runtime pointed at it, one sandbox of kPolicy.
struct DnsWorld {
  FakeUplink up;
  UplinkEnv env{up};
  FakeDns upstream{zone, up.elsewhere_netns(), "198.19.0.53", 53};
  Harness h;
  sandlet::Sandbox sb = create_with(h, kPolicy);
};

}  // namespace

TEST_CASE("network by name: the sandbox's resolver answers allowed names and opens their addresses", "[network][gateway][dns]") {
  if (!have_tools()) return;
  DnsWorld w;
  auto& [up, env, upstream, h, sb] = w;
  const std::string id = sb.id();
  CHECK_THAT(sb.exec({"cat", "/etc/resolv.conf"}).stdout_data, Catch::Contains("nameserver 169.254.53.53"));

  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "ERR EPERM");  // not before the name is resolved
  CHECK(probe(sb, {"dns", "conf", "mirror.test"}) == "OK 198.19.0.1");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "80"}) == "ERR EPERM");  // only the rule's port
  // Over TCP, and at the IPv6 resolver address.
  CHECK(probe(sb, {"dns", "conf", "mirror.test", "tcp"}) == "OK 198.19.0.1");
  CHECK(probe(sb, {"dns", "fd5a:6e1e:7000::53", "mirror.test"}) == "OK 198.19.0.1");
  // A name in no rule is refused without asking the upstream.
  const int asked = upstream.queries();
  CHECK(probe(sb, {"dns", "conf", "other.test"}) == "RCODE 5");
  CHECK(upstream.queries() == asked);
  // An answer naming the uplink's own address is passed on, but the allowlist does not take it.
  CHECK(probe(sb, {"dns", "conf", "host.test"}) == "OK 198.18.0.1");
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "ERR EPERM");
  // The upstream itself is not reachable from inside (no tunnelling past the gate).
  CHECK(probe(sb, {"dns", "198.19.0.53", "mirror.test"}) == "ERR EPERM");

  const boost::json::object stats = boost::json::parse(sb.net_stats_json()).as_object();
  const boost::json::object& dns = stats.at("dns").as_object();
  CHECK(dns.at("answered").to_number<int>() == 4);
  CHECK(dns.at("refused").to_number<int>() == 1);

  // An update without the rule drops its addresses and its name; one without `dns` closes the resolver.
  sb.net_update(R"({"allow": [], "dns": ["198.19.0.53"]})");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "ERR EPERM");
  CHECK(probe(sb, {"dns", "conf", "mirror.test"}) == "RCODE 5");
  sb.net_update(R"({"allow": []})");
  CHECK(probe(sb, {"dns", "conf", "mirror.test"}) == "ERR EPERM");
  sb.destroy();

  // The decisions reach the audit log when the sandbox ends: refusals as denials, answers as events.
  auto reader = sandlet::AuditReader::open(h.rt().audit_path(), sandlet::AuditFilter{id});
  int answered = 0, refused = 0;
  while (auto line = reader.next()) {
    if (line->find(R"("event":"dns")") != std::string::npos && line->find(R"("name":"mirror.test")") != std::string::npos)
      ++answered;
    if (line->find(R"("event":"denial")") != std::string::npos && line->find(R"("kind":"dns")") != std::string::npos)
      ++refused;
  }
  CHECK(answered == 3);
  CHECK(refused == 2);
  expect_clean_end(h);
}

TEST_CASE("network by name: \"*\" resolves every name, and the protected ranges still hold", "[network][gateway][dns]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env{up};
  FakeDns upstream{zone, up.elsewhere_netns(), "198.19.0.53", 53};
  Harness h;
  sandlet::Sandbox sb = create_with(h, R"({"allow": [{"host": "*", "ports": 443, "protocol": "tcp"}], "dns": ["198.19.0.53"]})");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "ERR EPERM");  // an address, before any name gave it
  CHECK(probe(sb, {"dns", "conf", "mirror.test"}) == "OK 198.19.0.1");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"dns", "conf", "other.test"}) == "RCODE 3");  // asked: the upstream says it does not exist
  CHECK(probe(sb, {"dns", "conf", "host.test"}) == "OK 198.18.0.1");
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "ERR EPERM");  // the uplink's own address stays closed
  sb.destroy();
  expect_clean_end(h);
}

TEST_CASE("network by name: a restarted gateway answers again and keeps what was resolved", "[network][gateway][dns]") {
  if (!have_tools()) return;
  DnsWorld w;
  auto& [up, env, upstream, h, sb] = w;
  CHECK(probe(sb, {"dns", "conf", "mirror.test"}) == "OK 198.19.0.1");
  const pid_t first = gateway_pid(h.root());
  REQUIRE(first > 0);
  REQUIRE(kill_gateway(first));  // the supervisor and its gateway: nothing restarts it by itself
  REQUIRE(wait_until([&] { return gateway_pid(h.root()) == 0; }, 10));
  (void)sb.net_stats_json();  // starts a new gateway, which re-attaches the sandbox
  CHECK(gateway_pid(h.root()) != first);
  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "OK tcp-echo");  // the resolved set lives in the kernel
  CHECK(probe(sb, {"dns", "conf", "mirror.test"}) == "OK 198.19.0.1");
  const boost::json::object stats = boost::json::parse(sb.net_stats_json()).as_object();
  CHECK(stats.at("dns").as_object().at("answered").to_number<int>() == 2);  // the log carries on
  sb.destroy();
  expect_clean_end(h);
}

TEST_CASE("network by name from the CLI: create --allow NAME --dns, net update, net stats", "[network][gateway][dns]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  FakeDns upstream(zone, up.elsewhere_netns(), "198.19.0.53", 53);
  Harness h;
  const std::string cli = std::string(SANDLET_CLI) + " --root " + h.root() + " ";
  int st = 0;
  std::string id = host_sh(cli + "create --layer " SANDLET_TEST_ROOTFS " --allow tcp:mirror.test:443 --dns 198.19.0.53", &st);
  REQUIRE(st == 0);
  while (!id.empty() && id.back() == '\n') id.pop_back();
  auto sb = h.rt().attach(id);
  sb.write_file("/tmp/net-probe", slurp(SANDLET_NET_PROBE), 0755);
  CHECK(probe(sb, {"dns", "conf", "mirror.test"}) == "OK 198.19.0.1");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "OK tcp-echo");
  CHECK_THAT(host_sh(cli + "net stats " + id, &st), Catch::Contains(R"("answered":1)"));
  // A rule by name without --dns is refused, naming the field; --dns alone is a usage error.
  CHECK_THAT(host_sh(cli + "net update " + id + " --allow tcp:mirror.test:443 2>&1", &st), Catch::Contains("network.allow[0].host"));
  CHECK(st != 0);
  (void)host_sh(cli + "create --layer " SANDLET_TEST_ROOTFS " --dns 198.19.0.53 2>&1", &st);
  CHECK(st == 2);
  CHECK(host_sh(cli + "net update " + id + " --allow tcp:mirror.test:80 --dns 198.19.0.53", &st) == id + "\n");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "ERR EPERM");  // the old rule's address left with it
  CHECK(probe(sb, {"dns", "conf", "mirror.test"}) == "OK 198.19.0.1");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "80"}) == "OK tcp-echo");
  sb.destroy();
  expect_clean_end(h);
}
