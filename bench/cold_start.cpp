// cold-start (issue 17): time to the first and to the last of N sandboxes done with a realistic command
// on a >= 1 GB image held by a store behind a throttled link, and the bytes it took, for three ways of
// getting the image onto a fresh node:
//   eager  sandlet_layer_pull(..., 0) of the pushed layer, then N sandboxes on it;
//   untar  one plain HTTP GET of a tar of the image, streamed into `tar -x`, then N sandboxes with the
//          directory as a host-directory layer (sandlet_spec_add_layer with an absolute path);
//   lazy   sandlet_layer_pull(..., SANDLET_PULL_LAZY), then N sandboxes at once;
//   warm   afterwards, N fresh sandboxes on the warm lazy layer and N on the eager one (steady-state cost).
// The store: a temp directory served by nginx on 127.0.0.1, behind bench/throttle_proxy.py (--rate MB/s).
// An arm whose call answers UNIMPLEMENTED (a kernel without lazy layers gets an eager pull, said in its result)
// reports {"skipped": reason}; the untar arm needs none of them. Set-up helpers: cold_start_setup.cpp.
#include "cold_start.hpp"

#include "report.hpp"
#include "rootfs.hpp"
#include "scenarios.hpp"
#include "stats.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <memory>
#include <optional>
#include <thread>

