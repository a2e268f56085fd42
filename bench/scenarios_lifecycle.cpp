// lifecycle: create -> exec /bin/true -> destroy through the library, vs bwrap running /bin/true.
// lifecycle-cli: the same through the `sandlet` CLI as a whole process, vs the same bwrap command.
// run: the one-shot call (sandlet_run: create, /bin/true started by the sandbox's init, destroy) through
// the library, vs the same bwrap command.
#include "capi.hpp"
#include "peers.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "scenarios.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>

namespace bench {
namespace json = boost::json;

namespace {
// Latency, peer and ratio fields shared by both lifecycle scenarios. With idle gaps between iterations
// the wall-clock throughput would measure the gaps: it is left out.
void put_paired(const Context &ctx, json::object &out, const PairedRun &r, const std::optional<Command> &peer_cmd) {
  const bool idle = ctx.opt.idle_ms > 0;
  put_summary(out, summarize(r.ours_ns));
  if (!idle) out["throughput_per_s"] = round3(r.ours_throughput());
  if (peer_cmd) {
    json::object peer = peer_json("bwrap", peer_cmd->str(), summarize(r.peer_ns), r.peer_throughput());
    if (idle) peer.erase("throughput_per_s");
    out["peer"] = std::move(peer);
    out["ratio_vs_peer"] = round3(paired_ratio_median(r.ours_ns, r.peer_ns));
    if (!idle && r.peer_throughput() > 0)
      out["throughput_ratio_vs_peer"] = round3(r.ours_throughput() / r.peer_throughput());
  }
}

// Sleeps the configured idle gap before each timed call (outside the timing).
TimedOp after_idle(const Context &ctx, TimedOp op) {
  if (ctx.opt.idle_ms == 0 || !op) return op;
  return [&ctx, op = std::move(op)](unsigned t) {
    ::usleep(ctx.opt.idle_ms * 1000);
    return op(t);
  };
}

std::optional<Command> bwrap_true(const Context &ctx) {
  if (!ctx.opt.peer) return std::nullopt;
  return bwrap_command(ctx.rootfs, {"/bin/true"});
}
}  // namespace

json::object scenario_lifecycle(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  const unsigned c = ctx.opt.concurrency;
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  // One spec per environment: the rootfs plus a small layer of its own (a task's workspace), so that
  // consecutive creates of an interleaving trainer ask for different root filesystems.
  const unsigned envs = std::max(1u, ctx.opt.environments);
  std::vector<std::unique_ptr<Spec>> specs;
  for (unsigned e = 0; e < envs; ++e) {
    specs.push_back(std::make_unique<Spec>(ctx.rootfs));
    if (envs > 1) {
      const std::filesystem::path dir = ctx.root / ("bench-env-" + std::to_string(e));
      std::filesystem::create_directories(dir / "task");
      std::ofstream(dir / "task" / "id") << e << "\n";
      specs.back()->add_layer(dir);
    }
  }
  std::atomic<std::size_t> next_env{0};

  // Per-phase times, kept only for the paired (reported) iterations.
  std::mutex mu;
  std::vector<std::uint64_t> create_ns, exec_ns, destroy_ns, in_sandbox_ns;

  const auto lifecycle_once = [&](unsigned, bool record) {
    const Spec &spec = *specs[next_env.fetch_add(1) % specs.size()];
    const auto t0 = now_ns();
    Sandbox sb = create_sandbox(rt.get(), spec);
    const auto t1 = now_ns();
    std::uint64_t run_ns = 0;
    exec_ok(sb, {"/bin/true"}, &run_ns);
    const auto t2 = now_ns();
    sb.destroy();
    sb.reset();
    const auto t3 = now_ns();
    if (record) {
      std::lock_guard lock(mu);
      create_ns.push_back(t1 - t0);
      exec_ns.push_back(t2 - t1);
      destroy_ns.push_back(t3 - t2);
      in_sandbox_ns.push_back(run_ns);
    }
    return t3 - t0;
  };
  const auto bwrap = bwrap_true(ctx);
  TimedOp peer;
  if (bwrap) peer = [&](unsigned) { return bwrap->run_ok(); };

  // run_paired calls `ours` warmup times, then n times paired (the reported ones), then n times for
  // throughput; its phases never overlap, so the call count says which phase a call belongs to.
  std::size_t calls = 0;
  const TimedOp ours = [&](unsigned t) {
    bool record;
    {
      std::lock_guard lock(mu);
      ++calls;
      record = calls > ctx.opt.warmup && calls <= ctx.opt.warmup + n;
    }
    return lifecycle_once(t, record);
  };
  const PairedRun r = run_paired(after_idle(ctx, ours), after_idle(ctx, peer), n, c, ctx.opt.warmup);

  json::object out;
  put_paired(ctx, out, r, bwrap);
  json::object phases;
  phases["create_p50_ms"] = round3(summarize(create_ns).p50_ms);
  phases["exec_p50_ms"] = round3(summarize(exec_ns).p50_ms);
  phases["destroy_p50_ms"] = round3(summarize(destroy_ns).p50_ms);
  phases["in_sandbox_run_p50_ms"] = round3(summarize(in_sandbox_ns).p50_ms);
  out["phases"] = phases;
  return out;
}

json::object scenario_run(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  const Spec spec(ctx.rootfs);
  std::mutex mu;
  std::vector<std::uint64_t> in_sandbox_ns;
  std::size_t calls = 0;
  const TimedOp ours = [&](unsigned) {
    const auto t0 = now_ns();
    std::uint64_t run_ns = 0;
    run_ok(rt.get(), spec, {"/bin/true"}, &run_ns);
    const auto t = now_ns() - t0;
    std::lock_guard lock(mu);
    if (++calls > ctx.opt.warmup && calls <= ctx.opt.warmup + n) in_sandbox_ns.push_back(run_ns);
    return t;
  };
  const auto bwrap = bwrap_true(ctx);
  TimedOp peer;
  if (bwrap) peer = [&](unsigned) { return bwrap->run_ok(); };
  const PairedRun r = run_paired(after_idle(ctx, ours), after_idle(ctx, peer), n, ctx.opt.concurrency, ctx.opt.warmup);
  json::object out;
  put_paired(ctx, out, r, bwrap);
  out["in_sandbox_run_p50_ms"] = round3(summarize(in_sandbox_ns).p50_ms);
  return out;
}

json::object scenario_lifecycle_cli(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  const std::string cli = ctx.opt.cli.empty() ? (ctx.exe_dir / "sandlet").string() : ctx.opt.cli;
  if (access(cli.c_str(), X_OK) != 0) throw BenchError("sandlet CLI not found at " + cli + " (pass --cli PATH)");
  const Command cmd({cli, "--root", ctx.root.string(), "run", "--layer", ctx.rootfs.string(), "--", "/bin/true"});
  const TimedOp ours = [&](unsigned) { return cmd.run_ok(); };
  const auto bwrap = bwrap_true(ctx);
  TimedOp peer;
  if (bwrap) peer = [&](unsigned) { return bwrap->run_ok(); };

  const PairedRun r = run_paired(after_idle(ctx, ours), after_idle(ctx, peer), n, ctx.opt.concurrency, ctx.opt.warmup);
  json::object out;
  out["command"] = cmd.str();
  put_paired(ctx, out, r, bwrap);
  return out;
}

}  // namespace bench
