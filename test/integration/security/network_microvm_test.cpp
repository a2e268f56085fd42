// A microVM's network (docs/backends/microvm.md, "Network"): QEMU's user-mode network stack turns the
// guest's traffic into QEMU's own sockets, in QEMU's jailed namespace and cgroup, so the allowlist filter
// and the node gateway of containers apply unchanged. One VM carries every check (boots are slow under
// TCG). In the fake uplink of gateway_world.hpp; skipped where the microvm backend is unavailable.
#include <boost/json.hpp>

#include <atomic>

#include "integration/security/gateway_world.hpp"
#include "unit/dns_test_support.hpp"

using namespace gateway_world;
using namespace dns_test;
using net_world::probe;

namespace {

bool have_microvm(Harness& h) {
  for (auto& b : h.rt().backends())
    if (b.name == "microvm") {
      if (!b.available) std::cout << "SANDLET-SKIP: the microvm backend is unavailable: " << b.reason << std::endl;
      return b.available;
    }
  std::cout << "SANDLET-SKIP: no microvm backend in this build" << std::endl;
  return false;
}

// mirror.test is 198.19.0.1 (routed by the uplink); other names do not exist.
std::vector<Bytes> zone(const Bytes& q) {
  if (q.size() < 17) return {};
  const std::string name = name_of(q);
  size_t p = 12;
  while (p < q.size() && q[p] != 0) p += 1 + q[p];
  if (p + 5 > q.size()) return {};
  const uint16_t type = static_cast<uint16_t>(q[p + 1] << 8 | q[p + 2]);
  const bool a = name == "mirror.test" && type == 1;
  Bytes out = header(static_cast<uint16_t>(q[0] << 8 | q[1]), name == "mirror.test" ? 0x8180 : 0x8183, 1, a ? 1 : 0);
  out.insert(out.end(), q.begin() + 12, q.begin() + static_cast<long>(p + 5));
  if (a) rr(out, ptr(12), 1, 30, v4("198.19.0.1"));
  return {out};
}

// A port free on the uplink's 127.0.0.1 now.
int free_port(const FakeUplink& up) {
  int port = 0;
  up.inside([&] {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t l = sizeof a;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &l);
    port = ntohs(a.sin_port);
    ::close(s);
  });
  return port;
}

// One exchange with 127.0.0.1:`port` of the uplink (a published port): what came back, or "ERR".
std::string exchange_published(const FakeUplink& up, int port) {
  std::string got = "ERR";
  up.inside([&] {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{10, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::send(s, "hi\n", 3, MSG_NOSIGNAL) == 3) {
      char buf[64];
      const ssize_t n = ::recv(s, buf, sizeof buf, 0);
      if (n > 0) got.assign(buf, static_cast<size_t>(n));
      if (!got.empty() && got.back() == '\n') got.pop_back();
    }
    ::close(s);
  });
  return got;
}

// A refused destination, as the guest sees it: QEMU's connect() fails (the cgroup filter) and QEMU resets
// the guest's connection; a datagram is dropped.
bool refused(const std::string& outcome) { return outcome.rfind("ERR", 0) == 0; }

}  // namespace

