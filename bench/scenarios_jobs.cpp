// pause: N sandboxes of one job (one label), paused all at once by label and resumed (sandlet_jobs.h):
// the time of each call and host memory (MemAvailable) before and after the pause.
#include "capi.hpp"
#include "memory.hpp"
#include "runner.hpp"
#include "scenarios.hpp"
#include "stats.hpp"

#include <sandlet/sandlet_jobs.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <stdexcept>

namespace bench {
namespace json = boost::json;
namespace {

json::object job_call(sandlet_runtime_t *rt, bool pause) {
  char *out = nullptr;
  sandlet_error_t *err = pause ? sandlet_runtime_pause(rt, "bench-job=pause", &out)
                               : sandlet_runtime_resume(rt, "bench-job=pause", &out);
  if (err) {
    std::string msg = std::string(pause ? "pause" : "resume") + " by label: " + sandlet_error_message(err);
    sandlet_error_delete(err);
    throw std::runtime_error(msg);
  }
  json::object o = json::parse(out).as_object();
  sandlet_free(out);
  if (!o.at("failed").as_array().empty()) throw std::runtime_error("pause by label: some failed: " + json::serialize(o));
  return o;
}

std::uint64_t mem_available_kib(const MemSample &s) {
  auto it = s.kib.find("MemAvailable");
  return it == s.kib.end() ? 0 : it->second;
}

}  // namespace

json::object scenario_pause(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  const unsigned c = ctx.opt.concurrency;
  json::object out;
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  std::vector<std::unique_ptr<Spec>> specs;
  for (unsigned t = 0; t < c; ++t) {
    specs.push_back(std::make_unique<Spec>(ctx.rootfs));
    sandlet_spec_set_label(const_cast<sandlet_spec_t *>(specs.back()->get()), "bench-job", "pause");
  }
  std::vector<Sandbox> boxes(n);
  run_parallel(n, c, [&](std::size_t i, unsigned t) { boxes[i] = create_sandbox(rt.get(), *specs[t]); });

  const MemSample before = sample_memory();
  const auto t0 = now_ns();
  json::object p = job_call(rt.get(), true);
  const auto pause_ns = now_ns() - t0;
  const MemSample paused = sample_memory();
  const auto t1 = now_ns();
  json::object r = job_call(rt.get(), false);
  const auto resume_ns = now_ns() - t1;
  // Every one runs again (its next exec would resume it anyway: this checks that the thaw happened).
  run_parallel(n, c, [&](std::size_t i, unsigned) { exec_ok(boxes[i], {"/bin/true"}); });

  out["sandboxes"] = n;
  out["pause_total_ms"] = static_cast<double>(pause_ns) / 1e6;
  out["resume_total_ms"] = static_cast<double>(resume_ns) / 1e6;
  out["pause_result"] = std::move(p);
  out["resume_result"] = std::move(r);
  out["mem_available_before_kib"] = mem_available_kib(before);
  out["mem_available_paused_kib"] = mem_available_kib(paused);
  run_parallel(n, c, [&](std::size_t i, unsigned) {
    boxes[i].destroy();
    boxes[i].reset();
  });
  return out;
}

// qos: the step latency of a latency-sensitive sandbox (a CPU-bound shell loop, its in-sandbox run time)
// alone, then with best-effort sandboxes spinning on half of the machine's CPUs, then on all of them — each
// once all in the default class (what a host without classes gives) and once with the spinners labelled
// "sandlet/priority=batch".
namespace {

constexpr const char *kStep = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done";

std::vector<std::uint64_t> steps(const Sandbox &sb, std::size_t n) {
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < n; ++i) {
    throw_if_stopped();
    std::uint64_t run_ns = 0;
    exec_ok(sb, {"sh", "-c", kStep}, &run_ns);
    out.push_back(run_ns);
  }
  return out;
}

void start_spinner(const Sandbox &sb) {
  const char *argv[] = {"sh", "-c", "(while :; do :; done) >/dev/null 2>&1 &", nullptr};
  sandlet_exec_options_t o = SANDLET_EXEC_OPTIONS_INIT;
  o.argv = argv;
  o.keep_background = 1;
  sandlet_exec_result_t *r = nullptr;
  if (sandlet_error_t *err = sandlet_sandbox_exec(sb.get(), &o, &r)) {
    std::string msg = std::string("qos: starting a spinner: ") + sandlet_error_message(err);
    sandlet_error_delete(err);
    throw std::runtime_error(msg);
  }
  sandlet_exec_result_delete(r);
}

// Steps of `probe` while `spinners` sandboxes (made with `label` or none) each keep one CPU busy.
std::vector<std::uint64_t> loaded_steps(sandlet_runtime_t *rt, const Context &ctx, const Sandbox &probe,
                                        unsigned spinners, bool batch, std::size_t n) {
  Spec spec(ctx.rootfs);
  if (batch) sandlet_spec_set_label(const_cast<sandlet_spec_t *>(spec.get()), "sandlet/priority", "batch");
  std::vector<Sandbox> load;
  for (unsigned i = 0; i < spinners; ++i) {
    load.push_back(create_sandbox(rt, spec));
    start_spinner(load.back());
  }
  auto out = steps(probe, n);
  for (auto &sb : load) sb.destroy();
  return out;
}

json::object step_summary(const std::vector<std::uint64_t> &ns) {
  json::object o;
  put_summary(o, summarize(ns));
  o.erase("cdf_ms");
  return o;
}

}  // namespace

json::object scenario_qos(const Context &ctx) {
  const std::size_t n = iterations_of(ctx);
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  const unsigned spinners = std::max(1u, cpus / 2);  // 50% of the machine
  Runtime rt(ctx.root, ctx.opt.workers, ctx.opt.warm_pool);
  Spec spec(ctx.rootfs);
  Sandbox probe = create_sandbox(rt.get(), spec);
  steps(probe, 3);  // warm-up
  const auto alone = steps(probe, n);
  const auto same_class = loaded_steps(rt.get(), ctx, probe, spinners, false, n);
  const auto with_classes = loaded_steps(rt.get(), ctx, probe, spinners, true, n);
  // Every CPU busy with best-effort work as well: the probe then has to share one.
  const auto saturated_same = loaded_steps(rt.get(), ctx, probe, cpus, false, n);
  const auto saturated_classes = loaded_steps(rt.get(), ctx, probe, cpus, true, n);
  probe.destroy();
  const double base = summarize(alone).p50_ms;
  const auto slowdown = [&](const std::vector<std::uint64_t> &ns) { return round3(100.0 * (summarize(ns).p50_ms / base - 1)); };
  json::object out;
  out["cpus"] = cpus;
  out["best_effort_spinners"] = spinners;
  out["alone"] = step_summary(alone);
  out["loaded_without_classes"] = step_summary(same_class);
  out["loaded_with_classes"] = step_summary(with_classes);
  out["slowdown_without_classes_pct"] = slowdown(same_class);
  out["slowdown_with_classes_pct"] = slowdown(with_classes);
  out["saturated_spinners"] = cpus;
  out["saturated_without_classes"] = step_summary(saturated_same);
  out["saturated_with_classes"] = step_summary(saturated_classes);
  out["saturated_slowdown_without_classes_pct"] = slowdown(saturated_same);
  out["saturated_slowdown_with_classes_pct"] = slowdown(saturated_classes);
  return out;
}

}  // namespace bench
