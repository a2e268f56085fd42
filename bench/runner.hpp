// Runs timed operations N times on C threads: paired with a peer (for latency and ratios), and alone
// (for throughput).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace bench {

// One timed operation; `thread` is 0..C-1 (for per-thread state). Returns its duration in ns; throws on
// failure.
using TimedOp = std::function<std::uint64_t(unsigned thread)>;

// Calls body(i, thread) for i in [0, n) on `threads` threads (work shared through a counter). The first
// exception stops every thread and is rethrown here; so is a SIGINT/SIGTERM.
void run_parallel(std::size_t n, unsigned threads, const std::function<void(std::size_t, unsigned)> &body);

struct PairedRun {
  std::vector<std::uint64_t> ours_ns, peer_ns;  // peer_ns empty without a peer
  double ours_wall_s = 0, peer_wall_s = 0;      // from the separate throughput phases
  double ours_throughput() const { return ours_wall_s > 0 ? ours_ns.size() / ours_wall_s : 0; }
  double peer_throughput() const { return peer_wall_s > 0 ? peer_ns.size() / peer_wall_s : 0; }
};

// 1. warm-up: `warmup` iterations of each side, discarded;
// 2. paired: iteration i runs ours then peer (odd i: peer first, against order effects), on C threads;
// 3. throughput: n iterations of ours alone on C threads, wall clock; then the same for the peer.
// `peer` may be empty.
PairedRun run_paired(const TimedOp &ours, const TimedOp &peer, std::size_t n, unsigned concurrency,
                     std::size_t warmup);

}  // namespace bench
