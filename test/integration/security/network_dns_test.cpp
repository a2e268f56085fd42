// Rules by name end to end, short of the node's gateway: a DNS server the test runs on the host's loopback
// answers the name gate; the addresses the gate accepts go into a real sandbox's allowlist
// (host::add_resolved_addresses, as the gateway will call it), and the sandbox's connects through
// the fake internet of net_world.hpp show what the cgroup hooks now allow — and that the static rules, an
// update, expiry and a lying upstream behave as docs/NETWORK.md says.
#include <arpa/inet.h>
#include <fcntl.h>

#include <chrono>
#include <thread>

#include "backends/host/sandbox_net.hpp"
#include "integration/security/net_world.hpp"
#include "network/dns/gate_allowlist.hpp"
#include "network/dns/name_gate.hpp"
#include "policy/net_filter.hpp"
#include "unit/dns_test_support.hpp"

using namespace net_world;
using namespace dns_test;
namespace snet = sandlet::net;
namespace policy = sandlet::policy;

namespace {

// mirror.internal: 10.250.0.1 — plus 10.250.0.3 under another owner, which the gate must ignore.
std::vector<Bytes> answer(const Bytes& q) {
  size_t p = 12;
  while (q[p] != 0) p += 1 + q[p];
  Bytes out = header(static_cast<uint16_t>(q[0] << 8 | q[1]), 0x8180, 1, 2);
  out.insert(out.end(), q.begin() + 12, q.begin() + static_cast<long>(p + 5));
  rr(out, ptr(12), 1, 30, v4("10.250.0.1"));
  rr(out, wire("other.internal"), 1, 30, v4("10.250.0.3"));
  return {out};
}

sandlet::NetAllowRule mirror_rule() {
  sandlet::NetAllowRule r;
  r.host = "mirror.internal";
  r.protocols = sandlet::kNetTcp;
  r.port_lo = r.port_hi = 443;
  return r;
}

}  // namespace

TEST_CASE("network by name: resolved addresses open the rule's ports, beside the static rules", "[network][dns]") {
  if (!have_fake_internet()) return;
  FakeInternet inet;
  FakeDns dns(answer);
  Harness h;
  auto sb = create_with(h, R"({"allow": [{"cidr": "10.250.0.3", "ports": "80", "protocol": "tcp"}]})");
  inet.wire(init_pid_of(sb));
  const std::string group = cgroup_of(sb), id = sb.id();
  CHECK(probe(sb, {"tcp", "10.250.0.1", "443"}) == "ERR EPERM");

  const std::vector<sandlet::NetAllowRule> rules = {mirror_rule()};
  snet::DnsUpstream up = *snet::dns_upstream_of("127.0.0.1:" + std::to_string(dns.port()));
  const snet::NameGate gate(rules, {up});
  const snet::GateResult r = gate.handle(query(0x77, "mirror.internal", 1));
  INFO(r.outcome);
  REQUIRE(r.allow.size() == 1);
  const uint32_t now = policy::net_clock_now();
  CHECK(sandlet::host::add_resolved_addresses(group, id, snet::resolved_of(r, rules, now)) == 0);

  CHECK(probe(sb, {"tcp", "10.250.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"tcp", "::ffff:10.250.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"tcp", "10.250.0.1", "80"}) == "ERR EPERM");   // only the rule's port
  CHECK(probe(sb, {"udp", "10.250.0.1", "53"}) == "ERR EPERM");   // and protocol
  CHECK(probe(sb, {"tcp", "10.250.0.3", "443"}) == "ERR EPERM");  // the upstream's extra address
  CHECK(probe(sb, {"tcp", "10.250.0.3", "80"}) == "OK tcp-echo");  // the static rule is still there
  const auto set = sandlet::host::resolved_addresses(group, id);
  REQUIRE(set.size() == 1);
  CHECK(set[0].expires == now + sandlet::kNetResolvedTtlFloor);  // TTL 30 is below the floor

  // A rebuild of the rules' part that keeps the rule by name (what an update with the same host rule
  // does) keeps the address; one without it (today's updates: rules by name are refused) drops it.
  {
    const sandlet::sys::UniqueFd fd(::open(group.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto filter = policy::NetFilter::open_attached(fd.get());
    REQUIRE(filter);
    REQUIRE(filter->holds_resolved());
    sandlet::NetAllowRule udp;
    udp.family = 4;
    udp.addr = {10, 250, 0, 0};
    udp.prefix = 24;
    udp.protocols = sandlet::kNetUdp;
    udp.port_lo = udp.port_hi = 53;
    const std::vector<uint32_t> keep = {policy::net_rule_tag(mirror_rule())};
    filter->set_rules(policy::compile_net_rules({udp}), &keep);
  }
  CHECK(probe(sb, {"tcp", "10.250.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"udp", "10.250.0.1", "53"}) == "OK udp-echo");
  CHECK(probe(sb, {"tcp", "10.250.0.3", "80"}) == "ERR EPERM");  // the old static rule is gone
  sb.net_update(R"({"allow": ["tcp:10.250.0.3:80"]})");
  CHECK(probe(sb, {"tcp", "10.250.0.1", "443"}) == "ERR EPERM");
  CHECK(probe(sb, {"tcp", "10.250.0.3", "80"}) == "OK tcp-echo");
  CHECK(sandlet::host::resolved_addresses(group, id).empty());

  // Expiry: a record past its time leaves at the next add or prune (an empty add).
  policy::NetResolved soon = snet::resolved_of(r, rules, now).at(0);
  soon.expires = policy::net_clock_now() + 2;
  sandlet::host::add_resolved_addresses(group, id, {soon});
  CHECK(probe(sb, {"tcp", "10.250.0.1", "443"}) == "OK tcp-echo");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  sandlet::host::add_resolved_addresses(group, id, {});
  CHECK(probe(sb, {"tcp", "10.250.0.1", "443"}) == "ERR EPERM");
  CHECK(probe(sb, {"tcp", "10.250.0.3", "80"}) == "OK tcp-echo");

  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("network by name: a sandbox without a filter has no resolved set", "[network][dns]") {
  Harness h;
  auto plain = h.rt().create(Harness::spec());
  CHECK_THROWS(sandlet::host::add_resolved_addresses(cgroup_of(plain), plain.id(), {}));  // FAILED_PRECONDITION
  plain.destroy();
  h.check_no_leaks();
}
