// pause: N sandboxes of one job (one label), paused all at once by label and resumed (sandlet_jobs.h):
// the time of each call and host memory (MemAvailable) before and after the pause.
#include "capi.hpp"
#include "memory.hpp"
#include "runner.hpp"
#include "scenarios.hpp"

#include <sandlet/sandlet_jobs.h>

#include <memory>
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

}  // namespace bench
