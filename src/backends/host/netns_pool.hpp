// Network namespaces made ahead of time. Creating a network namespace is the most expensive part of
// starting a sandbox, so a background thread keeps a few ready and a create just takes one.
//
// The namespaces are owned by the host's user namespace, not the sandbox's: root inside a sandbox cannot
// reconfigure its network (no CAP_NET_ADMIN there), which is what "network: none" and later host-enforced
// policies want. Each comes with `lo` up, ports below 1024 bindable by anyone (the sandbox's root has
// no CAP_NET_BIND_SERVICE there) and unprivileged ICMP echo allowed.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "sys/fd.hpp"
#include "sys/side_thread.hpp"

namespace sandlet::host {

using sys::UniqueFd;
using sys::SideThread;

class NetnsPool final {
 public:
  explicit NetnsPool(size_t target);
  ~NetnsPool();
  NetnsPool(const NetnsPool&) = delete;
  NetnsPool& operator=(const NetnsPool&) = delete;

  // A ready namespace: from the pool, or made on the spot (same properties) when the pool is empty.
  UniqueFd take();
  // A namespace if one is ready now, else an empty fd: nothing waited for, nothing made. (A caller with
  // other work can do it first, then take().)
  UniqueFd try_take();
  // Starts making the first namespace on a background thread, so that it overlaps the rest of the
  // first create's work; the next take() waits for it. Does nothing after
  // the first take(): from the second on, the refill thread keeps the pool.
  void prefetch_first();
  // Makes one in the calling thread, which ends up back in the namespace it started in.
  static UniqueFd make();

 private:
  void refill_loop();
  UniqueFd pop_ready_locked();  // counts the take; empty when none is ready

  const size_t target_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<UniqueFd> ready_;
  bool stopping_ = false;
  size_t takes_ = 0;
  std::thread thread_;  // started on the second take(): a process creating one sandbox pays nothing
  bool prefetching_ = false;
  std::condition_variable prefetched_;
  SideThread prefetch_thread_;  // off the opener's CPU, so that it overlaps the open
};

// Moves the calling thread into network namespace `target` for its lifetime (e.g. around clone3, whose
// child inherits the creating thread's namespace), then back.
class ScopedNetns final {
 public:
  explicit ScopedNetns(int target);
  ~ScopedNetns();
  ScopedNetns(const ScopedNetns&) = delete;
  ScopedNetns& operator=(const ScopedNetns&) = delete;

 private:
  UniqueFd home_;
};

}  // namespace sandlet::host
