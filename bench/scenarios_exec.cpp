// exec: one sandbox, N execs of /bin/true (at --concurrency C, and sequentially when C > 1), vs a plain
// fork+exec of the host's /bin/true as a floor.
#include "capi.hpp"
#include "peers.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "scenarios.hpp"

#include <mutex>
#include <optional>

namespace bench {
namespace json = boost::json;

namespace {
json::object exec_run(const Context &ctx, const Sandbox &sb, unsigned concurrency, std::size_t warmup) {
  const std::size_t n = iterations_of(ctx);
  std::mutex mu;
  std::vector<std::uint64_t> in_sandbox_ns;
  const TimedOp ours = [&](unsigned) {
    std::uint64_t run_ns = 0;
    const auto t0 = now_ns();
    exec_ok(sb, {"/bin/true"}, &run_ns);
    const auto t = now_ns() - t0;
    std::lock_guard lock(mu);
    in_sandbox_ns.push_back(run_ns);
    return t;
  };
  std::optional<Command> floor;
  TimedOp peer;
  if (ctx.opt.peer) {
    floor.emplace(host_true());
    peer = [&](unsigned) { return floor->run_ok(); };
  }
  const PairedRun r = run_paired(ours, peer, n, concurrency, warmup);

  json::object out;
  put_latency(out, summarize(r.ours_ns), r.ours_throughput());
  // The library's own figure: spawn to exit inside the sandbox, i.e. without the request path.
  out["in_sandbox_run_p50_ms"] = round3(summarize(in_sandbox_ns).p50_ms);
  if (floor) {
    out["peer"] = peer_json("host-fork-exec", floor->str(), summarize(r.peer_ns), r.peer_throughput());
    out["ratio_vs_peer"] = round3(paired_ratio_median(r.ours_ns, r.peer_ns));
  }
  return out;
}
}  // namespace

json::object scenario_exec(const Context &ctx) {
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  const Spec spec(ctx.rootfs);
  Sandbox sb = create_sandbox(rt.get(), spec);

  json::object out = exec_run(ctx, sb, ctx.opt.concurrency, ctx.opt.warmup);
  if (ctx.opt.concurrency > 1) {
    json::object seq = exec_run(ctx, sb, 1, 0);
    seq["concurrency"] = 1;
    out["sequential"] = seq;
  }
  sb.destroy();
  return out;
}

}  // namespace bench
