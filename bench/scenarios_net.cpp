// net: what egress through the node gateway costs (issue 18's benchmark). A fake internet of the bench's
// own (net_fixture.hpp) is the runtime's uplink, so the measurement is the gateway's path, not a real
// network's. In one run:
//   connect:  N connect+echo round trips (and N echoes on one held connection) from inside a sandbox through
//             the allowlist and the gateway, timed inside by the net probe; peers, interleaved with it in
//             rounds: the same probe as a plain process in the uplink namespace (no sandbox, no policy), and
//             in a namespace wired to the internet with a veth pair (what a user would otherwise set up);
//   create:   sandlet_sandbox_create with the egress policy vs the same spec with "none", paired; and
//             create -> exec /bin/true -> destroy with egress vs bwrap --unshare-all (its own, empty netns);
//   fleet:    memory per sandbox with egress vs none over --sandboxes N, the gateway's growth per attached
//             sandbox, and net_update latency over all N (scenarios_net_fleet.cpp);
//   protect:  how long an address the uplink gains stays open, with the fleet attached (net_protect.cpp);
//   verified: an update to deny-all makes the probe's connect fail with EPERM.
#include "capi.hpp"
#include "net_fixture.hpp"
#include "peers.hpp"
#include "proc.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "scenarios.hpp"
#include "scenarios_net.hpp"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

