// sandlet-bench: measures sandlet through its C ABI against peers; prints one JSON object.
#include "capi.hpp"
#include "common.hpp"
#include "report.hpp"
#include "rootfs.hpp"
#include "scenarios.hpp"

#include <sandlet/sandlet.h>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>

namespace bench {
namespace fs = std::filesystem;
namespace json = boost::json;

std::atomic<bool> g_stop{false};

void throw_if_stopped() {
  if (g_stop.load(std::memory_order_relaxed)) throw BenchError("interrupted");
}

std::uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

fs::path self_exe_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

const std::vector<ScenarioInfo> &all_scenarios() {
  static const std::vector<ScenarioInfo> list{
      {"lifecycle", scenario_lifecycle, 200, "create -> exec /bin/true -> destroy via the library; peer: bwrap /bin/true"},
      {"lifecycle-cli", scenario_lifecycle_cli, 100, "`sandlet run ... -- /bin/true` as a process; peer: bwrap /bin/true"},
      {"run", scenario_run, 200, "one-shot sandlet_run of /bin/true via the library; peer: bwrap /bin/true"},
      {"fncall", scenario_fncall, 2000, "sandlet_call /bin/true in pooled containers; peers: sandlet_run per call, bwrap"},
      {"pool", scenario_pool, 1000, "FnCall hand-over time (taking an idle container) under a burst of N calls"},
      {"exec", scenario_exec, 1000, "N execs of /bin/true in one sandbox; peer: host fork+exec /bin/true"},
      {"idle-density", scenario_idle_density, 200, "N idle sandboxes: memory per sandbox; peer: N idle bwrap sleeps"},
      {"workspace-provision", scenario_workspace_provision, 64,
       "N sandboxes on [rootfs, M MB workspace]: one layer import; peer: tar -xzf per sandbox"},
      {"import", scenario_import, 3, "MB/s of importing the M MB workspace into a fresh store; peer: mkfs.erofs"},
      {"snapshot", scenario_snapshot, 5, "snapshot of M MB of changes (latency, frozen time); peers: cp -a, tar -cf"},
      {"fork", scenario_fork, 3, "fork into N children with M MB of changes; peers: cp -a / tar+untar per child"},
      {"policy", scenario_policy, 30,
       "the default seccomp profile's cost: exec, find, syscall loops with and without its program on the host; "
       "the same in a sandbox; peer: bwrap (no filter)"},
      {"net", scenario_net, 200,
       "egress via the node gateway: connect+echo latency (peers: uplink process, veth netns), create with egress "
       "vs none (and bwrap), memory and net_update over --sandboxes N (default 1000)"},
      {"pause", scenario_pause, 1000,
       "N sandboxes of one label paused, then resumed, by one call each (sandlet_jobs.h); MemAvailable before/after"},
      {"qos", scenario_qos, 30,
       "step latency of a latency-sensitive sandbox alone and beside best-effort spinners on half, then all, the CPUs, "
       "without and with the batch class (label sandlet/priority=batch)"},
      {"session", scenario_session, 500,
       "N commands through one shell session; peers: a host sh over a pty with markers, a fresh exec sh -c (and with tty)"},
      {"microvm", scenario_microvm, 5,
       "microvm create -> first exec vs plain QEMU booting the same kernel, initramfs and disks to a marker; "
       "exec p50 vs a container; host memory per idle VM vs plain QEMU"},
      {"copy", scenario_copy, 10,
       "a task directory of M MiB (default 64) copied into a sandbox and back out; peer: a tar stream through exec"},
      {"cold-start", scenario_cold_start, 32,
       "N sandboxes run a Python test on a >=1 GB image from a throttled store: eager pull, untar, lazy pull"},
  };
  return list;
}

std::size_t iterations_of(const Context &ctx) {
  if (ctx.opt.iterations > 0) return ctx.opt.iterations;
  for (const auto &s : all_scenarios())
    if (ctx.opt.scenario == s.name) return s.default_iterations;
  return 100;
}

namespace {
void usage(std::FILE *out) {
  std::fprintf(out,
               "usage: sandlet-bench SCENARIO [--iterations N] [--concurrency C] [--rootfs DIR] [--root DIR]\n"
               "                     [--json] [--warmup W] [--workers N] [--cli PATH] [--settle S] [--no-peer]\n"
               "Prints one JSON object (pretty; one line with --json). Scenarios:\n");
  for (const auto &s : all_scenarios())
    std::fprintf(out, "  %-14s %s (default N=%zu)\n", s.name, s.summary, s.default_iterations);
  std::fprintf(out,
               "Options:\n"
               "  --iterations N   iterations (idle-density: number of sandboxes)\n"
               "  --concurrency C  threads issuing operations at once (default 1)\n"
               "  --rootfs DIR     root filesystem (default: $SANDLET_BENCH_ROOTFS, else the build tree's\n"
               "                   test-rootfs, else one built with test/fixtures/make-rootfs.sh)\n"
               "  --root DIR       runtime root (default: a temp dir under /tmp, removed at exit)\n"
               "  --warmup W       discarded warm-up iterations per side (default 5)\n"
               "  --workers N      runtime worker threads (default: the library's)\n"
               "  --cli PATH       the sandlet CLI for lifecycle-cli (default: next to this program)\n"
               "  --settle S       idle-density: seconds to wait before reading memory (default 2)\n"
               "  --no-peer        skip the peer comparison\n"
               "  --sandboxes N    workspace-provision, fork: number of sandboxes / children (default 64); net: the\n"
               "                   fleet measured for memory and net_update (default 1000)\n"
               "  --workspace-mb M workspace-provision, import: workspace size in MiB (default 500; generated\n"
               "                   once, cached under /var/cache/sandlet/bench-workspace-<M>mb/); snapshot,\n"
               "                   fork: MiB of changes (default 100); copy: the tree's size (default 64)\n"
               "  --no-warm-pool   open the runtime without its warm pool: every create starts cold\n"
               "  --environments N lifecycle: cycle through N environments (the rootfs plus one small layer\n"
               "                   each), as a trainer interleaving N tasks does (default 1)\n"
               "  --idle-ms N      lifecycle, lifecycle-cli, run: sleep N ms before each timed iteration (both\n"
               "                   sides): the latency of a create after an idle spell, when the kernel's\n"
               "                   fast paths have gone cold (throughput is then not reported)\n"
               "  --host-rss-gib N touch N GiB in this process first: the cost of creating sandboxes from a\n"
               "                   large host process (a trainer) shows up in lifecycle and exec\n"
               "  --image DIR      cold-start: the image's root (default: bench/cold_start_image.sh builds\n"
               "                   and caches the issue's >= 1 GB image)\n"
               "  --n N            cold-start: sandboxes per arm (default 32; same as --sandboxes)\n"
               "  --rate MBPS      cold-start: bandwidth of the store, MB/s (default 200)\n"
               "  --store-kind K   cold-start: push to `dir` (file://, served by nginx) or `http` (WebDAV PUT)\n"
               "  --arms LIST      cold-start: of eager,untar,lazy,warm (default all, in that order)\n"
               "  --warm-rounds R  cold-start: rounds of the warm comparison (default 1)\n"
               "  --fetch-unit B   cold-start: bytes the lazy loader fetches per request (default: the library's)\n"
               "  --json           one-line JSON\n"
               "Exit status: 0 ok, 1 error (JSON has \"error\"), 2 usage, 3 leftovers after the run.\n");
}

unsigned long parse_number(const char *flag, const char *value, unsigned long min) {
  char *end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < min) {
    std::fprintf(stderr, "sandlet-bench: %s wants an integer >= %lu, got '%s'\n", flag, min, value);
    std::exit(2);
  }
  return v;
}

Options parse_args(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sandlet-bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--iterations" || a == "-n") {
      o.iterations = parse_number("--iterations", value(), 1);
    } else if (a == "--concurrency" || a == "-c") {
      o.concurrency = static_cast<unsigned>(parse_number("--concurrency", value(), 1));
    } else if (a == "--warmup") {
      o.warmup = parse_number("--warmup", value(), 0);
    } else if (a == "--workers") {
      o.workers = static_cast<unsigned>(parse_number("--workers", value(), 0));
    } else if (a == "--rootfs") {
      o.rootfs = value();
    } else if (a == "--root") {
      o.root = value();
    } else if (a == "--cli") {
      o.cli = value();
    } else if (a == "--settle") {
      char *end = nullptr;
      const char *v = value();
      o.settle_s = std::strtod(v, &end);
      if (end == v || *end != '\0' || o.settle_s < 0) {
        std::fprintf(stderr, "sandlet-bench: --settle wants seconds >= 0, got '%s'\n", v);
        std::exit(2);
      }
    } else if (a == "--host-rss-gib") {
      const char *v = value();
      char *end = nullptr;
      unsigned long n = std::strtoul(v, &end, 10);
      if (end == v || *end != '\0' || n > 1024) {
        std::fprintf(stderr, "sandlet-bench: --host-rss-gib wants 0..1024, got '%s'\n", v);
        std::exit(2);
      }
      o.host_rss_gib = static_cast<unsigned>(n);
    } else if (a == "--image") {
      o.image = value();
    } else if (a == "--n") {
      o.sandboxes = parse_number("--n", value(), 1);
    } else if (a == "--rate") {
      const char *v = value();
      char *end = nullptr;
      o.rate_mbps = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(o.rate_mbps > 0)) {
        std::fprintf(stderr, "sandlet-bench: --rate wants MB/s > 0, got '%s'\n", v);
        std::exit(2);
      }
    } else if (a == "--store-kind") {
      o.store_kind = value();
    } else if (a == "--arms") {
      o.arms = value();
    } else if (a == "--fetch-unit") {
      o.fetch_unit = static_cast<uint32_t>(parse_number("--fetch-unit", value(), 65536));
    } else if (a == "--warm-rounds") {
      o.warm_rounds = static_cast<unsigned>(parse_number("--warm-rounds", value(), 1));
    } else if (a == "--sandboxes") {
      o.sandboxes = parse_number("--sandboxes", value(), 1);
    } else if (a == "--workspace-mb") {
      o.workspace_mb = static_cast<unsigned>(parse_number("--workspace-mb", value(), 1));
    } else if (a == "--environments") {
      o.environments = static_cast<unsigned>(parse_number("--environments", value(), 1));
    } else if (a == "--idle-ms") {
      o.idle_ms = static_cast<unsigned>(parse_number("--idle-ms", value(), 0));
    } else if (a == "--no-warm-pool") {
      o.warm_pool = false;
    } else if (a == "--no-peer") {
      o.peer = false;
    } else if (a == "--json") {
      o.one_line = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "sandlet-bench: unknown option %s\n", a.c_str());
      usage(stderr);
      std::exit(2);
    } else if (o.scenario.empty()) {
      o.scenario = a;
    } else {
      std::fprintf(stderr, "sandlet-bench: one scenario at a time (got '%s' and '%s')\n", o.scenario.c_str(), a.c_str());
      std::exit(2);
    }
  }
  if (o.scenario.empty()) {
    usage(stderr);
    std::exit(2);
  }
  return o;
}

