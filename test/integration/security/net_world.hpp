// The network tests' world: a fake "internet" host in a network namespace of the test's own (a child
// process serving TCP and UDP echo), wired to a sandbox's namespace by a veth pair the test makes, and a
// probe run inside the sandbox. The traffic never leaves namespaces the test created, and the servers stop
// by themselves. (The gateway's tests use the same servers as the uplink instead: gateway_world.hpp.)
#pragma once
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <vector>

#include "integration/harness.hpp"

namespace net_world {

constexpr int kServeSeconds = 120;  // the fake hosts' hard stop

// The echo servers of both fake worlds, in a network namespace of their own: TCP 443 and 80 answer
// "tcp-echo" per read; TCP 9000 counts what arrives until the sender closes and answers the count; TCP 7000
// never accepts (connections wait in its queue); UDP 53 answers "udp-echo" per datagram. `setup` (a shell command, may be empty) runs once the namespace exists.
inline void serve_echo(int ready_fd, int quit_fd, const std::string& setup = "") {
  if (::unshare(CLONE_NEWNET) != 0) ::_exit(4);
  if (!setup.empty() && std::system(setup.c_str()) != 0) ::_exit(6);
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
  // TCP 7000: a sink that never accepts; its queue (4096) holds what connects, for the descriptor floods.
  listen_on(SOCK_STREAM, 7000, 6);
  const int sink = fds.back().fd;
  fds.pop_back();
  ::listen(sink, 4096);
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

// iproute2's ip by its path: a busybox shell that prefers its own applets (the VM guests' /bin/sh) would run
// busybox's ip for a bare "ip", and that one cannot make a veth pair.
inline std::string ip_path() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && ::access((dir + "/ip").c_str(), X_OK) == 0) return dir + "/ip";
  return "";
}

// The fake internet: 10.250.0.1 and .3, fd99::1 and ::3, a veth away from the sandbox's 10.250.0.2 /
// fd99::2. Servers: TCP 443 and 80, UDP 53, and the kernel's own ICMP echo.
// The echo servers (serve_echo) in a child process of their own, until destroyed.
class EchoHost {
 public:
  explicit EchoHost(const std::string& setup = "") {
    int ready[2], quit[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(quit, O_CLOEXEC) == 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]), ::close(quit[1]);
      serve_echo(ready[1], quit[0], setup);
    }
    ::close(ready[1]), ::close(quit[0]);
    quit_ = quit[1];
    char c = 0;
    const bool ok = ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
    REQUIRE(ok);
  }
  ~EchoHost() {
    ::close(quit_);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  EchoHost(const EchoHost&) = delete;
  EchoHost& operator=(const EchoHost&) = delete;
  pid_t pid() const { return pid_; }
  std::string netns() const { return "/proc/" + std::to_string(pid_) + "/ns/net"; }

 private:
  pid_t pid_ = -1;
  int quit_ = -1;
};

class FakeInternet {
 public:
  FakeInternet() {
    host_ = "slt" + std::to_string(::getpid() % 100000) + "h";
    peer_ = "slt" + std::to_string(::getpid() % 100000) + "s";
  }
  ~FakeInternet() {
    const std::string ip = ip_path();
    host_sh(ip + " link del " + host_ + " 2>/dev/null; nsenter -t " + std::to_string(echo_.pid()) + " -n " + ip +
            " link del " + host_ + " 2>/dev/null");
  }
  // Wires the sandbox whose init is `init_pid` to this host.
  void wire(pid_t init_pid) {
    const std::string me = std::to_string(echo_.pid()), sb = std::to_string(init_pid), ip = ip_path();
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
  EchoHost echo_;
  std::string host_, peer_;
};

// The sandbox's cgroup2 directory (where its allowlist filter is attached), from its info.
inline std::string cgroup_of(sandlet::Sandbox& sb) {
  const std::string json = sb.info_json();
  const std::string key = "\"cgroup_v2\":\"";
  const auto pos = json.find(key);
  REQUIRE(pos != std::string::npos);
  return json.substr(pos + key.size(), json.find('"', pos + key.size()) - pos - key.size());
}

inline pid_t init_pid_of(sandlet::Sandbox& sb) {
  const std::string json = sb.info_json();
  const auto pos = json.find("\"init_pid\":");
  REQUIRE(pos != std::string::npos);
  return std::atoi(json.c_str() + pos + 11);
}

// Why the fake internet cannot be wired here ("" when it can): the tools, then a veth pair made for real in
// a throw-away network namespace (a kernel without veth, or a busybox ip that cannot make one, says so).
inline std::string why_no_fake_internet() {
  int st = 0;
  host_sh("command -v nsenter >/dev/null && command -v unshare >/dev/null", &st);
  if (ip_path().empty() || st != 0) return "needs ip, nsenter and unshare on the host";
  std::string out = host_sh("unshare -n " + ip_path() + " link add sltprobe0 type veth peer name sltprobe1 2>&1", &st);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  if (st != 0) return "cannot make a veth pair here (ip link add ... type veth: " + out.substr(0, 200) + ")";
  return "";
}

inline bool have_fake_internet() {
  static const std::string why = why_no_fake_internet();
  if (!why.empty()) std::cout << "SANDLET-SKIP: " << why << std::endl;
  return why.empty();
}

// One probe command inside the sandbox; its one-line result.
inline std::string probe(sandlet::Sandbox& sb, const std::vector<std::string>& args, double timeout = 20) {
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

inline sandlet::Sandbox create_with(Harness& h, const std::string& policy) {
  auto sb = h.rt().create(Harness::spec().network_json(policy));
  sb.write_file("/tmp/net-probe", slurp(SANDLET_NET_PROBE), 0755);
  return sb;
}

inline uint64_t counter(const std::string& stats, const std::string& name) {
  const auto pos = stats.find("\"" + name + "\":");
  return pos == std::string::npos ? 0 : std::strtoull(stats.c_str() + pos + name.size() + 3, nullptr, 10);
}

}  // namespace net_world