TEST_CASE("microvm network: the allowlist, the gateway, the resolver and published ports apply to a VM",
          "[microvm][network]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  FakeDns upstream{zone, up.elsewhere_netns(), "198.19.0.53", 53};
  Harness h;
  if (!have_microvm(h)) return;
  const int port = free_port(up);
  REQUIRE(port > 0);
  const std::string policy = R"({"allow": ["tcp:198.18.0.1:443", "tcp:[fd00:18::1]:443", "udp:198.18.0.1:53",
                                           {"host": "mirror.test", "ports": 443, "protocol": "tcp"}],
                                 "dns": ["198.19.0.53"],
                                 "publish": [{"host_port": )" + std::to_string(port) + R"(, "port": 8080}]})";
  auto sb = h.rt().create(Harness::spec().backend("microvm").network_json(policy));
  sb.write_file("/tmp/net-probe", slurp(SANDLET_NET_PROBE), 0755);
  CHECK(gateway_pid(h.root()) > 0);

  // Allowed destinations are reached through the gateway; the others are refused by the cgroup filter on
  // QEMU's sockets, the uplink's own addresses included.
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"udp", "198.18.0.1", "53"}) == "OK udp-echo");
  CHECK(refused(probe(sb, {"tcp", "198.18.0.1", "80"})));
  CHECK(refused(probe(sb, {"tcp", "198.18.0.2", "443"})));
  CHECK(refused(probe(sb, {"tcp", "198.19.0.1", "80"})));
  // IPv6 configures itself from QEMU's router advertisements.
  CHECK(wait_until([&] { return probe(sb, {"tcp", "fd00:18::1", "443"}) == "OK tcp-echo"; }, 10));

  // The resolver (written to /etc/resolv.conf) answers allowed names and opens their addresses.
  CHECK(sb.exec({"cat", "/etc/resolv.conf"}).stdout_data.find("169.254.53.53") != std::string::npos);
  CHECK(probe(sb, {"dns", "conf", "mirror.test"}) == "OK 198.19.0.1");
  CHECK(probe(sb, {"dns", "conf", "other.test"}) == "RCODE 5");
  CHECK(probe(sb, {"tcp", "198.19.0.1", "443"}) == "OK tcp-echo");

  // A published port reaches a server in the guest that listens on the guest's address (QEMU forwards to
  // 10.0.2.15, not to the guest's loopback).
  std::atomic<bool> served{false};
  std::string serve_out;
  sandlet::ExecOptions srv({"/tmp/net-probe", "tcp-serve", "8080", "0.0.0.0"});
  srv.timeout_s = 30;
  sb.exec_async(srv, [&](const sandlet::Error*, sandlet::ExecResult r) {
    serve_out = r.stdout_data;
    served = true;
  });
  REQUIRE(wait_until([&] { return sb.exec({"sh", "-c", "grep -q '00000000:1F90 00000000:0000 0A' /proc/net/tcp"}).exit_code == 0; }, 15));
  CHECK(exchange_published(up, port) == "inside-echo");
  REQUIRE(wait_until([&] { return served.load(); }, 30));
  CHECK(serve_out == "OK served\n");

  // Counters, then an update to deny-all: new connections stop.
  const boost::json::object stats = boost::json::parse(sb.net_stats_json()).as_object();
  INFO(boost::json::serialize(stats));
  CHECK(stats.at("connect_denied").to_number<int>() >= 3);
  CHECK(stats.at("dns").as_object().at("answered").to_number<int>() >= 1);
  sb.net_update(R"({"allow": []})");
  CHECK(refused(probe(sb, {"tcp", "198.18.0.1", "443"})));
  sb.net_update(R"({"allow": ["tcp:198.18.0.1:443"]})");
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");

  // A gateway killed with its supervisor: the next call that needs one starts it and re-attaches the VM.
  const pid_t first = gateway_pid(h.root());
  REQUIRE(first > 0);
  REQUIRE(kill_gateway(first));
  REQUIRE(wait_until([&] { return gateway_pid(h.root()) == 0; }, 10));
  sb.net_update(R"({"allow": ["tcp:198.18.0.1:443"]})");
  CHECK(gateway_pid(h.root()) > 0);
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");
  sb.destroy();
  expect_clean_end(h);
}

TEST_CASE("microvm network: \"none\" gives the VM no interface but loopback", "[microvm][network]") {
  Harness h;
  if (!have_microvm(h)) return;
  auto sb = h.rt().create(Harness::spec().backend("microvm"));
  const std::string links = sb.exec({"sh", "-c", "ls /sys/class/net"}).stdout_data;
  CHECK(links == "lo\n");
  sb.destroy();
  h.check_no_leaks();
}
