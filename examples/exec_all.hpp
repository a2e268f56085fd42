// Runs many execs at once from one thread for examples/rollout.cpp: completion callbacks (on the
// runtime's event-loop thread, where nothing may block) only store and notify; the caller waits.
#pragma once

#include <sandlet/sandlet.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace rollout {

// Collects N results delivered by completion callbacks, which run on the runtime's event-loop thread and
// must not block: they only store and notify; the main thread waits.
template <typename T>
class Collector {
 public:
  explicit Collector(size_t n) : slots_(n) {}
  void put(size_t i, T value) {
    std::lock_guard lock(mutex_);
    slots_[i] = std::move(value);
    ++done_;
    cv_.notify_all();
  }
  std::vector<T> wait(std::chrono::seconds limit = std::chrono::seconds(60)) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, limit, [&] { return done_ == slots_.size(); }))
      throw std::runtime_error("async completions did not all arrive within " + std::to_string(limit.count()) + " s");
    return std::move(slots_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<T> slots_;
  size_t done_ = 0;
};

// What an exec_async delivered: an error (the command could not run) or a result.
struct Outcome {
  std::optional<sandlet::Error> error;
  sandlet::ExecResult result;
};

// Starts every (sandbox, command) pair at once from this one thread and waits for all of them.
std::vector<Outcome> exec_all(const std::vector<sandlet::Sandbox*>& boxes,
                              const std::vector<sandlet::ExecOptions>& cmds) {
  Collector<Outcome> done(boxes.size());
  for (size_t i = 0; i < boxes.size(); ++i) {
    try {
      boxes[i]->exec_async(cmds[i], [&done, i](const sandlet::Error* err, sandlet::ExecResult r) {
        Outcome o;
        if (err != nullptr) o.error = *err;  // the error is valid only during the callback: copy it
        o.result = std::move(r);
        done.put(i, std::move(o));
      });
    } catch (const sandlet::Error& e) {  // could not even be started: the callback never runs
      done.put(i, Outcome{e, {}});
    }
  }
  return done.wait();
}

}  // namespace rollout
