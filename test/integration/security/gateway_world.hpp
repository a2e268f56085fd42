// The gateway tests' world: the uplink is a fake "internet", a network namespace of the test's own (a child
// process) with 198.18.0.1, 198.18.0.2 and fd00:18::1 on its loopback — the uplink's own addresses, which
// the gateway protects — and 198.19.0.0/24 and fd00:19::/64 routed to its loopback as local (AnyIP)
// without being its addresses: "somewhere else" the uplink reaches. The echo servers of net_world.hpp answer on all of
// them; the runtime's gateway connects out from there ($SANDLET_NET_UPLINK_NETNS). Traffic never leaves
// namespaces the tests made, and the servers stop by themselves.
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
      : echo_(net_world::ip_path() + " link set lo up && " + net_world::ip_path() + " addr add 198.18.0.1/32 dev lo && " +
              net_world::ip_path() + " addr add 198.18.0.2/32 dev lo && " + net_world::ip_path() +
              " -6 addr add fd00:18::1/128 dev lo nodad && " + net_world::ip_path() +
              " route add local 198.19.0.0/24 dev lo && " + net_world::ip_path() + " -6 route add local fd00:19::/64 dev lo"),
        path_(echo_.netns()) {}
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
inline bool have_tools() {
  if (!net_world::ip_path().empty()) return true;
  std::cout << "SANDLET-SKIP: needs ip on the host (to make the fake uplink)" << std::endl;
  return false;
}

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
