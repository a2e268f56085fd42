// idle-density: N idle sandboxes; host memory per sandbox from MemAvailable, Pss of their processes,
// create and destroy times. Peer: N idle bwrap sandboxes running /bin/sleep.
#include "capi.hpp"
#include "memory.hpp"
#include "peers.hpp"
#include "proc.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "scenarios.hpp"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <thread>

namespace bench {
namespace json = boost::json;


json::object scenario_idle_density(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  const unsigned c = ctx.opt.concurrency;
  json::object out;
  {
    Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
    std::vector<std::unique_ptr<Spec>> specs;
    for (unsigned t = 0; t < c; ++t) specs.push_back(std::make_unique<Spec>(ctx.rootfs));
    settle(ctx);
    const MemSample before = sample_memory();

    std::vector<Sandbox> boxes(n);
    std::vector<std::uint64_t> create_ns(n);
    auto t0 = now_ns();
    run_parallel(n, c, [&](std::size_t i, unsigned t) {
      const auto t1 = now_ns();
      boxes[i] = create_sandbox(rt.get(), *specs[t]);
      create_ns[i] = now_ns() - t1;
    });
    const double create_s = static_cast<double>(now_ns() - t0) / 1e9;

    settle(ctx);
    const MemSample after = sample_memory();
    // Their processes: our descendants and whatever sits in their cgroups.
    const auto ids = SandboxRegistry::instance().ids();
    std::set<pid_t> pids = cgroup_pids(cgroups_matching(ids));
    for (pid_t p : descendants(getpid())) pids.insert(p);
    pids.erase(getpid());

    put_latency(out, summarize(create_ns), static_cast<double>(n) / create_s);
    out["create_total_ms"] = round3(create_s * 1e3);
    put_memory(out, before, after, n, pids);

    // Still alive after the settle time (created by threads that have exited meanwhile)?
    run_parallel(n, c, [&](std::size_t i, unsigned) { exec_ok(boxes[i], {"/bin/true"}); });
    out["verified_alive"] = n;

    t0 = now_ns();
    run_parallel(n, c, [&](std::size_t i, unsigned) {
      boxes[i].destroy();
      boxes[i].reset();
    });
    out["destroy_total_ms"] = round3(static_cast<double>(now_ns() - t0) / 1e6);
  }

  if (ctx.opt.peer) {
    settle(ctx);
    const MemSample before = sample_memory();
    IdleBwrapFleet fleet(ctx.rootfs);
    const auto t0 = now_ns();
    const auto start_ns = fleet.start(n, c);
    const double start_s = static_cast<double>(now_ns() - t0) / 1e9;
    settle(ctx);
    const MemSample after = sample_memory();
    std::set<pid_t> pids;
    for (pid_t p : fleet.pids()) {
      pids.insert(p);
      for (pid_t d : descendants(p)) pids.insert(d);
    }
    json::object peer = peer_json("bwrap", fleet.command(), summarize(start_ns), static_cast<double>(n) / start_s);
    peer["create_total_ms"] = round3(start_s * 1e3);
    put_memory(peer, before, after, n, pids);
    const auto k0 = now_ns();
    fleet.kill_all();
    peer["destroy_total_ms"] = round3(static_cast<double>(now_ns() - k0) / 1e6);

    const double ours_mem = out["memory_per_sandbox_mib"].to_number<double>();
    const double peer_mem = peer["memory_per_sandbox_mib"].to_number<double>();
    if (peer_mem > 0) out["ratio_vs_peer"] = round3(ours_mem / peer_mem);
    if (peer["p50_ms"].to_number<double>() > 0)
      out["create_ratio_vs_peer"] = round3(out["p50_ms"].to_number<double>() / peer["p50_ms"].to_number<double>());
    out["peer"] = std::move(peer);
  }
  return out;
}

}  // namespace bench