void on_signal(int) { g_stop.store(true); }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}
}  // namespace

int run(int argc, char **argv) {
  Context ctx;
  ctx.opt = parse_args(argc, argv);
  const ScenarioInfo *scenario = nullptr;
  for (const auto &s : all_scenarios())
    if (ctx.opt.scenario == s.name) scenario = &s;
  if (scenario == nullptr) {
    std::fprintf(stderr, "sandlet-bench: unknown scenario '%s'\n", ctx.opt.scenario.c_str());
    usage(stderr);
    return 2;
  }
  install_signal_handlers();
  ctx.exe_dir = self_exe_dir();

  json::object out;
  out["scenario"] = scenario->name;
  out["iterations"] = iterations_of(ctx);
  out["concurrency"] = ctx.opt.concurrency;
  out["date"] = iso_date_utc();
  out["host"] = host_info();
  out["warm_pool"] = ctx.opt.warm_pool;
  if (ctx.opt.environments > 1) out["environments"] = ctx.opt.environments;
  if (ctx.opt.idle_ms > 0) out["idle_ms"] = ctx.opt.idle_ms;
  // A large resident host process, as a PyTorch trainer is: page tables a fork would have to copy.
  std::vector<char> ballast;
  if (ctx.opt.host_rss_gib) {
    ballast.assign(static_cast<size_t>(ctx.opt.host_rss_gib) << 30, 1);
    out["host_rss_gib"] = ctx.opt.host_rss_gib;
  }

  TempDir rootfs_scratch;  // only used when a rootfs has to be built
  TempDir root_tmp;        // only used without --root
  int status = 0;
  const auto cgroups_before = sandlet_cgroups();
  try {
    if (sandlet_abi_version() != SANDLET_ABI_VERSION)
      throw BenchError("libsandlet ABI " + std::to_string(sandlet_abi_version()) + ", bench built for " +
                       std::to_string(SANDLET_ABI_VERSION));
    ctx.rootfs = locate_rootfs(ctx.opt.rootfs, ctx.exe_dir, rootfs_scratch);
    if (ctx.opt.root.empty()) {
      root_tmp.create("sandlet-bench.");
      ctx.root = root_tmp.path();
    } else {
      ctx.root = fs::absolute(ctx.opt.root);
    }
    out["rootfs"] = ctx.rootfs.string();
    out["root"] = ctx.root.string();
    json::object result = scenario->run(ctx);  // its runtime is closed when it returns
    for (auto &kv : result) out[kv.key()] = std::move(kv.value());
  } catch (const std::exception &e) {
    out["error"] = e.what();
    std::fprintf(stderr, "sandlet-bench: %s: %s\n", scenario->name, e.what());
    status = 1;
  }

  // An explicit gc, as an operator would run: it also removes the parent cgroups runtimes keep between
  // runs (when no other process uses them), so that only real leftovers remain to be reported.
  if (!ctx.root.empty()) {
    try {
      Runtime rt(ctx.root, 0, /*warm_pool=*/false);
      check(sandlet_runtime_gc(rt.get(), nullptr), "sandlet_runtime_gc");
    } catch (const std::exception &) {
      // The leftover check below reports whatever remains.
    }
  }
  json::object left = leftovers(ctx.root, ctx.rootfs, cgroups_before);
  if (!left["clean"].as_bool()) {
    std::fprintf(stderr, "sandlet-bench: leftovers after %s: %s\n", scenario->name, json::serialize(left).c_str());
    if (status == 0) status = 3;
  }
  out["leftovers"] = std::move(left);
  root_tmp.remove();
  rootfs_scratch.remove();

  const std::string text = to_text(out, !ctx.opt.one_line);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  return g_stop ? 130 : status;
}

}  // namespace bench

int main(int argc, char **argv) {
  try {
    return bench::run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "sandlet-bench: %s\n", e.what());
    return 1;
  }
}