namespace bench {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {
struct Wave {
  std::vector<double> done_s;   // per sandbox: from the arm's start to its command's exit
  std::vector<double> exec_s;   // per sandbox: the exec alone (request to exit)
  std::string output;           // the first sandbox's stdout
  bool identical = true;        // every sandbox printed the same
};

// N sandboxes on [layer], created and run at once (one thread each); their commands' times from t0.
Wave run_wave(sandlet_runtime_t *rt, const std::string &layer, const Workload &w, std::size_t n, std::uint64_t t0,
              double timeout_s) {
  Wave wave;
  wave.done_s.assign(n, 0);
  wave.exec_s.assign(n, 0);
  std::vector<std::string> outs(n);
  std::vector<Sandbox> sbs(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        WorkloadSpec spec(layer, w);
        sbs[i] = spec.create(rt);
        const auto e0 = now_ns();
        outs[i] = run_workload(sbs[i], w, timeout_s);
        const auto e1 = now_ns();
        wave.exec_s[i] = static_cast<double>(e1 - e0) / 1e9;
        wave.done_s[i] = static_cast<double>(e1 - t0) / 1e9;
      } catch (const std::exception &e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto &t : threads) t.join();
  threads.clear();
  for (std::size_t i = 0; i < n; ++i)  // destroy in parallel: 32 reclaims of big uppers
    threads.emplace_back([&, i] {
      try {
        if (sbs[i]) sbs[i].destroy();
      } catch (const std::exception &) {
      }
      sbs[i].reset();
    });
  for (auto &t : threads) t.join();
  for (const auto &e : errors)
    if (!e.empty()) throw BenchError("sandbox on " + layer + ": " + e);
  wave.output = outs.empty() ? "" : outs[0];
  for (const auto &o : outs) wave.identical = wave.identical && o == wave.output;
  return wave;
}

void put_wave(json::object &o, const Wave &w) {
  o["t_first_done_s"] = round3(*std::min_element(w.done_s.begin(), w.done_s.end()));
  o["t_all_done_s"] = round3(*std::max_element(w.done_s.begin(), w.done_s.end()));
  json::object e;
  std::vector<double> s = w.exec_s;
  std::sort(s.begin(), s.end());
  e["p50"] = round3(percentile(s, 50));
  e["min"] = round3(s.front());
  e["max"] = round3(s.back());
  o["exec_s"] = e;
  o["output"] = w.output;
  o["outputs_identical"] = w.identical;
}

double num(const json::object &o, const char *k) {
  const auto *v = o.if_contains(k);
  return v != nullptr && v->is_number() ? v->to_number<double>() : 0.0;
}

json::value ratio_or_null(double a, double b) { return a > 0 && b > 0 ? json::value(round3(a / b)) : json::value(nullptr); }

// The comparisons the issue asks for, against `base` (the eager pull; also given against untar).
json::object ratios(const json::object &arm, const json::object &base) {
  json::object r;
  r["first_done_speedup"] = ratio_or_null(num(base, "t_first_done_s"), num(arm, "t_first_done_s"));
  r["all_done_speedup"] = ratio_or_null(num(base, "t_all_done_s"), num(arm, "t_all_done_s"));
  r["disk_write_ratio"] = ratio_or_null(num(arm, "bytes_written_local"), num(base, "bytes_written_local"));
  r["bytes_fetched_ratio"] = ratio_or_null(num(arm, "bytes_fetched"), num(base, "bytes_fetched"));
  return r;
}

bool measured(const json::object &o, const char *arm) {
  const auto *a = o.if_contains(arm);
  return a != nullptr && a->is_object() && !a->as_object().contains("skipped") && !a->as_object().contains("error");
}
}  // namespace

json::object scenario_cold_start(const Context &ctx) {
  ColdStart cs(ctx);  // image, tarball, server, proxy, source runtime and the push (cold_start_setup.cpp)
  json::object out = cs.setup_json();
  const std::size_t n = cs.n();
  const double timeout_s = cs.timeout_s();

  // One arm: a fresh runtime root, the store's files dropped from the page cache, then `prepare` (pull or
  // untar, returns the layer ref) and the wave, all timed from the same start.
  const auto arm = [&](const std::string &name, const std::function<std::string(json::object &, sandlet_runtime_t *)> &prepare) {
    json::object a;
    if (std::string why = cs.unavailable(name); !why.empty()) {
      a["skipped"] = why;
      return a;
    }
    try {
      throw_if_stopped();
      const fs::path root = cs.arm_root(name);
      std::optional<Runtime> rt;
      rt.emplace(root, ctx.opt.workers, ctx.opt.warm_pool, ctx.opt.fetch_unit);
      a["page_cache_dropped_bytes"] = drop_page_cache(cs.www());
      const std::uint64_t dev0 = cs.device().written_bytes();
      const std::uint64_t net0 = cs.proxy().down_bytes();
      const auto t0 = now_ns();
      const std::string layer = prepare(a, rt->get());
      a["t_ready_s"] = round3(static_cast<double>(now_ns() - t0) / 1e9);
      const Wave w = run_wave(rt->get(), layer, cs.workload(), n, t0, timeout_s);
      const double wall = static_cast<double>(now_ns() - t0) / 1e9;
      const std::uint64_t dev1 = cs.device().written_bytes();
      const std::uint64_t net1 = cs.proxy().down_bytes();
      put_wave(a, w);
      a["layer"] = layer;
      a["bytes_fetched"] = net1 - net0;
      a["image_bytes"] = cs.image_bytes();
      a["fraction"] = round3(static_cast<double>(net1 - net0) / static_cast<double>(cs.image_bytes()));
      a["bytes_written_local"] = dev1 - dev0;
      a["bytes_written_local_less_background"] =
          static_cast<std::uint64_t>(std::max(0.0, static_cast<double>(dev1 - dev0) - cs.background_write_bps() * wall));
      rt.reset();  // close before measuring what stays on disk
      a["root_allocated_bytes"] = allocated_bytes(root);
      cs.check_output(name, w.output, w.identical);
    } catch (const std::exception &e) {
      if (g_stop) throw;
      a["error"] = e.what();
      std::fprintf(stderr, "sandlet-bench: cold-start: arm %s: %s\n", name.c_str(), e.what());
    }
    return a;
  };

  const auto pull_prepare = [&](bool lazy) {
    return [&, lazy](json::object &a, sandlet_runtime_t *rt) {
      const json::object res = cs.pull(rt, lazy);
      a["pull_result"] = res;
      if (lazy && res.contains("lazy") && !res.at("lazy").as_bool()) a["not_lazy"] = true;
      return cs.layer_digest();
    };
  };

  json::object arms;
  for (const std::string &name : cs.arms()) {
    std::fprintf(stderr, "sandlet-bench: cold-start: arm %s\n", name.c_str());
    if (name == "eager") {
      arms["eager"] = arm("eager", pull_prepare(false));
    } else if (name == "lazy") {
      json::object a = arm("lazy", pull_prepare(true));
      if (!a.contains("skipped") && !a.contains("error")) a["loader_status"] = cs.loader_status("lazy");
      arms["lazy"] = std::move(a);
    } else if (name == "untar") {
      arms["untar"] = arm("untar", [&](json::object &a, sandlet_runtime_t *) { return cs.untar(a); });
    }
  }

  // Steady state: fresh sandboxes on the now-warm layers, eager and lazy alternating, each round the same N.
  if (std::find(cs.arms().begin(), cs.arms().end(), "warm") != cs.arms().end()) {
    json::object warm;
    if (!measured(arms, "eager") || !measured(arms, "lazy")) {
      warm["skipped"] = "needs the eager and the lazy arm of this run";
    } else {
      try {
        std::vector<double> lazy_all, eager_all, lazy_p50, eager_p50;
        json::array rounds;
        for (unsigned r = 0; r < cs.warm_rounds(); ++r) {
          json::object round;
          for (int k = 0; k < 2; ++k) {
            const bool lazy = (k == 0) == (r % 2 == 1);  // round 0: eager first; round 1: lazy first; ...
            const std::string side = lazy ? "lazy" : "eager";
            throw_if_stopped();
            Runtime rt(cs.arm_root(side, /*fresh=*/false), ctx.opt.workers, ctx.opt.warm_pool, ctx.opt.fetch_unit);
            const Wave w = run_wave(rt.get(), cs.layer_digest(), cs.workload(), n, now_ns(), timeout_s);
            json::object s;
            put_wave(s, w);
            cs.check_output("warm " + side, w.output, w.identical);
            (lazy ? lazy_all : eager_all).push_back(num(s, "t_all_done_s"));
            std::vector<double> e = w.exec_s;
            (lazy ? lazy_p50 : eager_p50).push_back(median(e));
            round[side] = s;
          }
          rounds.push_back(round);
        }
        warm["rounds"] = rounds;
        warm["lazy_over_eager_all_done"] = round3(median(lazy_all) / median(eager_all));
        warm["lazy_over_eager_exec_p50"] = round3(median(lazy_p50) / median(eager_p50));
        warm["loader_status"] = cs.loader_status("lazy");
      } catch (const std::exception &e) {
        if (g_stop) throw;
        warm["error"] = e.what();
      }
    }
    arms["warm"] = warm;
  }

  // Ratios against the eager pull (the comparison) and, for reference, against untar.
  json::object vs_eager, vs_untar;
  for (const char *a : {"untar", "lazy"})
    if (measured(arms, "eager") && measured(arms, a)) vs_eager[a] = ratios(arms[a].as_object(), arms["eager"].as_object());
  for (const char *a : {"eager", "lazy"})
    if (measured(arms, "untar") && measured(arms, a)) vs_untar[a] = ratios(arms[a].as_object(), arms["untar"].as_object());
  out["arms"] = arms;
  out["vs_eager"] = vs_eager;
  out["vs_untar"] = vs_untar;

  // The targets, judged only on what was measured.
  json::object targets;
  if (measured(arms, "lazy")) {
    const auto &l = arms["lazy"].as_object();
    targets["lazy_fraction_le_0.15"] = num(l, "fraction") <= 0.15;
    if (vs_eager.contains("lazy")) {
      const auto &r = vs_eager["lazy"].as_object();
      const auto ge = [&](const char *k, double t) { return r.at(k).is_number() && r.at(k).to_number<double>() >= t; };
      targets["first_done_speedup_ge_5"] = ge("first_done_speedup", 5);
      targets["all_done_speedup_ge_2"] = ge("all_done_speedup", 2);
      targets["disk_write_ratio_le_0.333"] =
          r.at("disk_write_ratio").is_number() && r.at("disk_write_ratio").to_number<double>() <= 1.0 / 3;
    }
  }
  if (measured(arms, "warm")) targets["warm_lazy_within_10pct"] = num(arms["warm"].as_object(), "lazy_over_eager_all_done") <= 1.10;
  out["targets"] = targets;

  out["loader_cleanup"] = cs.stop_loaders();
  cs.finish(out);  // closes the source runtime, stops the proxy and nginx, removes the arm roots
  out["iterations"] = n;
  out["sandboxes"] = n;
  out["concurrency"] = n;
  out["note"] = cs.note();
  return out;
}

}  // namespace bench
