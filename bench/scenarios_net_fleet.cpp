// net, the fleet part: N idle sandboxes with egress, then N with network "none", measured as idle-density
// measures (MemAvailable before/after, Pss of their processes), plus what the node gateway grows by per
// attached sandbox; and the latency of `sandlet_sandbox_net_update` over the N egress sandboxes (one each,
// to a narrower policy) while all of them are attached.
#include "capi.hpp"
#include "memory.hpp"
#include "proc.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "scenarios_net.hpp"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>

namespace bench {
namespace json = boost::json;

namespace {

struct ProcMem {
  std::uint64_t rss_kib = 0, pss_kib = 0;
};

ProcMem proc_mem(pid_t pid) {
  ProcMem m;
  if (pid <= 0) return m;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) m.rss_kib = std::stoull(line.substr(6));
  m.pss_kib = proc_pss_kib(pid);
  return m;
}

std::set<pid_t> sandbox_pids() {
  std::set<pid_t> pids = cgroup_pids(cgroups_matching(SandboxRegistry::instance().ids()));
  for (pid_t p : descendants(getpid())) pids.insert(p);
  pids.erase(getpid());
  return pids;
}

// Creates n sandboxes of `spec_json` at concurrency C; memory and times into `out`. Keeps them in `boxes`.
void create_arm(const Context &ctx, sandlet_runtime_t *rt, const std::string &spec_json, std::size_t n,
                std::vector<Sandbox> &boxes, json::object &out) {
  const unsigned c = ctx.opt.concurrency;
  std::vector<std::unique_ptr<Spec>> specs;
  for (unsigned t = 0; t < c; ++t) {
    specs.push_back(std::make_unique<Spec>(ctx.rootfs));
    specs.back()->set_network_json(spec_json);
  }
  settle(ctx);
  const MemSample before = sample_memory();
  boxes.resize(n);
  std::vector<std::uint64_t> create_ns(n);
  const auto t0 = now_ns();
  run_parallel(n, c, [&](std::size_t i, unsigned t) {
    const auto t1 = now_ns();
    boxes[i] = create_sandbox(rt, *specs[t]);
    create_ns[i] = now_ns() - t1;
  });
  const double create_s = static_cast<double>(now_ns() - t0) / 1e9;
  settle(ctx);
  const MemSample after = sample_memory();
  put_latency(out, summarize(create_ns), static_cast<double>(n) / create_s);
  out["create_total_ms"] = round3(create_s * 1e3);
  put_memory(out, before, after, n, sandbox_pids());
}

void destroy_all(const Context &ctx, std::vector<Sandbox> &boxes, json::object &out) {
  const auto t0 = now_ns();
  run_parallel(boxes.size(), ctx.opt.concurrency, [&](std::size_t i, unsigned) {
    boxes[i].destroy();
    boxes[i].reset();
  });
  out["destroy_total_ms"] = round3(static_cast<double>(now_ns() - t0) / 1e6);
  boxes.clear();
}

// One update per sandbox, to the narrower policy (every sandbox attached meanwhile), each call timed.
json::object update_all(const Context &ctx, std::vector<Sandbox> &boxes) {
  std::vector<std::uint64_t> ns(boxes.size());
  const auto t0 = now_ns();
  run_parallel(boxes.size(), ctx.opt.concurrency, [&](std::size_t i, unsigned) {
    const auto t1 = now_ns();
    check(sandlet_sandbox_net_update(boxes[i].get(), kEgressPolicyPort), "sandlet_sandbox_net_update");
    ns[i] = now_ns() - t1;
  });
  const double total_ms = static_cast<double>(now_ns() - t0) / 1e6;
  json::object out;
  put_latency(out, summarize(ns), static_cast<double>(ns.size()) / (total_ms / 1e3));
  out["updates"] = ns.size();
  out["concurrency"] = ctx.opt.concurrency;
  out["total_ms"] = round3(total_ms);
  return out;
}

}  // namespace

pid_t gateway_pid(const std::filesystem::path &root) {
  std::ifstream f(root / "netgw" / "lock");
  long supervisor = 0;
  if (!(f >> supervisor) || supervisor <= 0) return 0;
  std::ifstream children("/proc/" + std::to_string(supervisor) + "/task/" + std::to_string(supervisor) + "/children");
  long pid = 0;
  if (!(children >> pid) || pid <= 0) return 0;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 ? static_cast<pid_t>(pid) : 0;
}

json::object net_fleet(const Context &ctx, sandlet_runtime_t *rt, std::size_t n,
                       const std::function<json::object()> &with_fleet) {
  json::object out;
  out["sandboxes"] = n;
  const pid_t gw = gateway_pid(ctx.root);
  const ProcMem gw_before = proc_mem(gw);

  std::vector<Sandbox> boxes;
  json::object egress;
  create_arm(ctx, rt, kEgressPolicy, n, boxes, egress);
  const pid_t gw_after_pid = gateway_pid(ctx.root);
  const ProcMem gw_after = proc_mem(gw_after_pid);
  json::object gateway;
  gateway["pid_unchanged"] = gw > 0 && gw == gw_after_pid;
  gateway["rss_kib_before"] = gw_before.rss_kib;
  gateway["rss_kib_after"] = gw_after.rss_kib;
  gateway["pss_kib_before"] = gw_before.pss_kib;
  gateway["pss_kib_after"] = gw_after.pss_kib;
  gateway["rss_growth_per_sandbox_kib"] =
      round3((static_cast<double>(gw_after.rss_kib) - static_cast<double>(gw_before.rss_kib)) / static_cast<double>(n));
  egress["gateway"] = std::move(gateway);
  out["update"] = update_all(ctx, boxes);
  if (with_fleet) out["protect"] = with_fleet();
  destroy_all(ctx, boxes, egress);
  out["egress"] = std::move(egress);

  json::object none;
  create_arm(ctx, rt, "none", n, boxes, none);
  destroy_all(ctx, boxes, none);
  const double e = out["egress"].as_object()["memory_per_sandbox_mib"].to_number<double>();
  const double z = none["memory_per_sandbox_mib"].to_number<double>();
  out["none"] = std::move(none);
  out["memory_extra_per_egress_sandbox_mib"] = round3(e - z);
  if (z > 0) out["memory_ratio_egress_vs_none"] = round3(e / z);
  return out;
}

}  // namespace bench
