// The `net` scenario's fake internet: network namespaces of the bench's own, so no byte leaves the node.
//   "internet": 198.18.0.1/32 on its loopback, a TCP echo server on kEchoPort. It is also the runtime's
//               uplink ($SANDLET_NET_UPLINK_NETNS): the gateway connects out from there, as it would from
//               the host's namespace.
//   "veth":     (optional) a namespace wired to the internet by a veth pair, 10.199.0.2/30 <-> 10.199.0.1/30,
//               with a route to 198.18.0.0/24: what a user would otherwise give a sandbox.
// Each namespace is held by a child process (killed with the bench: PR_SET_PDEATHSIG); the veth pair
// lives inside them and goes with them. Nothing is named on the host.
#pragma once

#include <sys/types.h>

#include <string>

namespace bench {

inline constexpr const char *kInternetAddr = "198.18.0.1";
inline constexpr int kEchoPort = 7007;

class FakeInternet final {
 public:
  // Builds the namespaces (needs iproute2's `ip` and util-linux's `nsenter`); throws BenchError.
  // Call it before anything starts threads: the children run `ip` after fork.
  explicit FakeInternet(bool with_veth);
  ~FakeInternet();
  FakeInternet(const FakeInternet &) = delete;
  FakeInternet &operator=(const FakeInternet &) = delete;

  std::string internet_netns() const { return ns_path(internet_); }
  std::string veth_netns() const { return veth_ > 0 ? ns_path(veth_) : std::string(); }

 private:
  static std::string ns_path(pid_t pid) { return "/proc/" + std::to_string(pid) + "/ns/net"; }
  void start_veth(int quit_read);
  void stop() noexcept;
  pid_t internet_ = -1, veth_ = -1;
  int quit_fd_ = -1;  // closing it stops both children
};

// A host-side command line that runs `argv` in namespace file `netns` as root of a fresh user namespace
// (nsenter + unshare: the net probe refuses to run outside a user namespace).
std::string in_netns_command(const std::string &netns, const std::string &args);

}  // namespace bench
