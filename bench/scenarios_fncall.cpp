// fncall: sandlet_call of /bin/true in the runtime's pooled containers (FnCall), alone, then vs a one-shot
// sandlet_run per call (paired, the same run) and bwrap per call. The pool's max size is the concurrency, so that every
// caller holds a container of its own once warm.
#include "capi.hpp"
#include "peers.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "scenarios.hpp"

#include "sandlet/sandlet_fncall.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>

namespace bench {
namespace json = boost::json;

namespace {

std::uint64_t call_true(sandlet_runtime_t *rt, const std::string &spec_json) {
  static const char *const argv[] = {"/bin/true", nullptr};
  sandlet_call_options_t o = SANDLET_CALL_OPTIONS_INIT;
  o.spec_json = spec_json.c_str();
  o.argv = argv;
  sandlet_exec_result_t *r = nullptr;
  const auto t0 = now_ns();
  if (sandlet_error_t *e = sandlet_call(rt, &o, &r)) {
    std::string m = sandlet_error_message(e);
    sandlet_error_delete(e);
    throw BenchError("sandlet_call: " + m);
  }
  const auto t = now_ns() - t0;
  const int code = sandlet_exec_result_exit_code(r);
  sandlet_exec_result_delete(r);
  if (code != 0) throw BenchError("sandlet_call of /bin/true exited " + std::to_string(code));
  return t;
}

}  // namespace

json::object scenario_fncall(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  const unsigned c = ctx.opt.concurrency;
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  const Spec spec(ctx.rootfs);
  char *js = nullptr;
  if (sandlet_error_t *e = sandlet_spec_to_json(spec.get(), &js)) {
    sandlet_error_delete(e);
    throw BenchError("sandlet_spec_to_json failed");
  }
  const std::string spec_json = js;
  sandlet_free(js);
  sandlet_fncall_pool_options_t p = SANDLET_FNCALL_POOL_OPTIONS_INIT;
  p.max_size = c;
  if (sandlet_error_t *e = sandlet_runtime_set_fncall_pool(rt.get(), spec_json.c_str(), &p)) {
    sandlet_error_delete(e);
    throw BenchError("sandlet_runtime_set_fncall_pool failed");
  }
  const TimedOp ours = [&](unsigned) { return call_true(rt.get(), spec_json); };
  const TimedOp run_once = [&](unsigned) {
    const auto t0 = now_ns();
    run_ok(rt.get(), spec, {"/bin/true"});
    return now_ns() - t0;
  };
  // The calls alone first: paired with a peer, each call also shares the machine with the teardown the
  // peer's previous run left in the background (a sandbox's reclaim, bwrap's namespaces).
  const PairedRun alone = run_paired(ours, TimedOp(), n, c, ctx.opt.warmup);
  const PairedRun r = run_paired(ours, run_once, n, c, ctx.opt.warmup);
  json::object out;
  json::object alone_out;
  put_summary(alone_out, summarize(alone.ours_ns));
  alone_out["throughput_per_s"] = round3(alone.ours_throughput());
  out["alone"] = std::move(alone_out);
  put_summary(out, summarize(r.ours_ns));
  out["throughput_per_s"] = round3(r.ours_throughput());
  out["run_once"] = peer_json("sandlet_run", "sandlet_run /bin/true per call", summarize(r.peer_ns), r.peer_throughput());
  out["ratio_vs_run_once"] = round3(paired_ratio_median(r.ours_ns, r.peer_ns));
  if (ctx.opt.peer) {
    const Command bwrap = bwrap_command(ctx.rootfs, {"/bin/true"});
    const PairedRun b = run_paired(ours, [&](unsigned) { return bwrap.run_ok(); }, n, c, ctx.opt.warmup);
    out["peer"] = peer_json("bwrap", bwrap.str(), summarize(b.peer_ns), b.peer_throughput());
    out["ratio_vs_peer"] = round3(paired_ratio_median(b.ours_ns, b.peer_ns));
    if (b.peer_throughput() > 0) out["throughput_ratio_vs_peer"] = round3(b.ours_throughput() / b.peer_throughput());
  }
  char *stats = nullptr;
  if (!sandlet_runtime_fncall_stats_json(rt.get(), &stats)) {
    out["pool"] = json::parse(stats);
    sandlet_free(stats);
  }
  return out;
}

}  // namespace bench

namespace bench {

// pool: the hand-over time alone (a call taking an idle container), under a burst of N calls of /bin/true
// from C threads at once into a pool made full beforehand (min_idle = max_size = C): the pool's own
// percentiles (sandlet_runtime_fncall_stats_json), plus the burst's wall time.
json::object scenario_pool(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  const unsigned c = std::max(1u, ctx.opt.concurrency);
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  const Spec spec(ctx.rootfs);
  char *js = nullptr;
  if (sandlet_error_t *e = sandlet_spec_to_json(spec.get(), &js)) {
    sandlet_error_delete(e);
    throw BenchError("sandlet_spec_to_json failed");
  }
  const std::string spec_json = js;
  sandlet_free(js);
  sandlet_fncall_pool_options_t p = SANDLET_FNCALL_POOL_OPTIONS_INIT;
  p.max_size = c;
  p.min_idle = c;
  if (sandlet_error_t *e = sandlet_runtime_set_fncall_pool(rt.get(), spec_json.c_str(), &p)) {
    sandlet_error_delete(e);
    throw BenchError("sandlet_runtime_set_fncall_pool failed");
  }
  auto stats = [&] {
    char *s = nullptr;
    if (sandlet_error_t *e = sandlet_runtime_fncall_stats_json(rt.get(), &s)) {
      sandlet_error_delete(e);
      throw BenchError("sandlet_runtime_fncall_stats_json failed");
    }
    auto v = json::parse(s).as_object().at("pools").as_array().at(0).as_object();
    sandlet_free(s);
    return v;
  };
  for (int i = 0; i < 600 && stats().at("idle").to_number<std::size_t>() < c; ++i) ::usleep(10000);
  const auto t0 = now_ns();
  std::vector<std::uint64_t> ns(n);
  run_parallel(n, c, [&](std::size_t i, unsigned) { ns[i] = call_true(rt.get(), spec_json); });
  const double wall_s = static_cast<double>(now_ns() - t0) / 1e9;
  json::object out;
  const auto s = stats();
  out["handover_p50_us"] = s.at("handover_p50_us");
  out["handover_p99_us"] = s.at("handover_p99_us");
  out["handovers"] = s.at("handovers");
  out["created"] = s.at("created");
  out["call_p50_ms"] = round3(summarize(ns).p50_ms);
  out["call_p99_ms"] = round3(summarize(ns).p99_ms);
  out["burst_wall_s"] = round3(wall_s);
  out["throughput_per_s"] = round3(static_cast<double>(n) / wall_s);
  return out;
}

}  // namespace bench
