// idle-density: N idle sandboxes; host memory per sandbox from MemAvailable, Pss of their processes,
// create and destroy times. Peer: N idle bwrap sandboxes running /bin/sleep.
#include "capi.hpp"
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

namespace {
// Meminfo fields whose change says where the memory went (kB).
const char *const kMemFields[] = {"MemAvailable", "MemFree", "Slab", "SUnreclaim", "KernelStack", "PageTables",
                                  "Shmem", "AnonPages"};

struct MemSample {
  std::map<std::string, std::uint64_t> kib;  // median of the samples, per field
  std::uint64_t spread_kib = 0;              // max - min of MemAvailable across the samples
};

// Median of 5 readings 100 ms apart: other work on the host moves MemAvailable too.
MemSample sample_memory() {
  std::vector<std::map<std::string, std::uint64_t>> reads;
  for (int i = 0; i < 5; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reads.push_back(meminfo());
  }
  MemSample s;
  for (const char *f : kMemFields) {
    std::vector<std::uint64_t> v;
    for (auto &r : reads) v.push_back(r[f]);
    std::sort(v.begin(), v.end());
    s.kib[f] = v[v.size() / 2];
    if (std::string(f) == "MemAvailable") s.spread_kib = v.back() - v.front();
  }
  return s;
}

void settle(const Context &ctx) {
  const auto until = now_ns() + static_cast<std::uint64_t>(ctx.opt.settle_s * 1e9);
  while (now_ns() < until) {
    throw_if_stopped();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::uint64_t pss_sum_kib(const std::set<pid_t> &pids) {
  std::uint64_t sum = 0;
  for (pid_t p : pids) sum += proc_pss_kib(p);
  return sum;
}

// Memory fields for n sandboxes between two samples.
void put_memory(json::object &out, const MemSample &before, const MemSample &after, std::size_t n,
                const std::set<pid_t> &pids) {
  const double per = 1.0 / static_cast<double>(n);
  auto delta = [&](const char *f) {  // how much more of f is used (MemAvailable/MemFree: less available)
    const double b = static_cast<double>(before.kib.at(f)), a = static_cast<double>(after.kib.at(f));
    const bool is_free = std::string(f) == "MemAvailable" || std::string(f) == "MemFree";
    return is_free ? b - a : a - b;
  };
  out["memory_per_sandbox_mib"] = round3(delta("MemAvailable") * per / 1024.0);
  out["pss_per_sandbox_kib"] = round3(static_cast<double>(pss_sum_kib(pids)) * per);
  out["processes_per_sandbox"] = round3(static_cast<double>(pids.size()) * per);
  json::object fields;
  for (const char *f : kMemFields) fields[f] = round3(delta(f) * per);
  out["meminfo_delta_per_sandbox_kib"] = fields;
  // How much MemAvailable moved while nothing changed on our side (other work on the host):
  // per-sandbox figures are only as good as this divided by n.
  const auto noise = std::max(before.spread_kib, after.spread_kib);
  out["memavailable_noise_kib"] = noise;
  out["memavailable_noise_per_sandbox_mib"] = round3(static_cast<double>(noise) * per / 1024.0);
}
}  // namespace

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
