// The network allowlist enforced in the kernel (docs/NETWORK.md), reached through the fake internet of
// net_world.hpp; the filter under test is the library's, attached at create.
#include <atomic>
#include <iostream>

#include "integration/security/net_world.hpp"

using namespace net_world;

TEST_CASE("network allowlist: allowed connects work, everything else is denied", "[network][net]") {
  if (!have_fake_internet()) return;
  FakeInternet inet;
  Harness h;
  auto sb = create_with(h, R"({"allow": [{"cidr": "10.250.0.1/32", "ports": "443", "protocol": "tcp"}]})");
  inet.wire(init_pid_of(sb));

  CHECK(probe(sb, {"tcp", "10.250.0.1", "443"}) == "OK tcp-echo");
  // Other port, other address of the same host, IPv4-mapped IPv6 of the allowed address's other port.
  CHECK(probe(sb, {"tcp", "10.250.0.1", "80"}) == "ERR EPERM");
  CHECK(probe(sb, {"tcp", "10.250.0.3", "443"}) == "ERR EPERM");
  CHECK(probe(sb, {"tcp", "::ffff:10.250.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"tcp", "::ffff:10.250.0.1", "80"}) == "ERR EPERM");
  // IPv6, UDP (unconnected and connected), ICMP echo around the IPv4 TCP rule.
  CHECK(probe(sb, {"tcp", "fd99::1", "443"}) == "ERR EPERM");
  CHECK(probe(sb, {"udp", "10.250.0.1", "53"}) == "ERR EPERM");
  CHECK(probe(sb, {"udp-connected", "10.250.0.1", "53"}) == "ERR EPERM");
  CHECK(probe(sb, {"udp", "fd99::1", "53"}) == "ERR EPERM");
  CHECK(probe(sb, {"icmp", "10.250.0.1"}) == "ERR EPERM");
  // The kernel's ICMPv6 echo send path ignores the egress verdict: the request is dropped silently.
  CHECK(probe(sb, {"icmp", "fd99::1"}) == "TIMEOUT");
  // The sandbox's own loopback stays usable; the host's loopback is another namespace's.
  CHECK(probe(sb, {"tcp", "127.0.0.1", "443"}) == "ERR ECONNREFUSED");
  // A port scan of the fake host: nothing but the one allowed port answers.
  sandlet::ExecOptions scan({"sh", "-c", "for p in 1 22 53 80 443 444 8080; do /tmp/net-probe tcp 10.250.0.1 $p; done"});
  scan.timeout_s = 30;
  CHECK(sb.exec(scan).stdout_data ==
        "ERR EPERM\nERR EPERM\nERR EPERM\nERR EPERM\nOK tcp-echo\nERR EPERM\nERR EPERM\n");

  const std::string stats = sb.net_stats_json();
  INFO(stats);
  CHECK(counter(stats, "connect_denied") >= 10);
  CHECK(counter(stats, "sendmsg_denied") >= 2);
  CHECK(counter(stats, "egress_dropped") >= 2);  // the two pings
  // The first denials, as recorded for the audit log.
  CHECK(stats.find(R"({"seq":1,"address":"10.250.0.1","port":80,"protocol":"tcp","hook":"connect"})") != std::string::npos);
  CHECK(stats.find(R"("address":"fd99::1","port":443,"protocol":"tcp","hook":"connect")") != std::string::npos);
  CHECK(stats.find(R"("address":"10.250.0.1","port":0,"protocol":"icmp","hook":"egress")") != std::string::npos);
  const std::string id = sb.id();
  sb.destroy();
  // The denials reach the audit log when the sandbox ends, with the totals in its destroy record.
  auto reader = sandlet::AuditReader::open(h.rt().audit_path(), sandlet::AuditFilter{id});
  size_t denials = 0;
  bool totals = false;
  while (auto line = reader.next()) {
    if (line->find(R"("event":"denial")") != std::string::npos && line->find(R"("kind":"network")") != std::string::npos)
      ++denials;
    if (line->find(R"("event":"destroy")") != std::string::npos && line->find(R"("connect_denied":)") != std::string::npos)
      totals = true;
  }
  CHECK(denials >= 10);
  CHECK(totals);
  h.check_no_leaks();
}

TEST_CASE("network allowlist: IPv6 and UDP rules, and root inside cannot lift the filter", "[network][net]") {
  if (!have_fake_internet()) return;
  FakeInternet inet;
  Harness h;
  auto sb = create_with(h, R"({"allow": [{"cidr": "fd99::/64", "ports": "443-444", "protocol": "tcp"},
                                         {"cidr": "10.250.0.0/24", "ports": "53", "protocol": "udp"},
                                         {"cidr": "fd99::3", "protocol": "icmp"}]})");
  inet.wire(init_pid_of(sb));
  CHECK(probe(sb, {"tcp", "fd99::1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"tcp", "fd99::1", "80"}) == "ERR EPERM");
  CHECK(probe(sb, {"udp", "10.250.0.1", "53"}) == "OK udp-echo");
  // (Connected to .1: the fake host's wildcard UDP socket answers from its primary address.)
  CHECK(probe(sb, {"udp-connected", "10.250.0.1", "53"}) == "OK udp-echo");
  CHECK(probe(sb, {"tcp", "10.250.0.1", "53"}) == "ERR EPERM");
  CHECK(probe(sb, {"icmp", "fd99::3"}) == "OK reply");
  CHECK(probe(sb, {"icmp", "fd99::1"}) == "TIMEOUT");  // dropped (see above)
  // Root inside has no bpf(), no CAP_NET_ADMIN over its namespace, and cannot leave its cgroup's filter.
  CHECK(sb.exec({"ip", "link", "set", "lo", "down"}).exit_code != 0);
  CHECK(sb.exec({"ip", "addr", "add", "10.250.0.9/24", "dev", "lo"}).exit_code != 0);
  CHECK(probe(sb, {"tcp", "fd99::1", "80"}) == "ERR EPERM");
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("network update: atomic replace; open connections stay but their packets are checked", "[network][net]") {
  if (!have_fake_internet()) return;
  FakeInternet inet;
  Harness h;
  auto sb = create_with(h, R"({"allow": [{"cidr": "10.250.0.1", "ports": "443", "protocol": "tcp"}]})");
  inet.wire(init_pid_of(sb));
  CHECK(probe(sb, {"udp", "10.250.0.1", "53"}) == "ERR EPERM");

  // A connection opened under the old rules, exchanging once before and once after a deny-all.
  std::atomic<bool> done{false};
  std::string held;
  sandlet::ExecOptions hold({"/tmp/net-probe", "tcp-hold", "10.250.0.1", "443", "/tmp/go"});
  hold.timeout_s = 30;
  sb.exec_async(hold, [&](const sandlet::Error*, sandlet::ExecResult res) {
    held = res.stdout_data;
    done = true;
  });
  REQUIRE(wait_until([&] { return sb.exec({"sh", "-c", "ps | grep -q '[t]cp-hold'"}).exit_code == 0; }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its first exchange (2 s budget)

  const auto t0 = std::chrono::steady_clock::now();
  sb.net_update(R"({"allow": ["udp:10.250.0.0/24:53"]})");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  INFO("update took " << ms << " ms");
  CHECK(probe(sb, {"udp", "10.250.0.1", "53"}) == "OK udp-echo");
  CHECK(probe(sb, {"tcp", "10.250.0.1", "443"}) == "ERR EPERM");
  sb.write_file("/tmp/go", "", 0644);
  REQUIRE(wait_until([&] { return done.load(); }, 25));
  CHECK(held == "FIRST OK tcp-echo\nSECOND TIMEOUT\n");
  CHECK(sb.info_json().find("10.250.0.0/24") != std::string::npos);  // the record follows

  sb.net_update(R"({"allow": []})");
  CHECK(probe(sb, {"udp", "10.250.0.1", "53"}) == "ERR EPERM");
  CHECK_THROWS_AS(sb.net_update(R"({"allow": [{"cidr": "10.0.0.1/8"}]})"), sandlet::Error);
  CHECK_THROWS_AS(sb.net_update(R"({"publish": [{"port": 80}]})"), sandlet::Error);

  // A sandbox created with "none" has no filter to update.
  auto plain = h.rt().create(Harness::spec());
  CHECK_THROWS_AS(plain.net_update(R"({"allow": []})"), sandlet::Error);
  CHECK(plain.net_stats_json().find("\"filtered\":false") != std::string::npos);
  plain.destroy();
  sb.destroy();
  h.check_no_leaks();
}

TEST_CASE("network: a policy the compiler cannot take is refused at create, naming the field", "[network][net]") {
  Harness h;
  auto create = [&](const std::string& policy) {
    try {
      h.rt().create(Harness::spec().network_json(policy));
    } catch (const sandlet::Error& e) {
      return std::string(e.what());
    }
    return std::string("created");
  };
  CHECK_THAT(create(R"({"allow": [{"cidr": "10.0.0.0/33"}]})"), Catch::Contains("network.allow[0].cidr"));
  h.check_no_leaks();
}
