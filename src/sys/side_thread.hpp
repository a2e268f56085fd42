// A thread for work meant to overlap the caller's, started on another CPU than the caller's.
//
// Why: a new thread is woken on a CPU of the scheduler's choosing and, under EEVDF, usually preempts
// the thread that created it when it lands on the same CPU. After an idle spell the scheduler often
// does exactly that (the other CPUs look no emptier than ours), so a side job such as making a network
// namespace (~0.5 ms of kernel work) ran while its creator waited runnable: no overlap at all
// (bench/timeline.py; 0.67 ms of the CLI's time after 200 ms idle). Starting the thread with the
// caller's CPUs minus the current one keeps the creator running. A caller allowed a single CPU gets a
// plain thread.
#pragma once
#include <pthread.h>

#include <functional>

namespace sandlet::sys {

class SideThread final {
 public:
  SideThread() = default;
  // Starts `body` (which must not throw). Throws sandlet::Error when no thread can be made.
  explicit SideThread(std::function<void()> body);
  ~SideThread() { join(); }
  SideThread(SideThread&& o) noexcept;
  SideThread& operator=(SideThread&& o) noexcept;
  SideThread(const SideThread&) = delete;
  SideThread& operator=(const SideThread&) = delete;

  bool joinable() const { return started_; }
  void join();

 private:
  pthread_t thread_{};
  bool started_ = false;
};

}  // namespace sandlet::sys
