#include "runner.hpp"

#include "common.hpp"

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace bench {

void run_parallel(std::size_t n, unsigned threads, const std::function<void(std::size_t, unsigned)> &body) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex mu;
  auto worker = [&](unsigned t) {
    try {
      for (std::size_t i; !failed.load() && (i = next.fetch_add(1)) < n;) {
        throw_if_stopped();
        body(i, t);
      }
    } catch (...) {
      std::lock_guard lock(mu);
      if (!first_error) first_error = std::current_exception();
      failed = true;
    }
  };
  threads = std::max(1u, threads);
  if (threads == 1) {
    worker(0);
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (auto &th : pool) th.join();
  }
  if (first_error) std::rethrow_exception(first_error);
}

PairedRun run_paired(const TimedOp &ours, const TimedOp &peer, std::size_t n, unsigned concurrency,
                     std::size_t warmup) {
  PairedRun r;
  run_parallel(warmup, concurrency, [&](std::size_t, unsigned t) {
    ours(t);
    if (peer) peer(t);
  });

  r.ours_ns.assign(n, 0);
  if (peer) r.peer_ns.assign(n, 0);
  run_parallel(n, concurrency, [&](std::size_t i, unsigned t) {
    if (!peer) {
      r.ours_ns[i] = ours(t);
    } else if (i % 2 == 0) {
      r.ours_ns[i] = ours(t);
      r.peer_ns[i] = peer(t);
    } else {
      r.peer_ns[i] = peer(t);
      r.ours_ns[i] = ours(t);
    }
  });

  auto wall = [&](const TimedOp &op) {
    const auto t0 = now_ns();
    run_parallel(n, concurrency, [&](std::size_t, unsigned t) { op(t); });
    return static_cast<double>(now_ns() - t0) / 1e9;
  };
  r.ours_wall_s = wall(ours);
  if (peer) r.peer_wall_s = wall(peer);
  return r;
}

}  // namespace bench
