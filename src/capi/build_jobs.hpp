// Asynchronous builds of one runtime handle (sandlet_build_async): each runs on its own thread (a build
// takes minutes and blocks on every step). Closing the handle sets the stop flag, which cancels them at
// their next check, and joins them, so that no completion runs after sandlet_runtime_close returns.
#pragma once
#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "common/error.hpp"

namespace sandlet::capi {

class BuildJobs final {
 public:
  BuildJobs() = default;
  BuildJobs(const BuildJobs&) = delete;
  BuildJobs& operator=(const BuildJobs&) = delete;
  ~BuildJobs() { stop_and_join(); }

  // Runs `fn(stop)` on a new thread. Throws FAILED_PRECONDITION once the handle closes.
  void start(std::function<void(const std::atomic<bool>& stop)> fn) {
    std::lock_guard lock(m_);
    if (closed_) throw Error(Code::kFailedPrecondition, "the runtime is closing: no new build");
    reap_locked();
    auto done = std::make_shared<std::atomic<bool>>(false);
    jobs_.push_back({std::thread([this, fn = std::move(fn), done] {
                       fn(stop_);
                       done->store(true);
                     }),
                     done});
  }

  void stop_and_join() noexcept {
    std::list<Job> jobs;
    {
      std::lock_guard lock(m_);
      closed_ = true;
      stop_.store(true);
      jobs.swap(jobs_);
    }
    for (auto& j : jobs)
      if (j.thread.joinable() && j.thread.get_id() != std::this_thread::get_id()) j.thread.join();
    for (auto& j : jobs)
      if (j.thread.joinable()) j.thread.detach();  // (a close from a build's own callback: it ends by itself)
  }

 private:
  struct Job {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void reap_locked() {
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::mutex m_;
  std::atomic<bool> stop_{false};
  bool closed_ = false;
  std::list<Job> jobs_;
};

}  // namespace sandlet::capi
