// net, the protection part: how long an address the uplink gains stays reachable from a sandbox whose rules
// cover it (0.0.0.0/0-like), while a fleet of sandboxes is attached to the gateway (every one of them gets
// the new protected range). The address is added in-process over rtnetlink in the fake internet's namespace
// (no `ip` process start in the timing); the net probe inside a sandbox connects in a loop until connect()
// fails with EPERM and reports when (CLOCK_BOOTTIME, one clock for the node). There is no peer: without the
// gateway's address events the address would stay open until the sandbox's next create or update.
#include "capi.hpp"
#include "report.hpp"
#include "scenarios_net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace bench {
namespace json = boost::json;

namespace {

std::int64_t boot_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_BOOTTIME, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// Adds or removes `addr`/32 on lo of the namespace `netns`, on a thread that enters it; waits for the ack.
void uplink_address(const std::string &netns, const char *addr, bool add) {
  std::string error;
  std::thread t([&] {
    const int ns = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
      error = "enter " + netns;
      if (ns >= 0) ::close(ns);
      return;
    }
    ::close(ns);
    const int s = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    struct {
      nlmsghdr h;
      ifaddrmsg m;
      char attrs[64];
    } req{};
    req.h.nlmsg_type = add ? RTM_NEWADDR : RTM_DELADDR;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_EXCL : 0);
    req.m.ifa_family = AF_INET;
    req.m.ifa_prefixlen = 32;
    req.m.ifa_index = 1;  // lo
    std::size_t len = NLMSG_LENGTH(sizeof req.m);
    for (unsigned short type : {IFA_LOCAL, IFA_ADDRESS}) {
      auto *a = reinterpret_cast<rtattr *>(reinterpret_cast<char *>(&req) + NLMSG_ALIGN(len));
      a->rta_type = type;
      a->rta_len = RTA_LENGTH(4);
      ::inet_pton(AF_INET, addr, RTA_DATA(a));
      len = NLMSG_ALIGN(len) + RTA_ALIGN(a->rta_len);
    }
    req.h.nlmsg_len = static_cast<std::uint32_t>(len);
    char ack[512];
    if (s < 0 || ::send(s, &req, len, 0) < 0 || ::recv(s, ack, sizeof ack, 0) < 0) error = "rtnetlink";
    else if (const auto *e = reinterpret_cast<const nlmsgerr *>(NLMSG_DATA(reinterpret_cast<nlmsghdr *>(ack))); e->error != 0)
      error = std::string("rtnetlink: ") + std::strerror(-e->error);
    if (s >= 0) ::close(s);
  });
  t.join();
  if (!error.empty()) throw BenchError(std::string("net: ") + (add ? "add " : "remove ") + addr + ": " + error);
}

}  // namespace

json::object protect_exposure(const Context &ctx, sandlet_runtime_t *rt, const std::string &uplink_netns,
                              const std::string &probe_bytes, std::size_t attached) {
  constexpr const char *kAddr = "198.18.77.77";
  constexpr int kRounds = 20;
  Spec wide(ctx.rootfs);
  wide.set_network_json(R"({"allow":["tcp:198.18.0.0/16"]})");
  Sandbox sb = create_sandbox(rt, wide);
  write_file(sb, "/tmp/net-probe", probe_bytes, 0755);
  std::vector<std::uint64_t> exposed;
  int stale = 0;  // rounds whose probe met the previous round's protection still in place: not a sample
  for (int r = 0; r < kRounds && stale < kRounds; ++r) {
    throw_if_stopped();
    std::string out;
    std::thread probe([&] { out = exec_stdout(sb, {"/tmp/net-probe", "until-eperm", kAddr, "80", "3000"}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the probe is connecting in its loop
    const std::int64_t t0 = boot_ns();
    uplink_address(uplink_netns, kAddr, true);
    probe.join();
    uplink_address(uplink_netns, kAddr, false);
    long long at = 0;
    if (std::sscanf(out.c_str(), "BOOT_NS %lld", &at) != 1) throw BenchError("net: the exposure probe said: " + out);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the removal's update, before the next round
    if (at < t0) {
      ++stale;
      --r;
      continue;
    }
    exposed.push_back(static_cast<std::uint64_t>(at - t0));
  }
  sb.destroy();
  if (exposed.size() < static_cast<size_t>(kRounds))
    throw BenchError("net: protection exposure: " + std::to_string(stale) + " rounds met the previous one's protection");
  json::object o;
  o["how"] = std::string("rtnetlink RTM_NEWADDR ") + kAddr + "/32 in the uplink, then the first connect() refused with EPERM in a "
             "sandbox allowed tcp:198.18.0.0/16 (its probe loops connect every ~20 us)";
  o["sandboxes_attached"] = attached + 1;
  o["rounds"] = kRounds;
  o["rounds_repeated"] = stale;
  put_latency(o, summarize(exposed), 0);
  return o;
}

}  // namespace bench
