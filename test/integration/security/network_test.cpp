// The network allowlist enforced in the kernel (docs/NETWORK.md). A fake "internet" host lives in a
// network namespace of the test's own (a child process serving TCP and UDP echo), wired to the sandbox's
// namespace by a veth pair the test makes: the traffic never leaves namespaces the test created, and the
// servers stop by themselves. (Until the library gives allowed sandboxes their own interface, the test
// plays that part; the filter under test is the library's, attached at create.)
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <vector>

#include "integration/harness.hpp"

namespace {

constexpr int kServeSeconds = 90;  // the fake host's hard stop

void serve_echo(int ready_fd, int quit_fd) {
  ::unshare(CLONE_NEWNET);
  std::vector<pollfd> fds;
  std::vector<int> kinds;  // 0 tcp listener, 1 udp, 2 tcp connection, 3 quit
  auto listen_on = [&](int type, int port) {
    int s = ::socket(AF_INET6, type, 0);
    int zero = 0, one = 1;
    ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::_exit(5);
    if (type == SOCK_STREAM) ::listen(s, 16);
    fds.push_back({s, POLLIN, 0});
    kinds.push_back(type == SOCK_STREAM ? 0 : 1);
  };
  listen_on(SOCK_STREAM, 443);
  listen_on(SOCK_STREAM, 80);
  listen_on(SOCK_DGRAM, 53);
  fds.push_back({quit_fd, POLLIN, 0});
  kinds.push_back(3);
  char c = 'r';
  (void)!::write(ready_fd, &c, 1);
  ::close(ready_fd);
  ::alarm(kServeSeconds);
  for (;;) {
    if (::poll(fds.data(), fds.size(), 1000) < 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[256];
      if (kinds[i] == 3) ::_exit(0);
      if (kinds[i] == 0) {
        int c2 = ::accept(fds[i].fd, nullptr, nullptr);
        if (c2 >= 0) fds.push_back({c2, POLLIN, 0}), kinds.push_back(2);
      } else if (kinds[i] == 1) {
        sockaddr_in6 from{};
        socklen_t fl = sizeof from;
        ssize_t n = ::recvfrom(fds[i].fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &fl);
        if (n > 0) ::sendto(fds[i].fd, "udp-echo\n", 9, 0, reinterpret_cast<sockaddr*>(&from), fl);
      } else {
        ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
        if (n <= 0) {
          ::close(fds[i].fd);
          fds[i].fd = -1;  // poll ignores it
        } else {
          (void)!::write(fds[i].fd, "tcp-echo\n", 9);
        }
      }
    }
  }
}

// iproute2's ip by its path: a busybox shell that prefers its own applets (the VM guests' /bin/sh) would run
// busybox's ip for a bare "ip", and that one cannot make a veth pair.
std::string ip_path() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && ::access((dir + "/ip").c_str(), X_OK) == 0) return dir + "/ip";
  return "";
}

