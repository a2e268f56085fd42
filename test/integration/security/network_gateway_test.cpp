// Connectivity through the node's network gateway (docs/NETWORK.md, "Connectivity"). The uplink is a fake
// "internet": a network namespace of the test's own (a child process) with 198.18.0.1, 198.18.0.2 and
// fd00:18::1 on its loopback, serving TCP and UDP echo; the runtime's gateway connects out from there
// ($SANDLET_NET_UPLINK_NETNS). Traffic never leaves namespaces the tests made, and the servers
// stop by themselves.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <thread>
#include <vector>

#include "integration/harness.hpp"

namespace {

constexpr int kServeSeconds = 120;  // the fake uplink's hard stop

// TCP 443/80: "tcp-echo" per read; TCP 9000: counts what arrives until the sender closes, answers the
// count; UDP 53: "udp-echo" per datagram.
void serve(int ready_fd, int quit_fd) {
  if (::unshare(CLONE_NEWNET) != 0) ::_exit(4);
  if (std::system("ip link set lo up && ip addr add 198.18.0.1/32 dev lo && ip addr add 198.18.0.2/32 dev lo && "
                  "ip -6 addr add fd00:18::1/128 dev lo nodad") != 0)
    ::_exit(6);
  struct Fd {
    int fd, kind;  // 0 listener echo, 1 udp, 2 echo conn, 3 quit, 4 listener count, 5 count conn
    uint64_t count;
  };
  std::vector<Fd> fds;
  auto listen_on = [&](int type, int port, int kind) {
    int s = ::socket(AF_INET6, type, 0), zero = 0, one = 1;
    ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::_exit(5);
    if (type == SOCK_STREAM) ::listen(s, 64);
    fds.push_back({s, kind, 0});
  };
  listen_on(SOCK_STREAM, 443, 0);
  listen_on(SOCK_STREAM, 80, 0);
  listen_on(SOCK_STREAM, 9000, 4);
  listen_on(SOCK_DGRAM, 53, 1);
  fds.push_back({quit_fd, 3, 0});
  char c = 'r';
  (void)!::write(ready_fd, &c, 1);
  ::close(ready_fd);
  ::alarm(kServeSeconds);
  for (;;) {
    std::vector<pollfd> p;
    for (auto& f : fds) p.push_back({f.fd, POLLIN, 0});
    if (::poll(p.data(), p.size(), 1000) <= 0) continue;
    const size_t n = fds.size();
    for (size_t i = 0; i < n; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP)) || fds[i].fd < 0) continue;
      char buf[16384];
      Fd& f = fds[i];
      if (f.kind == 3) ::_exit(0);
      if (f.kind == 0 || f.kind == 4) {
        int c2 = ::accept(f.fd, nullptr, nullptr);
        if (c2 >= 0) fds.push_back({c2, f.kind == 0 ? 2 : 5, 0});
      } else if (f.kind == 1) {
        sockaddr_in6 from{};
        socklen_t fl = sizeof from;
        if (::recvfrom(f.fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &fl) > 0)
          ::sendto(f.fd, "udp-echo\n", 9, 0, reinterpret_cast<sockaddr*>(&from), fl);
      } else {
        ssize_t r = ::read(f.fd, buf, sizeof buf);
        if (r > 0 && f.kind == 2) (void)!::write(f.fd, "tcp-echo\n", 9);
        if (r > 0 && f.kind == 5) f.count += static_cast<uint64_t>(r);
        if (r <= 0) {
          if (f.kind == 5) {
            const std::string reply = std::to_string(f.count) + "\n";
            (void)!::write(f.fd, reply.data(), reply.size());
          }
          ::close(f.fd);
          f.fd = -1;
        }
      }
    }
  }
}

class FakeUplink {
 public:
  FakeUplink() {
    int ready[2], quit[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(quit, O_CLOEXEC) == 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]), ::close(quit[1]);
      serve(ready[1], quit[0]);
    }
    ::close(ready[1]), ::close(quit[0]);
    quit_ = quit[1];
    char c = 0;
    const bool ok = ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
    REQUIRE(ok);
    path_ = "/proc/" + std::to_string(pid_) + "/ns/net";
  }
  ~FakeUplink() {
    ::close(quit_);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  const std::string& netns() const { return path_; }
  // Runs `fn` on a thread inside the uplink namespace (as a host-side client of a published port).
  template <class F>
  void inside(F fn) const {
    std::thread t([&] {
      const int ns = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      REQUIRE(ns >= 0);
      REQUIRE(::setns(ns, CLONE_NEWNET) == 0);
      ::close(ns);
      fn();
    });
    t.join();
  }

 private:
  pid_t pid_ = -1;
  int quit_ = -1;
  std::string path_;
};

// Points the runtimes opened while it lives at the fake uplink ($SANDLET_NET_UPLINK_NETNS).
class UplinkEnv {
 public:
  explicit UplinkEnv(const FakeUplink& up) { ::setenv("SANDLET_NET_UPLINK_NETNS", up.netns().c_str(), 1); }
  ~UplinkEnv() { ::unsetenv("SANDLET_NET_UPLINK_NETNS"); }
};

bool have_tools() {
  int st = 0;
  host_sh("command -v ip >/dev/null", &st);
  return st == 0;
}