namespace bench {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::size_t kDefaultFleet = 1000;
constexpr int kConnectRounds = 5;  // the connect sides alternate in this many rounds
constexpr const char *kProbeInSandbox = "/tmp/net-probe";

fs::path net_probe_path(const Context &ctx) {
  if (const char *p = std::getenv("SANDLET_BENCH_NET_PROBE"); p != nullptr && *p != '\0') return p;
  for (const fs::path &p : {ctx.exe_dir / "test" / "sandlet-net-probe", ctx.exe_dir / "sandlet-net-probe"})
    if (::access(p.c_str(), X_OK) == 0) return p;
  throw BenchError("net: the net probe (target sandlet-net-probe) is not built: build it, or set "
                   "$SANDLET_BENCH_NET_PROBE");
}

std::string slurp(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  if (!f) throw BenchError("net: cannot read " + p.string());
  return s.str();
}

struct Rtt {
  std::vector<std::uint64_t> connect_ns, connect_echo_ns, echo_ns;
  void append(const std::string &probe_output, const std::string &side) {
    std::istringstream in(probe_output);
    bool ok = false;
    for (std::string tag; in >> tag;) {
      if (tag == "c") {
        std::uint64_t a = 0, b = 0;
        in >> a >> b;
        connect_ns.push_back(a);
        connect_echo_ns.push_back(b);
      } else if (tag == "e") {
        std::uint64_t a = 0;
        in >> a;
        echo_ns.push_back(a);
      } else if (tag == "OK") {
        ok = true;
      } else {
        break;
      }
    }
    if (!ok) throw BenchError("net: the probe (" + side + ") failed: " + probe_output.substr(0, 300));
  }
  json::object to_json(const std::string &name, const std::string &how) const {
    json::object o;
    o["name"] = name;
    o["how"] = how;
    o["connect_echo"] = us_summary(summarize(connect_echo_ns));
    o["connect_only"] = us_summary(summarize(connect_ns));
    o["echo_held_connection"] = us_summary(summarize(echo_ns));
    return o;
  }
};

double ratio_of_medians(const std::vector<std::uint64_t> &a, const std::vector<std::uint64_t> &b) {
  const double mb = summarize(b).p50_ms;
  return mb > 0 ? round3(summarize(a).p50_ms / mb) : 0;
}

json::object connect_latency(const Context &ctx, const Sandbox &sb, const fs::path &probe, const FakeInternet &net,
                             std::size_t n, json::object &headline) {
  const std::size_t per_round = std::max<std::size_t>(1, n / kConnectRounds);
  const std::string args = std::string(kInternetAddr) + " " + std::to_string(kEchoPort) + " " + std::to_string(per_round);
  const std::string uplink_cmd = in_netns_command(net.internet_netns(), probe.string() + " tcp-rtt " + args);
  const std::string veth_cmd = in_netns_command(net.veth_netns(), probe.string() + " tcp-rtt " + args);
  const std::string port = std::to_string(kEchoPort), count = std::to_string(per_round);
  const std::vector<const char *> in_sandbox{kProbeInSandbox, "tcp-rtt", kInternetAddr, port.c_str(), count.c_str()};
  Rtt ours, uplink, veth;
  // Warm-up of each side (first connects pay for route and neighbour caches, the gateway's first accept).
  exec_stdout(sb, in_sandbox);
  if (ctx.opt.peer) {
    capture_output(uplink_cmd);
    capture_output(veth_cmd);
  }
  for (int r = 0; r < kConnectRounds; ++r) {
    throw_if_stopped();
    // Rotate who goes first, against order effects.
    for (int k = 0; k < 3; ++k) {
      switch ((r + k) % 3) {
        case 0: ours.append(exec_stdout(sb, in_sandbox), "sandbox"); break;
        case 1:
          if (ctx.opt.peer) uplink.append(capture_output(uplink_cmd), "uplink process");
          break;
        case 2:
          if (ctx.opt.peer) veth.append(capture_output(veth_cmd), "veth namespace");
          break;
      }
    }
  }
  json::object out;
  out["rounds"] = kConnectRounds;
  out["per_round"] = per_round;
  out["sandbox_via_gateway"] =
      ours.to_json("sandbox (allowlist + gateway)", "net probe in a sandbox with " + std::string(kEgressPolicy));
  const Summary s = summarize(ours.connect_echo_ns);
  put_latency(headline, s, 0);  // the headline: connect + first echo through the gateway
  if (ctx.opt.peer) {
    out["uplink_process"] = uplink.to_json("plain process in the uplink namespace (no sandbox, no policy)", uplink_cmd);
    out["veth_netns"] = veth.to_json("process in a netns with a veth pair to the internet (no policy)", veth_cmd);
    out["ratio_connect_echo_vs_uplink"] = ratio_of_medians(ours.connect_echo_ns, uplink.connect_echo_ns);
    out["ratio_connect_echo_vs_veth"] = ratio_of_medians(ours.connect_echo_ns, veth.connect_echo_ns);
    out["ratio_echo_vs_uplink"] = ratio_of_medians(ours.echo_ns, uplink.echo_ns);
    out["ratio_echo_vs_veth"] = ratio_of_medians(ours.echo_ns, veth.echo_ns);
    const Summary p = summarize(uplink.connect_echo_ns);
    headline["peer"] = peer_json("uplink process (connect+echo)", uplink_cmd, p, 0);
    headline["ratio_vs_peer"] = out["ratio_connect_echo_vs_uplink"];
  }
  return out;
}

json::object create_latency(const Context &ctx, sandlet_runtime_t *rt, std::size_t n) {
  Spec egress(ctx.rootfs), none(ctx.rootfs);
  egress.set_network_json(kEgressPolicy);
  none.set_network_json("none");
  auto create_only = [&](const Spec &spec) -> TimedOp {
    return [&spec, rt](unsigned) {
      const auto t0 = now_ns();
      Sandbox sb = create_sandbox(rt, spec);
      const auto t = now_ns() - t0;
      sb.destroy();
      return t;
    };
  };
  const PairedRun c = run_paired(create_only(egress), create_only(none), n, 1, ctx.opt.warmup);
  json::object out;
  json::object e, z;
  put_latency(e, summarize(c.ours_ns), 0);
  put_latency(z, summarize(c.peer_ns), 0);
  out["create_egress"] = std::move(e);
  out["create_none"] = std::move(z);
  out["ratio_egress_vs_none"] = round3(paired_ratio_median(c.ours_ns, c.peer_ns));

  const TimedOp cycle = [&](unsigned) {
    const auto t0 = now_ns();
    Sandbox sb = create_sandbox(rt, egress);
    exec_ok(sb, {"/bin/true"});
    sb.destroy();
    return now_ns() - t0;
  };
  std::optional<Command> bwrap;
  TimedOp peer;
  if (ctx.opt.peer) {
    bwrap.emplace(bwrap_command(ctx.rootfs, {"/bin/true"}));
    peer = [&](unsigned) { return bwrap->run_ok(); };
  }
  const PairedRun l = run_paired(cycle, peer, n, 1, ctx.opt.warmup);
  json::object cyc;
  put_latency(cyc, summarize(l.ours_ns), l.ours_throughput());
  if (bwrap) {
    cyc["peer"] = peer_json("bwrap --unshare-all (own netns, no connectivity)", bwrap->str(), summarize(l.peer_ns),
                            l.peer_throughput());
    cyc["ratio_vs_peer"] = round3(paired_ratio_median(l.ours_ns, l.peer_ns));
  }
  out["egress_create_exec_destroy"] = std::move(cyc);
  return out;
}

// An update to deny-all must make the next connect fail in the kernel (EPERM); then the policy is restored.
bool update_takes_effect(const Sandbox &sb) {
  const std::string port = std::to_string(kEchoPort);
  const std::vector<const char *> probe{kProbeInSandbox, "tcp", kInternetAddr, port.c_str()};
  check(sandlet_sandbox_net_update(sb.get(), R"({"allow":[]})"), "sandlet_sandbox_net_update(deny all)");
  const std::string denied = exec_stdout(sb, probe);
  check(sandlet_sandbox_net_update(sb.get(), kEgressPolicy), "sandlet_sandbox_net_update(restore)");
  const std::string allowed = exec_stdout(sb, probe);
  return denied.rfind("ERR EPERM", 0) == 0 && allowed.rfind("OK", 0) == 0;
}

// Restores $SANDLET_NET_UPLINK_NETNS as it was (the runtime reads it when it opens).
class UplinkEnv final {
 public:
  explicit UplinkEnv(const std::string &netns) {
    if (const char *v = std::getenv("SANDLET_NET_UPLINK_NETNS")) old_ = v;
    ::setenv("SANDLET_NET_UPLINK_NETNS", netns.c_str(), 1);
  }
  ~UplinkEnv() {
    if (old_) ::setenv("SANDLET_NET_UPLINK_NETNS", old_->c_str(), 1);
    else ::unsetenv("SANDLET_NET_UPLINK_NETNS");
  }
  UplinkEnv(const UplinkEnv &) = delete;
  UplinkEnv &operator=(const UplinkEnv &) = delete;