// The fake internet: 10.250.0.1 and .3, fd99::1 and ::3, a veth away from the sandbox's 10.250.0.2 /
// fd99::2. Servers: TCP 443 and 80, UDP 53, and the kernel's own ICMP echo.
class FakeInternet {
 public:
  FakeInternet() {
    int ready[2], quit[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(quit, O_CLOEXEC) == 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]), ::close(quit[1]);
      serve_echo(ready[1], quit[0]);
    }
    ::close(ready[1]), ::close(quit[0]);
    quit_ = quit[1];
    char c;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    ::close(ready[0]);
    host_ = "slt" + std::to_string(::getpid() % 100000) + "h";
    peer_ = "slt" + std::to_string(::getpid() % 100000) + "s";
  }
  ~FakeInternet() {
    const std::string ip = ip_path();
    host_sh(ip + " link del " + host_ + " 2>/dev/null; nsenter -t " + std::to_string(pid_) + " -n " + ip + " link del " +
            host_ + " 2>/dev/null");
    ::close(quit_);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  // Wires the sandbox whose init is `init_pid` to this host.
  void wire(pid_t init_pid) {
    const std::string me = std::to_string(pid_), sb = std::to_string(init_pid), ip = ip_path();
    int st = 0;
    host_sh("set -e; " + ip + " link add " + host_ + " type veth peer name " + peer_ + "; " + ip + " link set " + host_ +
                " netns " + me + "; " + ip + " link set " + peer_ + " netns " + sb + "; nsenter -t " + me + " -n sh -c '" +
                ip + " addr add 10.250.0.1/24 dev " + host_ + "; " + ip + " addr add 10.250.0.3/24 dev " + host_ + "; " + ip +
                " -6 addr add fd99::1/64 dev " + host_ + " nodad; " + ip + " -6 addr add fd99::3/64 dev " + host_ +
                " nodad; " + ip + " link set " + host_ + " up; " + ip + " link set lo up'" + "; nsenter -t " + sb +
                " -n sh -c '" + ip + " addr add 10.250.0.2/24 dev " + peer_ + "; " + ip + " -6 addr add fd99::2/64 dev " +
                peer_ + " nodad; " + ip + " link set " + peer_ + " up' 2>&1",
            &st);
    REQUIRE(st == 0);
  }

 private:
  pid_t pid_ = -1;
  int quit_ = -1;
  std::string host_, peer_;
};

pid_t init_pid_of(sandlet::Sandbox& sb) {
  const std::string json = sb.info_json();
  const auto pos = json.find("\"init_pid\":");
  REQUIRE(pos != std::string::npos);
  return std::atoi(json.c_str() + pos + 11);
}

// Why the fake internet cannot be wired here ("" when it can): the tools, then a veth pair made for real in
// a throw-away network namespace (a kernel without veth, or a busybox ip that cannot make one, says so).
std::string why_no_fake_internet() {
  int st = 0;
  host_sh("command -v nsenter >/dev/null && command -v unshare >/dev/null", &st);
  if (ip_path().empty() || st != 0) return "needs ip, nsenter and unshare on the host";
  std::string out = host_sh("unshare -n " + ip_path() + " link add sltprobe0 type veth peer name sltprobe1 2>&1", &st);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  if (st != 0) return "cannot make a veth pair here (ip link add ... type veth: " + out.substr(0, 200) + ")";
  return "";
}

bool have_fake_internet() {
  static const std::string why = why_no_fake_internet();
  if (!why.empty()) std::cout << "SANDLET-SKIP: " << why << std::endl;
  return why.empty();
}

// One probe command inside the sandbox; its one-line result.
std::string probe(sandlet::Sandbox& sb, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/tmp/net-probe"};
  argv.insert(argv.end(), args.begin(), args.end());
  sandlet::ExecOptions o(argv);
  o.timeout_s = 20;
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

uint64_t counter(const std::string& stats, const std::string& name) {
  const auto pos = stats.find("\"" + name + "\":");
  return pos == std::string::npos ? 0 : std::strtoull(stats.c_str() + pos + name.size() + 3, nullptr, 10);
}

}  // namespace

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

TEST_CASE("network: what this version cannot enforce yet is refused at create", "[network][net]") {
  Harness h;
  auto create = [&](const std::string& policy) {
    try {
      h.rt().create(Harness::spec().network_json(policy));
    } catch (const sandlet::Error& e) {
      return std::string(e.what());
    }
    return std::string("created");
  };
  CHECK_THAT(create(R"({"allow": [{"host": "mirror.internal"}], "dns": ["10.250.0.1"]})"),
             Catch::Contains("network.allow[0].host"));
  CHECK_THAT(create(R"({"publish": [{"port": 80}]})"), Catch::Contains("network.publish"));
  CHECK_THAT(create(R"({"egress_rate": "1M"})"), Catch::Contains("network.egress_rate"));
  CHECK_THAT(create(R"({"allow": [{"cidr": "10.0.0.0/33"}]})"), Catch::Contains("network.allow[0].cidr"));
  h.check_no_leaks();
}
