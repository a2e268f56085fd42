// Connectivity through the node's network gateway (docs/NETWORK.md, "Connectivity"), in the fake uplink
// of gateway_world.hpp.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <vector>

#include "integration/security/gateway_world.hpp"

using namespace gateway_world;
using net_world::create_with;
using net_world::probe;

namespace {

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

// One exchange with 127.0.0.1:`port` of the uplink: what came back (or "ERR").
std::string exchange_published(const FakeUplink& up, int port) {
  std::string got = "ERR";
  up.inside([&] {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
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

}  // namespace

TEST_CASE("network gateway: allowed TCP and UDP reach the uplink, everything else is refused", "[network][gateway]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  Harness h;
  auto sb = create_with(h, R"({"allow": ["tcp:198.18.0.1:443", "tcp:[fd00:18::1]:443", "udp:198.18.0.1:53", "udp:[fd00:18::1]:53"]})");
  CHECK(gateway_pid(h.root()) > 0);
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"tcp", "fd00:18::1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"tcp", "::ffff:198.18.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"udp", "198.18.0.1", "53"}) == "OK udp-echo");
  CHECK(probe(sb, {"udp-connected", "198.18.0.1", "53"}) == "OK udp-echo");
  CHECK(probe(sb, {"udp", "fd00:18::1", "53"}) == "OK udp-echo");
  // Denied by the cgroup hooks before the gateway sees anything.
  CHECK(probe(sb, {"tcp", "198.18.0.1", "80"}) == "ERR EPERM");
  CHECK(probe(sb, {"tcp", "198.18.0.2", "443"}) == "ERR EPERM");
  CHECK(probe(sb, {"udp", "fd00:18::1", "5353"}) == "ERR EPERM");
  // The sandbox's own loopback is untouched by the steering.
  CHECK(probe(sb, {"tcp", "127.0.0.1", "443"}) == "ERR ECONNREFUSED");
  // The gateway's listeners sit on the sandbox's loopback: reached directly, the gateway refuses (a
  // loopback destination) and resets the connection.
  const std::string tcp_table = sb.exec({"cat", "/proc/net/tcp"}).stdout_data;
  std::istringstream lines(tcp_table);
  int gw_port = 0;
  for (std::string line; std::getline(lines, line);) {
    unsigned a = 0, port = 0, st = 0;
    if (std::sscanf(line.c_str(), " %*d: %8X:%4X %*8X:%*4X %2X", &a, &port, &st) == 3 && a == 0x0100007f && st == 0x0a)
      gw_port = static_cast<int>(port);
  }
  REQUIRE(gw_port > 0);
  const std::string direct = probe(sb, {"tcp", "127.0.0.1", std::to_string(gw_port)});
  CHECK((direct == "ERR ECONNRESET" || direct == "OK (eof)"));

  // deny-all: new connections stop.
  sb.net_update(R"({"allow": []})");
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "ERR EPERM");
  CHECK(probe(sb, {"udp", "198.18.0.1", "53"}) == "ERR EPERM");
  sb.net_update(R"({"allow": ["tcp:198.18.0.1:443"]})");
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");
  CHECK(sb.info_json().find("\"net_gateway\":true") != std::string::npos);
  sb.destroy();
  expect_clean_end(h);
}

