// Shared declarations of sandlet-bench: options, the run context, clock and stop flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace bench {

struct Options {
  std::string scenario;
  std::size_t iterations = 0;   // 0 = the scenario's default
  unsigned concurrency = 1;
  std::size_t warmup = 5;       // per side, discarded
  std::string rootfs;           // --rootfs; else $SANDLET_BENCH_ROOTFS; else built
  std::string root;             // --root; else a temp dir removed at exit
  std::string cli;              // --cli; else `sandlet` next to this executable
  unsigned workers = 0;         // --workers: runtime worker threads (0 = library default)
  double settle_s = 2.0;        // idle-density: wait before reading memory
  bool peer = true;             // --no-peer skips the comparison
  bool warm_pool = true;        // --no-warm-pool: every create starts cold
  unsigned environments = 1;    // --environments N: lifecycle cycles through N environments (interleaved tasks)
  unsigned idle_ms = 0;         // --idle-ms N: lifecycle(-cli) sleep N ms before each timed iteration
  unsigned host_rss_gib = 0;    // --host-rss-gib: make this process resident in N GiB first (a trainer's size)
  std::size_t sandboxes = 0;    // --sandboxes: workspace-provision (0 = its default, 64)
  unsigned workspace_mb = 0;    // --workspace-mb: workspace-provision and import (0 = default, 500)
  bool one_line = false;        // --json: one line instead of pretty-printed
  // cold-start (issue 17); --n N sets `sandboxes`
  std::string image;            // --image DIR: the image's root (default: bench/cold_start_image.sh builds it)
  double rate_mbps = 0;         // --rate MB/s of the throttled store (0 = default, 200)
  std::string store_kind;       // --store-kind http|dir: how the image is pushed (default dir)
  std::string arms;             // --arms eager,untar,lazy,warm (default all)
  unsigned warm_rounds = 0;     // --warm-rounds R (default 1)
  uint32_t fetch_unit = 0;      // --fetch-unit B: the lazy loader's (cold-start; 0 = the library's default)
};

struct Context {
  Options opt;
  std::filesystem::path rootfs;   // absolute, has bin/busybox
  std::filesystem::path root;     // runtime root (absolute)
  std::filesystem::path exe_dir;  // directory of this executable
};

// Anything that makes a measurement meaningless. Scenarios throw it; main reports it as JSON.
struct BenchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Set by SIGINT/SIGTERM; loops stop at the next iteration and everything is cleaned up.
extern std::atomic<bool> g_stop;
void throw_if_stopped();

std::uint64_t now_ns();  // CLOCK_MONOTONIC

std::filesystem::path self_exe_dir();

}  // namespace bench