 private:
  std::optional<std::string> old_;
};

}  // namespace

json::object us_summary(const Summary &s) {
  auto us = [](double ms) { return std::round(ms * 1e4) / 10; };
  json::object o;
  o["count"] = s.count;
  o["p50_us"] = us(s.p50_ms);
  o["p90_us"] = us(s.p90_ms);
  o["p99_us"] = us(s.p99_ms);
  o["mean_us"] = us(s.mean_ms);
  o["min_us"] = us(s.min_ms);
  return o;
}

json::object scenario_net(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  const std::size_t fleet = ctx.opt.sandboxes > 0 ? ctx.opt.sandboxes : kDefaultFleet;
  const fs::path probe = net_probe_path(ctx);
  const std::string probe_bytes = slurp(probe);
  FakeInternet net(/*with_veth=*/ctx.opt.peer);  // before the runtime starts any thread
  UplinkEnv env(net.internet_netns());

  json::object out;
  out["policy"] = kEgressPolicy;
  out["uplink"] = std::string("a network namespace of the bench's (") + kInternetAddr + " on its loopback, TCP echo on " +
                  std::to_string(kEchoPort) + ")";
  pid_t gw = 0;
  {
    Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
    Spec egress(ctx.rootfs);
    egress.set_network_json(kEgressPolicy);
    Sandbox sb = create_sandbox(rt.get(), egress);
    write_file(sb, kProbeInSandbox, probe_bytes, 0755);
    gw = gateway_pid(ctx.root);
    out["connect"] = connect_latency(ctx, sb, probe, net, n, out);
    out["create"] = create_latency(ctx, rt.get(), n);
    out["fleet"] = net_fleet(ctx, rt.get(), fleet, [&] {
      return protect_exposure(ctx, rt.get(), net.internet_netns(), probe_bytes, fleet);
    });
    out["update_deny_all_verified"] = update_takes_effect(sb);
    sb.destroy();
  }
  // The gateway leaves by itself 3 s after its last sandbox; wait for that, so that it is not a leftover.
  bool gone = gw == 0;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = ::kill(gw, 0) != 0;
  }
  out["gateway_exited"] = gone;
  return out;
}

}  // namespace bench
