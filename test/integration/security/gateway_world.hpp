// The gateway tests' world: the uplink is a fake "internet", a network namespace of the test's own (a child
// process) with 198.18.0.1, 198.18.0.2 and fd00:18::1 on its loopback — the uplink's own addresses, which
// the gateway protects. "Somewhere else" the uplink reaches is a second namespace a veth pair away
// (10.255.255.0/30, fd00:ff::/64), to which the uplink routes 198.19.0.0/24 and fd00:19::/64; it delivers
// both to itself (routes of type local). The echo servers of net_world.hpp answer in both. The runtime's
// gateway connects out from the uplink ($SANDLET_NET_UPLINK_NETNS). Traffic never leaves namespaces the
// tests made, and the servers stop by themselves.
#pragma once
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <thread>

#include "integration/security/net_world.hpp"

namespace gateway_world {

class FakeUplink {
 public:
  FakeUplink()
      : elsewhere_(ip() + " link set lo up && " + ip() + " route add local 198.19.0.0/24 dev lo && " + ip() +
                   " -6 route add local fd00:19::/64 dev lo"),
        echo_(ip() + " link set lo up && " + ip() + " addr add 198.18.0.1/32 dev lo && " + ip() +
              " addr add 198.18.0.2/32 dev lo && " + ip() + " -6 addr add fd00:18::1/128 dev lo nodad && " + ip() +
              " link add gwu0 type veth peer name gwu1 netns " + std::to_string(elsewhere_.pid()) + " && " + ip() +
              " addr add 10.255.255.1/30 dev gwu0 && " + ip() + " -6 addr add fd00:ff::1/64 dev gwu0 nodad && " + ip() +
              " link set gwu0 up && nsenter -t " + std::to_string(elsewhere_.pid()) + " -n sh -c '" + ip() +
              " addr add 10.255.255.2/30 dev gwu1 && " + ip() + " -6 addr add fd00:ff::2/64 dev gwu1 nodad && " + ip() +
              " link set gwu1 up' && " + ip() + " route add 198.19.0.0/24 via 10.255.255.2 && " + ip() +
              " -6 route add fd00:19::/64 via fd00:ff::2"),
        path_(echo_.netns()) {}
  const std::string& netns() const { return path_; }
  // The namespace behind the uplink (198.19.0.0/24, fd00:19::/64): where the tests' upstream servers live.
  std::string elsewhere_netns() const { return elsewhere_.netns(); }
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
  static std::string ip() { return net_world::ip_path(); }
  net_world::EchoHost elsewhere_;  // first: the uplink's set-up moves the veth's other end into it
  net_world::EchoHost echo_;
  std::string path_;
};

// Points the runtimes opened while it lives at the fake uplink ($SANDLET_NET_UPLINK_NETNS).
class UplinkEnv {
 public:
  explicit UplinkEnv(const FakeUplink& up) { ::setenv("SANDLET_NET_UPLINK_NETNS", up.netns().c_str(), 1); }
  ~UplinkEnv() { ::unsetenv("SANDLET_NET_UPLINK_NETNS"); }
};

// Whether the fake uplink can be made here; says why not (a SKIP line) when it cannot.
inline bool have_tools() { return net_world::have_fake_internet(); }

// The pid of the root's gateway supervisor (its lock file), 0 when none runs.
inline pid_t gateway_pid(const std::string& root) {
  const std::string lock = root + "/netgw/lock";
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  if (free) return 0;
  return static_cast<pid_t>(std::atoi(slurp(lock).c_str()));
}

// Kills the whole gateway: its supervisor (the lock's pid) and the gateway it runs, one process group.
inline bool kill_gateway(pid_t supervisor) {
  const pid_t group = ::getpgid(supervisor);
  return group > 1 && ::kill(-group, SIGKILL) == 0;
}

inline bool gateway_gone(const std::string& root) {
  return gateway_pid(root) == 0 && !fs::exists(root + "/netgw/control.sock");
}

// The end of every gateway test: the sandboxes are gone, the idle gateway exits and removes its socket,
// and nothing is left behind.
inline void expect_clean_end(Harness& h) {
  CHECK(wait_until([&] { return gateway_gone(h.root()); }, 20));
  h.check_no_leaks();
}

}  // namespace gateway_world