TEST_CASE("network gateway: the uplink's own addresses need a rule naming them", "[network][gateway]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  Harness h;
  auto wide = create_with(h, R"({"allow": ["0.0.0.0/0", "::/0"]})");
  CHECK(probe(wide, {"tcp", "198.18.0.1", "443"}) == "ERR EPERM");
  CHECK(probe(wide, {"tcp", "fd00:18::1", "443"}) == "ERR EPERM");
  CHECK(probe(wide, {"udp", "198.18.0.2", "53"}) == "ERR EPERM");
  // Routed by the uplink, not its own addresses: the wide rules reach them.
  CHECK(probe(wide, {"tcp", "198.19.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(wide, {"tcp", "fd00:19::1", "443"}) == "OK tcp-echo");

  auto named = create_with(h, R"({"allow": ["198.18.0.2"]})");
  CHECK(probe(named, {"tcp", "198.18.0.2", "80"}) == "OK tcp-echo");
  CHECK(probe(named, {"tcp", "198.18.0.1", "80"}) == "ERR EPERM");
  wide.destroy();
  named.destroy();
  expect_clean_end(h);
}

TEST_CASE("network gateway: published ports, and a host port in use fails the create", "[network][gateway]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  Harness h;
  const int port = free_port(up);
  REQUIRE(port > 0);
  auto sb = create_with(h, R"({"publish": [{"host_port": )" + std::to_string(port) + R"(, "port": 8080}]})");
  std::atomic<bool> served{false};
  std::string serve_out;
  sandlet::ExecOptions srv({"/tmp/net-probe", "tcp-serve", "8080"});
  srv.timeout_s = 25;
  sb.exec_async(srv, [&](const sandlet::Error*, sandlet::ExecResult r) {
    serve_out = r.stdout_data;
    served = true;
  });
  REQUIRE(wait_until([&] { return sb.exec({"sh", "-c", "grep -q ':1F90 00000000:0000 0A' /proc/net/tcp"}).exit_code == 0; }, 10));
  CHECK(exchange_published(up, port) == "inside-echo");
  REQUIRE(wait_until([&] { return served.load(); }, 25));
  CHECK(serve_out == "OK served\n");

  // The same host port again: refused, naming the field, and nothing of that create is left.
  try {
    h.rt().create(Harness::spec().network_json(R"({"publish": [{"host_port": )" + std::to_string(port) + R"(, "port": 80}]})"));
    FAIL("a second sandbox got the same host port");
  } catch (const sandlet::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("network.publish[0].host_port"));
    CHECK(e.code() == SANDLET_ALREADY_EXISTS);
  }
  sb.destroy();
  expect_clean_end(h);
}

TEST_CASE("network gateway: egress_rate limits what the gateway relays outward", "[network][gateway]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  Harness h;
  auto sb = create_with(h, R"({"allow": ["tcp:198.18.0.1:9000"], "egress_rate": "256K"})");
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(probe(sb, {"tcp-send", "198.18.0.1", "9000", "1048576"}, 40) == "OK 1048576");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("1 MiB at 256 KiB/s took " << s << " s");
  CHECK(s >= 2.0);  // 4 s at the rate, less the burst: a correctness bound of the limiter, not a benchmark
  sb.destroy();
  expect_clean_end(h);
}

TEST_CASE("network gateway: a gateway killed with its supervisor is started again by the next call", "[network][gateway]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  Harness h;
  auto sb = create_with(h, R"({"allow": ["tcp:198.18.0.1:443"]})");
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");
  const pid_t first = gateway_pid(h.root());
  REQUIRE(first > 0);
  REQUIRE(kill_gateway(first));  // the supervisor and its gateway: nothing restarts it by itself
  REQUIRE(wait_until([&] { return gateway_pid(h.root()) == 0; }, 10));
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) != "OK tcp-echo");  // nothing steers its traffic now
  // The next create (any call that needs the gateway) starts a new one, which gets every live sandbox back.
  auto other = create_with(h, R"({"allow": ["tcp:198.18.0.1:80"]})");
  CHECK(gateway_pid(h.root()) > 0);
  CHECK(gateway_pid(h.root()) != first);
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(other, {"tcp", "198.18.0.1", "80"}) == "OK tcp-echo");
  sb.destroy();
  other.destroy();
  expect_clean_end(h);
}

TEST_CASE("network gateway: a detached sandbox keeps its network after its owner exits", "[network][gateway]") {
  if (!have_tools()) return;
  FakeUplink up;
  UplinkEnv env(up);
  Harness h;
  // The owner is another process, gone when its output has been read.
  int status = -1;
  std::string id = host_sh("SANDLET_ROOT=" + h.root() +
                               " SANDLET_TEST_NETWORK='{\"allow\": [\"tcp:198.18.0.1:443\"]}' " SANDLET_TEST_HELPER
                               " create " SANDLET_TEST_ROOTFS " detached",
                           &status);
  INFO(id);
  REQUIRE(status == 0);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  auto sb = h.rt().attach(id);
  sb.write_file("/tmp/net-probe", slurp(SANDLET_NET_PROBE), 0755);
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");
  sb.destroy();
  expect_clean_end(h);
}