std::string probe(sandlet::Sandbox& sb, const std::vector<std::string>& args, double timeout = 20) {
  std::vector<std::string> argv{"/tmp/net-probe"};
  argv.insert(argv.end(), args.begin(), args.end());
  sandlet::ExecOptions o(argv);
  o.timeout_s = timeout;
  auto r = sb.exec(o);
  INFO("probe stderr: " << r.stderr_data);
  REQUIRE(r.exit_code == 0);
  std::string out = r.stdout_data;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

sandlet::Sandbox create_with(Harness& h, const std::string& policy) {
  auto sb = h.rt().create(Harness::spec().network_json(policy));
  sb.write_file("/tmp/net-probe", slurp(SANDLET_NET_PROBE), 0755);
  return sb;
}

// The pid of the root's gateway (its lock file), 0 when none runs.
pid_t gateway_pid(const std::string& root) {
  const std::string lock = root + "/netgw/lock";
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  if (free) return 0;
  return static_cast<pid_t>(std::atoi(slurp(lock).c_str()));
}

bool gateway_gone(const std::string& root) {
  return gateway_pid(root) == 0 && !fs::exists(root + "/netgw/control.sock");
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
  if (!have_tools()) {
    std::cout << "SANDLET-SKIP: needs ip on the host (to make the fake uplink)" << std::endl;
    return;
  }
  FakeUplink up;
  UplinkEnv env(up);
  Harness h;
  auto sb = create_with(h, R"({"allow": ["tcp:198.18.0.1:443", "tcp:[fd00:18::1]:443", "udp:198.18.0.1:53"]})");
  CHECK(gateway_pid(h.root()) > 0);
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"tcp", "fd00:18::1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"tcp", "::ffff:198.18.0.1", "443"}) == "OK tcp-echo");
  CHECK(probe(sb, {"udp", "198.18.0.1", "53"}) == "OK udp-echo");
  CHECK(probe(sb, {"udp-connected", "198.18.0.1", "53"}) == "OK udp-echo");
  // Denied by the cgroup hooks before the gateway sees anything.
  CHECK(probe(sb, {"tcp", "198.18.0.1", "80"}) == "ERR EPERM");
  CHECK(probe(sb, {"tcp", "198.18.0.2", "443"}) == "ERR EPERM");
  CHECK(probe(sb, {"udp", "fd00:18::1", "53"}) == "ERR EPERM");
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
  // Idle (no sandbox attached): the gateway exits after its grace period and leaves its socket behind.
  CHECK(wait_until([&] { return gateway_gone(h.root()); }, 20));
  h.check_no_leaks();
}

TEST_CASE("network gateway: the uplink's own addresses need a rule naming them", "[network][gateway]") {
  if (!have_tools()) {
    std::cout << "SANDLET-SKIP: needs ip on the host (to make the fake uplink)" << std::endl;
    return;
  }
  FakeUplink up;
  UplinkEnv env(up);
  Harness h;
  auto wide = create_with(h, R"({"allow": ["0.0.0.0/0", "::/0"]})");
  CHECK(probe(wide, {"tcp", "198.18.0.1", "443"}) == "ERR EPERM");
  CHECK(probe(wide, {"tcp", "fd00:18::1", "443"}) == "ERR EPERM");
  CHECK(probe(wide, {"udp", "198.18.0.2", "53"}) == "ERR EPERM");
  auto named = create_with(h, R"({"allow": ["198.18.0.2"]})");
  CHECK(probe(named, {"tcp", "198.18.0.2", "80"}) == "OK tcp-echo");
  CHECK(probe(named, {"tcp", "198.18.0.1", "80"}) == "ERR EPERM");
  wide.destroy();
  named.destroy();
  CHECK(wait_until([&] { return gateway_gone(h.root()); }, 20));
  h.check_no_leaks();
}

TEST_CASE("network gateway: published ports, and a host port in use fails the create", "[network][gateway]") {
  if (!have_tools()) {
    std::cout << "SANDLET-SKIP: needs ip on the host (to make the fake uplink)" << std::endl;
    return;
  }
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
  CHECK(wait_until([&] { return gateway_gone(h.root()); }, 20));
  h.check_no_leaks();
}

TEST_CASE("network gateway: egress_rate limits what the gateway relays outward", "[network][gateway]") {
  if (!have_tools()) {
    std::cout << "SANDLET-SKIP: needs ip on the host (to make the fake uplink)" << std::endl;
    return;
  }
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
  CHECK(wait_until([&] { return gateway_gone(h.root()); }, 20));
  h.check_no_leaks();
}

TEST_CASE("network gateway: a killed gateway is restarted and re-attaches live sandboxes", "[network][gateway]") {
  if (!have_tools()) {
    std::cout << "SANDLET-SKIP: needs ip on the host (to make the fake uplink)" << std::endl;
    return;
  }
  FakeUplink up;
  UplinkEnv env(up);
  Harness h;
  auto sb = create_with(h, R"({"allow": ["tcp:198.18.0.1:443"]})");
  CHECK(probe(sb, {"tcp", "198.18.0.1", "443"}) == "OK tcp-echo");
  const pid_t first = gateway_pid(h.root());
  REQUIRE(first > 0);
  REQUIRE(::kill(first, SIGKILL) == 0);
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
  CHECK(wait_until([&] { return gateway_gone(h.root()); }, 20));
  h.check_no_leaks();
}

TEST_CASE("network gateway: a detached sandbox keeps its network after its owner exits", "[network][gateway]") {
  if (!have_tools()) {
    std::cout << "SANDLET-SKIP: needs ip on the host (to make the fake uplink)" << std::endl;
    return;
  }
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
  CHECK(wait_until([&] { return gateway_gone(h.root()); }, 20));
  h.check_no_leaks();
}
