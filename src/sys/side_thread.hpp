// A thread for work meant to overlap the caller's, started on another CPU than the caller's.
//
// Why: a new thread is woken on a CPU of the scheduler's choosing and, under EEVDF, usually preempts
// the thread that created it when it lands on the same CPU. After an idle spell the scheduler here
// often put it there although the other CPU was idle, so a side job such as making a network namespace
// ran while its creator waited runnable: no overlap at all (bench/timeline.py; figures in
// bench/RESULTS.md, session 9). Starting the thread with the caller's CPUs minus the
// current one keeps the creator running. A caller allowed a single CPU gets a plain thread. A creator
// about to wait for the thread's result calls allow_all_cpus(): its own CPU is then free, and on a busy
// host the other CPUs may not be.
#pragma once
#include <pthread.h>
#include <sched.h>

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
  // Lets the thread run on every CPU its creator could. Only while the thread is known to be running
  // its body (e.g. it has not yet signalled completion under a lock the caller holds).
  void allow_all_cpus();

 private:
  pthread_t thread_{};
  bool started_ = false;
  bool kept_off_ = false;  // started with the creator's CPUs minus one
  cpu_set_t creators_cpus_{};
};

}  // namespace sandlet::sys
